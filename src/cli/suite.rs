//! `rolegate suite` (both tables) and `rolegate run` (single design).

use std::path::PathBuf;
use std::sync::Arc;

use super::{EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, Format, ModelArgs, RoleModelArgs, out};
use crate::eval::multi_scenarios::{AnyRow, MultiOutcome, bundled_multi, parse_any_table, run_multi, run_multi_with};
use crate::eval::scenarios::{SingleOutcome, bundled_single, run_single_with};
use crate::eval::{DeciderSpec, Env, LabConfig};
use crate::model::ModelSpec;
use crate::multi::{Behaviours, MultiEnv, RoleSetup};

/// The rows to run: with no file, the bundled single-agent table then the bundled
/// multi-agent one; with files, each line is a single or a multi row by its `design`.
fn load(files: &[PathBuf]) -> Result<Vec<AnyRow>, String> {
    if files.is_empty() {
        let mut rows: Vec<AnyRow> =
            bundled_single().map_err(|e| e.to_string())?.into_iter().map(AnyRow::Single).collect();
        rows.extend(bundled_multi().map_err(|e| e.to_string())?.into_iter().map(AnyRow::Multi));
        return Ok(rows);
    }
    let mut rows = Vec::new();
    for f in files {
        let name = f.display().to_string();
        let text = std::fs::read_to_string(f).map_err(|e| format!("{name}: {e}"))?;
        rows.extend(parse_any_table(&text, &name).map_err(|e| e.to_string())?);
    }
    Ok(rows)
}

/// What `--model` (and the per-role flags) select: the single rows' decider, the multi
/// rows' real role models (`None` when every role keeps its behaviour), and the
/// environment priced for them.
struct Models {
    decider: Option<DeciderSpec>,
    roles: Option<RoleSetup>,
    env: Env,
}

/// The models a `--model` value and the per-role flags select.
fn model_setup(model: Option<&str>, roles: &RoleModelArgs, args: &ModelArgs) -> Result<Models, String> {
    let spec = model.map(str::parse::<ModelSpec>).transpose().map_err(|e| e.to_string())?;
    let role_specs = roles.resolve(spec.as_ref().unwrap_or(&ModelSpec::default()))?;
    let mut specs: Vec<&ModelSpec> = spec.iter().collect();
    specs.extend(role_specs.all().into_iter().map(|(_, m)| m));
    let endpoint = args.endpoint(&specs)?;
    let env = args.env(&specs)?;
    let decider =
        spec.map(|m| DeciderSpec::from_model(&m, endpoint.as_ref())).transpose().map_err(|e| e.to_string())?;
    let setup =
        RoleSetup::from_specs(Behaviours::default(), &role_specs, endpoint.as_ref()).map_err(|e| e.to_string())?;
    Ok(Models { decider, roles: (!setup.all_fake()).then_some(setup), env })
}

/// What one row did.
enum Outcome {
    Single(SingleOutcome),
    Multi(MultiOutcome),
}

impl Outcome {
    fn matches(&self) -> bool {
        match self {
            Self::Single(o) => o.matches,
            Self::Multi(o) => o.matches,
        }
    }

    fn emails(&self) -> usize {
        match self {
            Self::Single(o) => o.emails,
            Self::Multi(o) => o.emails,
        }
    }

    fn line(&self, format: Format) -> String {
        match (self, format) {
            (Self::Single(o), Format::Table) => o.table_line(),
            (Self::Multi(o), Format::Table) => o.table_line(),
            (Self::Single(o), Format::Jsonl) => serde_json::to_string(o).unwrap_or_default(),
            (Self::Multi(o), Format::Jsonl) => serde_json::to_string(o).unwrap_or_default(),
        }
    }
}

/// Runs the tables and prints one line per row, in table order. Rows are independent
/// (each builds its own world), so they all run concurrently. With `model`, every single
/// row runs with that model instead of its fake; an `openai:` model (or a per-role one)
/// also replaces the role behaviours of the multi rows (a `fake:` kind leaves them be).
pub(crate) async fn suite(
    files: &[PathBuf],
    format: Format,
    model: Option<&str>,
    role_models: &RoleModelArgs,
    args: &ModelArgs,
) -> u8 {
    let rows = match load(files) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let envs = model_setup(model, role_models, args).and_then(|Models { decider, roles, env }| {
        let menv = MultiEnv::new(&env).map_err(|e| e.to_string())?;
        Ok((Arc::new(env), menv, decider, roles))
    });
    let (env, menv, decider, roles) = match envs {
        Ok(e) => e,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let tasks: Vec<_> = rows
        .into_iter()
        .map(|row| {
            let (env, menv, decider, roles) = (env.clone(), menv.clone(), decider.clone(), roles.clone());
            tokio::spawn(async move {
                match row {
                    AnyRow::Single(r) => match r.lab_config() {
                        Ok(cfg) => {
                            let cfg = match decider {
                                Some(d) => LabConfig { decider: d, ..cfg },
                                None => cfg,
                            };
                            run_single_with(&r, &env, cfg).await.map(Outcome::Single)
                        }
                        Err(e) => Err(e),
                    },
                    AnyRow::Multi(r) => match roles {
                        Some(setup) => run_multi_with(&r, &menv, setup.with_behaviours(r.roles).models()).await,
                        None => run_multi(&r, &menv).await,
                    }
                    .map(|(_, o)| Outcome::Multi(o)),
                }
                .map_err(|e| e.to_string())
            })
        })
        .collect();
    let (mut total, mut matching, mut emails) = (0, 0, 0);
    for task in tasks {
        let outcome = match task.await.map_err(|e| e.to_string()).and_then(|r| r) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("rolegate: {e}");
                return EXIT_USAGE;
            }
        };
        total += 1;
        matching += usize::from(outcome.matches());
        emails += outcome.emails();
        if !out(&outcome.line(format)) {
            break;
        }
    }
    if format == Format::Table {
        out(&format!("{matching} of {total} rows match their expectation; e-mails sent in all rows: {emails}"));
    }
    if matching == total { EXIT_OK } else { EXIT_MISMATCH }
}

/// Runs one goal and prints the trace and the outcome.
pub(crate) async fn run_one(
    goal: &str,
    model: &str,
    args: &ModelArgs,
    user: &str,
    task: &str,
    grants: &[String],
) -> u8 {
    let (decider, env) = match model_setup(Some(model), &RoleModelArgs::default(), args) {
        Ok(Models { decider: Some(d), env, .. }) => (d, env),
        Ok(Models { decider: None, .. }) => return EXIT_USAGE,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let cfg =
        LabConfig { decider, user: user.into(), task: task.into(), grants: grants.to_vec(), ..LabConfig::default() };
    let mut lab = cfg.build(&env);
    match lab.agent.run(goal, "run-1").await {
        Ok(run) => {
            for l in run.trace().lines() {
                out(&l);
            }
            out(&format!(
                "{} {} calls={:?} emails={}",
                run.state.status().name(),
                run.reason(),
                run.calls(),
                lab.world.outbox.len()
            ));
            EXIT_OK
        }
        Err(e) => {
            eprintln!("rolegate: {e}");
            EXIT_USAGE
        }
    }
}
