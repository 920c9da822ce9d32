//! Designs side by side on fake models: the experiment table (utility, covered, model
//! calls, tokens, credits and wall time per design), then every section `rolegate compare`
//! prints, each under its header row and with its legend: the six plan checks, the seed's
//! four tasks under the fixed, plan, ReAct and three-role designs, and PolicyPal's
//! parallel calls and search guard.
//!
//! Run with `cargo run --example designs`.

use rolegate::agent::Env;
use rolegate::design::bundled_tasks;
use rolegate::eval::compare_report;
use rolegate::suite::ExperimentTable;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), rolegate::Error> {
    let env = Env::bundled()?;
    let report = compare_report(&env, &bundled_tasks()?).await?;
    println!("== experiment table");
    for line in ExperimentTable::of_designs(&report.designs, "fakes").table_lines() {
        println!("{line}");
    }
    println!();
    for line in report.table_lines() {
        println!("{line}");
    }
    Ok(())
}
