//! Park, decide, resume with approver keys: the research script drafts an e-mail, which
//! parks for a person. Each approver holds an Ed25519 key pair; the public half is
//! registered in the store, the private half stays with the person. Several "processes"
//! (desks opened afresh on the same store file) try to approve: the requester with a key
//! of his own making that claims to be lena's, the requester with his own approver key,
//! lena with hers, and lena again. Only lena's signed decision runs it: one e-mail.
//!
//! Run with `cargo run --example approval_flow`.

use rolegate::agent::Env;
use rolegate::cost::ManualClock;
use rolegate::human::{Approver, ApproverKey, SigningKey};
use rolegate::store::{Desk, DeskAction, DeskError, RunSpec, Store};

fn desk(path: &std::path::Path, clock: &ManualClock) -> Result<Desk, rolegate::Error> {
    // an example store key; a deployment reads ROLEGATE_SIGNING_KEY instead
    let key = SigningKey::new(b"example key, not a real secret, 32+ bytes")?;
    Ok(Desk::new(Store::open(path)?, key, Env::bundled()?, clock.shared()))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), rolegate::Error> {
    let dir = std::env::temp_dir().join(format!("rolegate-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(rolegate::store::StoreError::from_io)?;
    let path = dir.join("rolegate.db");
    let clock = ManualClock::new();
    // fixed seeds keep the example's output the same; `rolegate approvers add` uses fresh randomness
    let lena = ApproverKey::from_seed("lena", [1; 32]);
    let kwame = ApproverKey::from_seed("kwame", [2; 32]);
    let forged = ApproverKey::from_seed("lena", [3; 32]);
    for key in [&lena, &kwame] {
        desk(&path, &clock)?.add_approver(&Approver::of(key))?;
        println!("registered {:<5} key {}", key.name(), key.fingerprint());
    }
    let spec = RunSpec::new("auto", "kwame", "reply", &[]);
    let started = desk(&path, &clock)?.start(&spec, "Reply to T-601 about returns.").await?;
    if let Some(r) = &started.request {
        println!("{} parked: {} {} | expires at {}", r.run_id, r.id, r.preview, r.expires_at);
    }
    let attempts =
        [("kwame, a key claiming lena", &forged), ("kwame, his own key", &kwame), ("lena", &lena), ("lena", &lena)];
    for (who, key) in attempts {
        match desk(&path, &clock)?.decide_signed("req-1", key, DeskAction::Approve).await {
            Ok(d) => {
                let status = d.run.as_ref().map_or("-", |r| r.state.status().name());
                println!("approve as {who:<27} -> {:<14} run {status:<18} sent now {}", d.code.as_str(), d.sent_now);
            }
            Err(DeskError::Identity(e)) => println!("approve as {who:<27} -> refused: {}", e.code),
            Err(e) => return Err(e.into()),
        }
    }
    println!("e-mails in the store: {}", desk(&path, &clock)?.outbox()?.len());
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
