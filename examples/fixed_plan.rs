//! A fixed plan and an obedient fake model on the same loop: the plan needs no model, and
//! the model that obeys the injected note in T-602 is refused by code.
//!
//! Run with `cargo run --example fixed_plan`.

use rolegate::agent::Env;
use rolegate::agent::FixedPlan;
use rolegate::lab::{DeciderSpec, LabConfig};
use rolegate::model::FakeKind;
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), rolegate::Error> {
    let env = Env::bundled()?;
    let plan = FixedPlan::new(vec![
        ("get_ticket".into(), json!({"ticket_id": "T-601"})),
        ("lookup_document".into(), json!({"doc_id": "kc-returns-v3"})),
    ]);
    let mut lab = LabConfig { decider: DeciderSpec::Fixed(plan), ..LabConfig::default() }.build(&env);
    let run = lab.agent.run("Check T-601.", "run-1").await?;
    println!("fixed plan:");
    for line in run.trace().lines() {
        println!("{line}");
    }

    let mut lab = LabConfig::fake(FakeKind::Obey).build(&env);
    let run = lab.agent.run("Read T-602 and summarise it.", "run-2").await?;
    println!("\nobey (the model follows the note in T-602):");
    for line in run.trace().lines() {
        println!("{line}");
    }
    println!("e-mails sent: {}", lab.world.outbox.len());
    Ok(())
}
