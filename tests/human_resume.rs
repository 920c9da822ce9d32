//! Resume and cancel: the six decisions on a parked run, crash recovery from the last
//! checkpoint, tampered checkpoints, and the resumed loop against the plain one on all
//! fourteen single rows.

use rolegate::agent::{AgentState, Progress, StopReason, TraceKind};
use rolegate::eval::bundled_single;
use rolegate::human::{
    Checkpoint, CheckpointCode, CheckpointError, DecisionCode, ResumeError, ResumeVerdict, SigningKey, cancel_waiting,
    resume_run, resume_with_decision,
};
use rolegate::lab::LabConfig;
use rolegate::model::research_script;
use std::sync::{Arc, Mutex};

use crate::util::{CrashingDecider, Parked, REPLY_GOAL, env, key, lab_with, parked, restore_memory};

async fn decide(p: &mut Parked, who: &str, verdict: ResumeVerdict) -> rolegate::human::Resumed {
    let ck = Checkpoint::open(&p.checkpoint.seal(&key()).unwrap(), &key()).unwrap();
    resume_with_decision(&mut p.lab.agent, &mut p.queue, ck, &p.request.id, who, verdict).await.unwrap()
}

#[tokio::test]
async fn an_approval_runs_once_shows_as_human_and_becomes_an_observation() {
    let mut p = parked().await;
    let r = decide(&mut p, "lena", ResumeVerdict::Approve).await;
    assert_eq!(r.code, DecisionCode::Ok);
    assert_eq!((r.run.state.status().name(), r.run.reason()), ("done", StopReason::Done));
    assert_eq!(r.run.state.sources(), ["o1", "o2", "o3"]);
    assert_eq!(p.lab.world.outbox.len(), 1);
    let o3 = &r.run.state.observations()[2];
    assert!(o3.ok && o3.tool() == "send_email_draft" && o3.text.contains(r#""email_id":"e1""#), "{o3:?}");
    let lines = r.run.trace().lines();
    let human: Vec<_> = r.run.trace().lines.iter().filter(|l| l.kind == TraceKind::Human).collect();
    assert_eq!(human.len(), 1);
    assert_eq!((human[0].step, human[0].code.as_ref(), human[0].detail()), (3, "ok", "send_email_draft"));
    let tail: Vec<(u32, &str, &str)> =
        r.run.trace().lines[lines.len() - 3..].iter().map(|l| (l.step, l.kind.as_str(), l.code.as_ref())).collect();
    assert_eq!(tail, [(4, "model", "ok"), (4, "check", "ok"), (4, "stop", "done")]);
    assert!(
        r.run.trace().lines[lines.len() - 3]
            .detail()
            .starts_with(r#"{"action":"finish","answer":"Checked 3 source(s)."#)
    );
    assert_eq!(r.run.calls(), ["get_ticket", "lookup_document", "send_email_draft"], "the approved call ran once");
}

#[tokio::test]
async fn six_decisions_on_a_parked_run() {
    type Act = fn(&mut Parked) -> std::pin::Pin<Box<dyn std::future::Future<Output = rolegate::human::Resumed> + '_>>;
    let acts: [(&str, Act); 5] = [
        ("approve", |p| Box::pin(decide(p, "lena", ResumeVerdict::Approve))),
        ("deny", |p| Box::pin(decide(p, "lena", ResumeVerdict::Deny))),
        ("deny, replan", |p| Box::pin(decide(p, "lena", ResumeVerdict::DenyReplan))),
        ("cancel", |p| {
            Box::pin(async move {
                let ck = p.checkpoint.clone();
                cancel_waiting(&mut p.lab.agent, &mut p.queue, ck, &p.request.id, "kwame").unwrap()
            })
        }),
        ("wrong person", |p| Box::pin(decide(p, "mallory", ResumeVerdict::Approve))),
    ];
    let mut rows = Vec::new();
    for (name, act) in acts {
        let mut p = parked().await;
        let r = act(&mut p).await;
        rows.push(format!(
            "{name:<14} {:<18} {:<15} emails={}",
            r.run.state.status().name(),
            r.run.reason().as_str(),
            p.lab.world.outbox.len()
        ));
    }
    let mut p = parked().await;
    decide(&mut p, "lena", ResumeVerdict::Approve).await;
    let twice = decide(&mut p, "lena", ResumeVerdict::Approve).await; // the same decision applied twice
    assert!(twice.replayed && twice.code == DecisionCode::NotPending);
    rows.push(format!(
        "{:<14} {:<18} {:<15} emails={}",
        "approve, twice",
        twice.run.state.status().name(),
        twice.run.reason().as_str(),
        p.lab.world.outbox.len()
    ));
    assert_eq!(
        rows,
        [
            "approve        done               done            emails=1",
            "deny           stopped            denied          emails=0",
            "deny, replan   done               done            emails=0",
            "cancel         stopped            cancelled       emails=0",
            "wrong person   awaiting_approval  needs_approval  emails=0",
            "approve, twice done               done            emails=1",
        ]
    );
}

#[tokio::test]
async fn a_refused_decision_changes_nothing_and_a_replan_sees_the_refusal() {
    let mut p = parked().await;
    let r = decide(&mut p, "kwame", ResumeVerdict::Approve).await;
    assert_eq!(r.code, DecisionCode::NotAnApprover);
    assert_eq!(r.run, p.run, "still parked, trace untouched");
    let mut p = parked().await;
    let r = decide(&mut p, "lena", ResumeVerdict::DenyReplan).await;
    let o3 = &r.run.state.observations()[2];
    assert!(!o3.ok && o3.text.starts_with("error denied"), "{o3:?}");
    assert_eq!(r.run.state.sources(), ["o1", "o2"]);
    assert_eq!(r.run.trace().codes(TraceKind::Human), ["denied"]);
    let mut p = parked().await;
    p.lab.clock.advance(std::time::Duration::from_secs(901));
    let r = decide(&mut p, "lena", ResumeVerdict::Approve).await;
    assert_eq!((r.code, r.run.reason()), (DecisionCode::Expired, StopReason::Denied), "expiry means no");
    assert!(p.lab.world.outbox.is_empty());
}

#[tokio::test]
async fn waiting_for_a_person_does_not_count_against_the_time_budget() {
    let mut p = parked().await;
    p.lab.clock.advance(std::time::Duration::from_secs(600)); // ten minutes; the budget is 60 s
    let r = decide(&mut p, "lena", ResumeVerdict::Approve).await;
    assert_eq!(r.run.reason(), StopReason::Done);
    assert!(r.run.progress.worked < std::time::Duration::from_secs(1), "{:?}", r.run.progress.worked);
}

#[tokio::test]
async fn a_decision_for_another_run_is_an_error_not_a_guess() {
    let mut p = parked().await;
    let other = AgentState::new("run-2", "kwame", "reply", REPLY_GOAL).unwrap();
    let ck = Checkpoint::new(&other.wait("pa-1").unwrap(), &Progress::new("run-2"));
    let e =
        resume_with_decision(&mut p.lab.agent, &mut p.queue, ck, &p.request.id, "lena", ResumeVerdict::Approve).await;
    assert!(matches!(e, Err(ResumeError::NotWaiting { .. })));
    assert!(p.lab.world.outbox.is_empty());
}

#[tokio::test]
async fn crash_on_the_third_model_call_then_a_new_process_resumes_from_the_last_checkpoint() {
    let script = research_script()[..2].to_vec();
    let expected = lab_with(LabConfig::scripted(script.clone())).agent.run(REPLY_GOAL, "run-1").await.unwrap();
    let mut doomed = lab_with(LabConfig::scripted(script.clone()));
    let inner = doomed.agent.replace_decider(Box::new(rolegate::agent::FixedPlan::default()));
    doomed.agent.replace_decider(Box::new(CrashingDecider { inner, dies_on: 3, calls: 0 }));
    let disk = Arc::new(Mutex::new(String::new()));
    let written = disk.clone();
    doomed.agent.add_step_hook(Box::new(move |state, progress| {
        *written.lock().unwrap() = Checkpoint::new(state, progress).seal(&key()).unwrap();
        Ok(())
    }));
    let crash = doomed.agent.run(REPLY_GOAL, "run-1").await.unwrap_err();
    assert_eq!(crash.to_string(), "model: process died: process died");
    let text = disk.lock().unwrap().clone();
    let saved = Checkpoint::open(&text, &key()).unwrap();
    assert_eq!(saved.state.step(), 2);
    assert_eq!(saved.progress.calls, ["get_ticket", "lookup_document"]);
    // a new process: new world, gate and model object
    let mut fresh = lab_with(LabConfig::scripted(script));
    restore_memory(&mut fresh, &saved.state);
    let run = resume_run(&mut fresh.agent, saved).await.unwrap();
    assert_eq!(run.state, expected.state, "same final state as a run that never crashed");
    assert_eq!(run.calls(), ["get_ticket", "lookup_document"], "no call repeated");
    assert_eq!(run, expected, "trace, ledger and counts too");
    assert_eq!(fresh.agent.gate().audit().len(), 0, "the resumed process sent no tool call again");
}

#[tokio::test]
async fn tampered_or_junk_checkpoints_are_refused_before_they_become_state() {
    let p = parked().await;
    let text = p.checkpoint.seal(&key()).unwrap();
    let mut outer: serde_json::Value = serde_json::from_str(&text).unwrap();
    let body = outer["body"].as_str().unwrap().replace(r#""awaiting_approval""#, r#""done""#);
    outer["body"] = body.into();
    let edited = outer.to_string();
    let mut extra: serde_json::Value = serde_json::from_str(&text).unwrap();
    extra["note"] = "hi".into();
    let other_key = SigningKey::new(b"another key of enough length, 32+ bytes").unwrap();
    let cases = [
        ("edited body", edited, "bad_signature"),
        ("junk", "{}".to_string(), "not_a_checkpoint"),
        ("not json", "checkpoint".to_string(), "not_a_checkpoint"),
        ("unknown field", extra.to_string(), "not_a_checkpoint"),
        ("other key", p.checkpoint.seal(&other_key).unwrap(), "bad_signature"),
    ];
    for (label, bad, code) in cases {
        let e = Checkpoint::open(&bad, &key()).unwrap_err();
        assert_eq!(e.code().map(CheckpointCode::as_str), Some(code), "{label}: {e}");
    }
    // correctly signed, but the state breaks the rules (a leaked key cannot forge a bad state)
    let mut forged: serde_json::Value = serde_json::from_str(&text).unwrap();
    let body = forged["body"].as_str().unwrap().replace(r#""pending_id":"pa-1""#, r#""pending_id":"""#);
    forged["signature"] = key().sign(&body).into();
    forged["body"] = body.into();
    let e = Checkpoint::open(&forged.to_string(), &key()).unwrap_err();
    assert_eq!(e.code(), Some(CheckpointCode::InvalidState), "{e}");
    assert_eq!(Checkpoint::open(&text, &key()).unwrap(), p.checkpoint);
}

#[test]
fn the_signing_key_comes_from_configuration_with_a_clear_error() {
    let e = SigningKey::from_config(None, None).unwrap_err();
    assert!(matches!(e, CheckpointError::MissingKey));
    assert!(e.to_string().contains("ROLEGATE_SIGNING_KEY"), "{e}");
    assert!(matches!(
        SigningKey::from_config(Some(std::ffi::OsStr::new("short")), None),
        Err(CheckpointError::BadKey(_))
    ));
    let dir = crate::util::temp_dir("key");
    let path = dir.join("key");
    std::fs::write(&path, "a key kept in a file, long enough\n").unwrap();
    let from_file = SigningKey::from_config(None, Some(&path)).unwrap();
    assert!(from_file.verify("x", &SigningKey::new(b"a key kept in a file, long enough").unwrap().sign("x")));
    assert!(matches!(SigningKey::from_file(&dir.join("missing")), Err(CheckpointError::BadKey(_))));
    assert!(!format!("{from_file:?}").contains("long enough"), "the key is never printed");
}

#[tokio::test]
async fn the_resumed_loop_matches_the_plain_loop_on_all_fourteen_rows() {
    let env = env();
    let rows = bundled_single().unwrap();
    assert_eq!(rows.len(), 14);
    let mut resumed_from = 0;
    for row in &rows {
        let cfg = row.lab_config().unwrap();
        let mut plain = cfg.build(&env);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        plain.agent.add_step_hook(Box::new(move |state, progress| {
            sink.lock().unwrap().push(Checkpoint::new(state, progress).seal(&key()).unwrap());
            Ok(())
        }));
        let expected = plain.agent.run(&row.goal, &row.run_id()).await.unwrap();
        let checkpoints = seen.lock().unwrap().clone();
        for (i, text) in checkpoints.iter().enumerate() {
            let ck = Checkpoint::open(text, &key()).unwrap();
            let mut fresh = cfg.build(&env);
            restore_memory(&mut fresh, &ck.state);
            let run = resume_run(&mut fresh.agent, ck).await.unwrap();
            assert_eq!(run.state, expected.state, "{} from checkpoint {i}", row.id);
            assert_eq!(run.calls(), expected.calls(), "{} from checkpoint {i}", row.id);
            assert_eq!(run.trace(), expected.trace(), "{} from checkpoint {i}", row.id);
            assert_eq!(fresh.world.outbox.len(), plain.world.outbox.len(), "{}", row.id);
            resumed_from += 1;
        }
    }
    assert!(resumed_from > 14, "every row that reached the loop was resumed from each of its steps");
}

#[tokio::test]
async fn cancellation_is_read_between_steps() {
    let mut lab = lab_with(LabConfig::research());
    let token = lab.agent.cancel_token().clone();
    lab.agent.add_step_hook(Box::new(move |state, _| {
        if state.step() == 1 {
            token.cancel();
        }
        Ok(())
    }));
    let run = lab.agent.run(REPLY_GOAL, "run-1").await.unwrap();
    assert_eq!((run.reason(), run.calls()), (StopReason::Cancelled, &["get_ticket".to_string()][..]));
    assert!(lab.world.outbox.is_empty());
}
