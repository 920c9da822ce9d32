//! `rolegate suite` and `rolegate run`.

use std::path::PathBuf;

use super::{EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, Format, ModelArgs, out};
use crate::eval::scenarios::{SingleRow, bundled_single, parse_single_table, run_single, run_single_with};
use crate::eval::{DeciderSpec, Env, LabConfig};
use crate::model::ModelSpec;

fn load(files: &[PathBuf]) -> Result<Vec<SingleRow>, String> {
    if files.is_empty() {
        return bundled_single().map_err(|e| e.to_string());
    }
    let mut rows = Vec::new();
    for f in files {
        let name = f.display().to_string();
        let text = std::fs::read_to_string(f).map_err(|e| format!("{name}: {e}"))?;
        rows.extend(parse_single_table(&text, &name).map_err(|e| e.to_string())?);
    }
    Ok(rows)
}

/// The decider a `--model` value selects and the environment (prices) it runs in.
fn model_setup(model: Option<&str>, args: &ModelArgs) -> Result<(Option<DeciderSpec>, Env), String> {
    let spec = model.map(str::parse::<ModelSpec>).transpose().map_err(|e| e.to_string())?;
    let specs: Vec<&ModelSpec> = spec.iter().collect();
    let endpoint = args.endpoint(&specs)?;
    let env = args.env(&specs)?;
    let decider =
        spec.map(|m| DeciderSpec::from_model(&m, endpoint.as_ref())).transpose().map_err(|e| e.to_string())?;
    Ok((decider, env))
}

/// Runs the tables and prints one line per row; with `model`, every row runs with that
/// model instead of its fake.
pub(crate) async fn suite(files: &[PathBuf], format: Format, model: Option<&str>, args: &ModelArgs) -> u8 {
    let rows = match load(files) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let (decider, env) = match model_setup(model, args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let mut all_match = true;
    for row in &rows {
        let run = match &decider {
            None => run_single(row, &env).await,
            Some(d) => match row.lab_config() {
                Ok(cfg) => run_single_with(row, &env, LabConfig { decider: d.clone(), ..cfg }).await,
                Err(e) => Err(e),
            },
        };
        let outcome = match run {
            Ok(o) => o,
            Err(e) => {
                eprintln!("rolegate: {e}");
                return EXIT_USAGE;
            }
        };
        all_match &= outcome.matches;
        let line = match format {
            Format::Table => outcome.table_line(),
            Format::Jsonl => serde_json::to_string(&outcome).unwrap_or_default(),
        };
        if !out(&line) {
            break;
        }
    }
    if all_match { EXIT_OK } else { EXIT_MISMATCH }
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
    let (decider, env) = match model_setup(Some(model), args) {
        Ok((Some(d), env)) => (d, env),
        Ok((None, _)) => return EXIT_USAGE,
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
