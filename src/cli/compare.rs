//! `rolegate compare`: one task as a single agent and as three roles, the role scopes and
//! the route table.

use super::{EXIT_OK, EXIT_USAGE, ReportFormat, out};
use crate::eval::Env;
use crate::eval::single_vs_multi::compare;

/// Runs the comparison and prints it.
pub(crate) async fn run(format: ReportFormat) -> u8 {
    let result = match Env::bundled() {
        Ok(env) => compare(&env).await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let cmp = match result {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    match format {
        ReportFormat::Table => {
            for l in cmp.lines() {
                if !out(&l) {
                    break;
                }
            }
        }
        ReportFormat::Json => {
            out(&serde_json::to_string(&cmp).unwrap_or_default());
        }
    }
    EXIT_OK
}
