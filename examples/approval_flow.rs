//! Park, decide, resume: the research script drafts an e-mail, which parks for a person;
//! three "processes" (three desks opened on the same store file) try to approve it: the
//! requester, an approver, and the approver again. Exactly one e-mail goes out.
//!
//! Run with `cargo run --example approval_flow`.

use rolegate::cost::ManualClock;
use rolegate::eval::Env;
use rolegate::human::SigningKey;
use rolegate::store::{Desk, DeskAction, RunSpec, Store};

fn desk(path: &std::path::Path, clock: &ManualClock) -> Result<Desk, rolegate::Error> {
    // an example key; a deployment reads ROLEGATE_SIGNING_KEY instead
    let key = SigningKey::new(b"example key, not a real secret, 32+ bytes")?;
    Ok(Desk::new(Store::open(path)?, key, Env::bundled()?, clock.shared()))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), rolegate::Error> {
    let dir = std::env::temp_dir().join(format!("rolegate-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(rolegate::store::StoreError::from_io)?;
    let path = dir.join("rolegate.db");
    let clock = ManualClock::new();
    let spec = RunSpec::new("auto", "kwame", "reply", &[]);
    let started = desk(&path, &clock)?.start(&spec, "Reply to T-601 about returns.").await?;
    if let Some(r) = &started.request {
        println!("{} parked: {} {} | expires at {}", r.run_id, r.id, r.preview, r.expires_at);
    }
    for who in ["kwame", "lena", "lena"] {
        let d = desk(&path, &clock)?.decide("req-1", who, DeskAction::Approve).await?;
        let status = d.run.as_ref().map_or("-", |r| r.state.status().name());
        println!("approve as {who:<6} -> {:<14} run {status:<18} sent now {}", d.code.as_str(), d.sent_now);
    }
    println!("e-mails in the store: {}", desk(&path, &clock)?.outbox()?.len());
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
