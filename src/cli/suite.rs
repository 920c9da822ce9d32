//! `rolegate suite` and `rolegate run`.

use std::path::PathBuf;

use super::{EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, Format, out};
use crate::eval::scenarios::{SingleRow, bundled_single, parse_single_table, run_single};
use crate::eval::{Env, LabConfig};
use crate::model::FakeKind;

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

/// Runs the tables and prints one line per row.
pub(crate) async fn suite(files: &[PathBuf], format: Format) -> u8 {
    let rows = match load(files) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let env = match Env::bundled() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let mut all_match = true;
    for row in &rows {
        let outcome = match run_single(row, &env).await {
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
pub(crate) async fn run_one(goal: &str, model: &str, user: &str, task: &str, grants: &[String]) -> u8 {
    let Some(kind) = model.strip_prefix("fake:") else {
        eprintln!("rolegate: --model must be fake:<kind>");
        return EXIT_USAGE;
    };
    let kind: FakeKind = match kind.parse() {
        Ok(k) => k,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let env = match Env::bundled() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let cfg = LabConfig { user: user.into(), task: task.into(), grants: grants.to_vec(), ..LabConfig::fake(kind) };
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
