//! `rolegate run … --store FILE` on a real model (`--model openai:NAME`, and for the three
//! roles `--planner-model` and the others): the server settings a durable run keeps in its
//! spec so that `rolegate resume` builds the same client again. The key is not kept
//! (`ROLEGATE_API_KEY` is read again at resume). `--cache`, `--replay` and `--prices` are
//! refused: a durable run keeps its model exchanges in the store, and is priced by the
//! bundled table (or at zero with `--zero-price`).

use rolegate::design::Design;
use rolegate::model::ModelSpec;
use rolegate::multi::Behaviours;
use rolegate::store::HttpSpec;

use super::{ModelArgs, RoleModelArgs};

/// The server settings of a durable run of `design` on `model` (per role for multi), or
/// `None` when it runs no real model.
///
/// # Errors
/// A readable message for a setting that does not resolve or a flag a durable run does
/// not take.
pub(crate) fn http_spec(
    design: Design,
    model: &str,
    behaviours: Behaviours,
    model_args: &ModelArgs,
    role_models: &RoleModelArgs,
) -> Result<Option<HttpSpec>, String> {
    if design == Design::Fixed {
        return Ok(None);
    }
    let flags_fit = || {
        if model_args.cache.is_some() || model_args.replay.is_some() {
            return Err("a durable run keeps its model exchanges in the store: leave out --cache and --replay \
                        (or --durability exit for a single run)"
                .to_string());
        }
        if model_args.prices.is_some() {
            return Err("a durable run is priced by the bundled price table: leave out --prices (--zero-price \
                        prices an unlisted model at zero)"
                .to_string());
        }
        Ok(())
    };
    if design == Design::Multi {
        let spec: ModelSpec = model.parse().map_err(|e| format!("{e}"))?;
        let specs = role_models.resolve(&spec)?;
        if !specs.all().iter().any(|(_, m)| m.needs_endpoint()) {
            return Ok(None);
        }
        flags_fit()?;
        let (setup, _) = super::design::role_setup(&spec, role_models, behaviours, model_args)?;
        let Some(any) = [&setup.planner, &setup.researcher, &setup.reviewer].into_iter().flatten().next() else {
            return Ok(None);
        };
        let http = HttpSpec::of(&any.endpoint, model_args.zero_price).map_err(|e| e.to_string())?;
        return Ok(Some(http.with_roles(&setup)));
    }
    if !model.starts_with("openai:") {
        return Ok(None);
    }
    let spec: ModelSpec = model.parse().map_err(|e| format!("{e}"))?;
    flags_fit()?;
    let endpoint = model_args.endpoint(&[&spec])?.ok_or("an openai: model needs a server")?;
    model_args.env(&[&spec])?;
    let config = spec.http_config(Some(&endpoint)).map_err(|e| e.to_string())?.ok_or("an openai: model")?;
    let http = HttpSpec::of(&endpoint, model_args.zero_price).map_err(|e| e.to_string())?;
    Ok(Some(http.with_model(&config)))
}
