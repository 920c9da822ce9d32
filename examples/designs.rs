//! Designs side by side on fake models: the six plan checks, the seed's four tasks under
//! the fixed, plan, ReAct and three-role designs, and PolicyPal's parallel calls and
//! search guard.
//!
//! Run with `cargo run --example designs`.

use rolegate::agent::Env;
use rolegate::design::{PalKind, TaskGroup, bundled_tasks};
use rolegate::eval::{DESIGN_TABLE_COLUMNS, design_table, median, pal_row, plan_checks};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), rolegate::Error> {
    let env = Env::bundled()?;
    println!("plan checks:");
    for row in plan_checks(&env, "Status of T-601 and our refund policy?").await? {
        println!("{}", row.table_line());
    }
    let tasks = bundled_tasks()?;
    let seed: Vec<_> = tasks.iter().filter(|t| t.group == TaskGroup::Designs).cloned().collect();
    println!("\ndesigns:");
    for row in design_table(&env, &seed, &DESIGN_TABLE_COLUMNS).await? {
        println!("{}", row.table_line());
    }
    println!("\npolicypal:");
    let mut steps = Vec::new();
    for kind in [PalKind::Sequential, PalKind::Parallel] {
        let mut calls = Vec::new();
        for task in &tasks {
            let row = pal_row(&env, task, kind, true).await?;
            println!("{}", row.table_line());
            calls.push(row.model_calls);
        }
        steps.push((kind.name(), median(&calls)));
    }
    println!("median steps: {steps:?}");
    let p1 = tasks.iter().find(|t| t.id == "p1").cloned().into_iter();
    for task in p1 {
        for guard in [true, false] {
            println!("{}", pal_row(&env, &task, PalKind::Flail, guard).await?.table_line());
        }
    }
    Ok(())
}
