//! `rolegate suite` (both tables) and `rolegate run` (single design).

use std::path::PathBuf;
use std::sync::Arc;

use super::{EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, Format, out};
use crate::eval::multi_scenarios::{AnyRow, MultiOutcome, bundled_multi, parse_any_table, run_multi};
use crate::eval::scenarios::{SingleOutcome, bundled_single, run_single};
use crate::eval::{Env, LabConfig};
use crate::model::FakeKind;
use crate::multi::MultiEnv;

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
/// (each builds its own world), so they all run concurrently.
pub(crate) async fn suite(files: &[PathBuf], format: Format) -> u8 {
    let rows = match load(files) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let envs = Env::bundled().map_err(|e| e.to_string()).and_then(|env| {
        let menv = MultiEnv::new(&env).map_err(|e| e.to_string())?;
        Ok((Arc::new(env), menv))
    });
    let (env, menv) = match envs {
        Ok(e) => e,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let tasks: Vec<_> = rows
        .into_iter()
        .map(|row| {
            let (env, menv) = (env.clone(), menv.clone());
            tokio::spawn(async move {
                match row {
                    AnyRow::Single(r) => run_single(&r, &env).await.map(Outcome::Single),
                    AnyRow::Multi(r) => run_multi(&r, &menv).await.map(|(_, o)| Outcome::Multi(o)),
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
