//! `rolegate compare`: designs side by side on the bundled tasks.

use clap::ValueEnum;

use super::{EXIT_OK, EXIT_USAGE, out};
use crate::design::{bundled_tasks, compare_report};
use crate::eval::Env;

/// Output formats of `compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    /// Aligned text, one section after another.
    Table,
    /// One JSON document.
    Json,
}

/// Runs every comparison and prints it.
pub(crate) async fn compare(format: CompareFormat) -> u8 {
    let report = async {
        let env = Env::bundled().map_err(|e| e.to_string())?;
        let tasks = bundled_tasks().map_err(|e| e.to_string())?;
        compare_report(&env, &tasks).await.map_err(|e| e.to_string())
    };
    let report = match report.await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    match format {
        CompareFormat::Table => {
            for line in report.table_lines() {
                if !out(&line) {
                    break;
                }
            }
        }
        CompareFormat::Json => {
            out(&serde_json::to_string_pretty(&report).unwrap_or_default());
        }
    }
    EXIT_OK
}
