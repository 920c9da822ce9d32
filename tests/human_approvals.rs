//! Risk classes, the approval queue (four cases and the audit trail), fatigue and
//! batches, replay of an approved call, and the saga.

use rolegate::gate::GateOutcome;
use rolegate::human::{
    ApprovalError, ApprovalQueue, DecisionCode, EFFECTS, RequestStatus, Step, classify, fatigue, make_batches,
    order_problems, run_saga,
};
use std::cell::RefCell;
use std::time::Duration;

use crate::util::{parked, parked_with};

#[test]
fn risk_classes_table() {
    let rows: Vec<String> = EFFECTS
        .iter()
        .map(|(t, _)| *t)
        .chain(["delete_all_tickets"])
        .map(|tool| {
            let r = classify(tool);
            format!("{tool:<19} {:<17} {:<8} irreversible={}", r.effect.as_str(), r.level.as_str(), r.irreversible)
        })
        .collect();
    assert_eq!(
        rows,
        [
            "lookup_document     read              auto     irreversible=false",
            "get_ticket          read              auto     irreversible=false",
            "calculator          read              auto     irreversible=false",
            "remember            internal          log      irreversible=false",
            "set_ticket_status   reversible_write  approve  irreversible=false",
            "send_email_draft    external          approve  irreversible=true",
            "search_documents    read              auto     irreversible=false",
            "delete_all_tickets  destructive       approve  irreversible=true",
        ]
    );
}

#[tokio::test]
async fn the_parked_request_shows_the_exact_action_and_expires() {
    let p = parked().await;
    assert_eq!(p.run.state.status().name(), "awaiting_approval");
    assert_eq!(p.run.state.pending_id(), Some("pa-1"));
    assert!(p.lab.world.outbox.is_empty());
    assert_eq!(
        p.request.preview,
        r#"send_email_draft {"body": "Draft based on o2", "subject": "Your return", "to": "kwame@example.com"}"#
    );
    assert_eq!((p.request.id.as_str(), p.request.requested_by.as_str()), ("req-1", "kwame"));
    assert_eq!(p.request.expires_at, 900.0);
    assert_eq!(p.request.fingerprint, p.lab.agent.gate().pending()["pa-1"].call.fingerprint());
}

#[tokio::test]
async fn four_decisions_on_identical_requests_and_the_audit_trail() {
    let cases = [
        ("outsider", vec!["lena"], 900, "mallory", 0, "not_an_approver", 0, RequestStatus::Pending),
        ("requester", vec!["lena", "kwame"], 900, "kwame", 0, "self_approval", 0, RequestStatus::Pending),
        ("too late", vec!["lena"], 60, "lena", 61, "expired", 0, RequestStatus::Expired),
        ("approver", vec!["lena"], 900, "lena", 0, "ok", 1, RequestStatus::Approved),
    ];
    let mut last = None;
    for (name, approvers, ttl, actor, wait, code, emails, status) in cases {
        let mut q = parked_with(&approvers, Duration::from_secs(ttl)).await;
        q.lab.clock.advance(Duration::from_secs(wait));
        let decision = q.queue.approve(&q.request.id, actor, q.lab.agent.gate_mut());
        assert_eq!(decision.code.as_str(), code, "{name}");
        assert_eq!(decision.outcome.is_some(), code == "ok", "{name}: a refusal runs nothing");
        assert_eq!(q.lab.world.outbox.len(), emails, "{name}");
        assert_eq!(q.queue.requests[&q.request.id].status, status, "{name}");
        last = Some(q);
    }
    let q = last.unwrap();
    let audit: Vec<String> = q.queue.audit.iter().map(ToString::to_string).collect();
    assert_eq!(audit, ["0.0 kwame submit pending", "0.0 lena approve ok"]);
    for line in &q.queue.audit {
        assert_eq!(
            (line.tool.as_str(), line.fingerprint.as_str()),
            ("send_email_draft", q.request.fingerprint.as_str())
        );
        let json = serde_json::to_string(line).unwrap();
        assert!(!json.contains("kwame@example.com") && !json.contains("Draft based"), "no arguments in audit: {json}");
    }
}

#[tokio::test]
async fn refusals_are_audited_and_mint_nothing() {
    let mut p = parked().await;
    let gate = p.lab.agent.gate_mut();
    assert_eq!(p.queue.approve("req-9", "lena", gate).code, DecisionCode::UnknownRequest);
    assert_eq!(p.queue.approve(&p.request.id, "mallory", gate).code, DecisionCode::NotAnApprover);
    assert!(p.queue.token_for(&p.request.id).is_none(), "no token for a pending request");
    let outcomes: Vec<_> = p.queue.audit.iter().map(|l| (l.actor.as_str(), l.outcome.as_str())).collect();
    assert_eq!(outcomes, [("kwame", "pending"), ("mallory", "not_an_approver")]);
    assert!(p.lab.world.outbox.is_empty());
}

#[tokio::test]
async fn arguments_changed_after_review_are_refused() {
    let mut p = parked().await;
    // the stored action edited after review, as a tampered store would load it
    let mut pa = p.lab.agent.gate().pending()["pa-1"].clone();
    pa.call.arguments["to"] = "records-export@example.org".into();
    p.lab.agent.gate_mut().restore_pending(pa);
    let d = p.queue.approve(&p.request.id, "lena", p.lab.agent.gate_mut());
    assert_eq!(d.code, DecisionCode::ChangedSinceReview);
    assert!(p.lab.world.outbox.is_empty());
    assert_eq!(p.queue.requests[&p.request.id].status, RequestStatus::Pending);
}

#[tokio::test]
async fn a_full_queue_refuses_new_requests() {
    let mut p = parked().await;
    p.queue.max_open = 1;
    let mut again = p.lab.agent.gate().pending()["pa-1"].clone();
    again.id = "pa-2".into();
    assert_eq!(p.queue.submit(&again), Err(ApprovalError::QueueFull { open: 1, cap: 1 }));
    // once the open request is decided there is room again
    assert_eq!(p.queue.deny(&p.request.id, "lena", p.lab.agent.gate_mut()), DecisionCode::Ok);
    assert_eq!(p.queue.submit(&again).unwrap().id, "req-2");
}

#[tokio::test]
async fn fatigue_flags_stamping_and_batches_keep_irreversible_requests_alone() {
    let p = parked().await;
    let queue_with = |decisions: &[(RequestStatus, f64)]| {
        let mut q = ApprovalQueue::new(["lena"], p.lab.clock.shared());
        for (i, (status, secs)) in decisions.iter().enumerate() {
            let mut r = p.request.clone();
            r.id = format!("x{i}");
            r.status = *status;
            r.decided_by = Some("lena".into());
            r.created_at = 0.0;
            r.decided_at = Some(*secs);
            q.requests.insert(r.id.clone(), r);
        }
        q
    };
    let stamping = fatigue(&queue_with(&[(RequestStatus::Approved, 1.0); 6]), "lena");
    assert_eq!(stamping.to_string(), "Fatigue(decisions=6, approve_rate=1.00, median_seconds=1.0, flagged=true)");
    let careful = [(RequestStatus::Approved, 25.0), (RequestStatus::Denied, 40.0), (RequestStatus::Approved, 30.0)];
    let careful = fatigue(&queue_with(&careful.repeat(2)), "lena");
    assert_eq!(careful.to_string(), "Fatigue(decisions=6, approve_rate=0.67, median_seconds=30.0, flagged=false)");

    let mut asks = Vec::new();
    for i in 0..7 {
        let mut r = p.request.clone();
        r.id = format!("s{i}");
        r.tool = "set_ticket_status".into();
        r.created_at = f64::from(i);
        asks.push(r);
    }
    for id in ["e1", "e2"] {
        let mut r = p.request.clone();
        r.id = id.into();
        asks.push(r);
    }
    let batches = make_batches(&asks, 5);
    let mut sizes: Vec<usize> = batches.iter().map(Vec::len).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [1, 1, 2, 5]);
    let emails: Vec<&Vec<String>> = batches.iter().filter(|b| b[0].starts_with('e')).collect();
    assert_eq!(emails, [&vec!["e1".to_string()], &vec!["e2".to_string()]]);
}

#[tokio::test]
async fn a_retry_of_an_approved_call_replays_and_sends_nothing_twice() {
    let mut p = parked().await;
    let d = p.queue.approve(&p.request.id, "lena", p.lab.agent.gate_mut());
    assert!(matches!(d.outcome, Some(GateOutcome::Ok(ref v)) if v["replayed"] == false));
    let action = &p.lab.agent.gate().pending()["pa-1"];
    let key = action.call.arguments["idempotency_key"].as_str().unwrap().to_string();
    assert!(key.starts_with("ak-") && key != "model-chosen-1", "the model's key was replaced: {key}");
    let token = p.queue.token_for(&p.request.id).unwrap();
    let again = p.lab.agent.gate_mut().execute_approved(&token).unwrap();
    assert!(matches!(again, GateOutcome::Ok(ref v) if v["replayed"] == true && v["email_id"] == "e1"));
    assert_eq!(p.lab.world.outbox.len(), 1);
    assert_eq!(p.lab.world.outbox.sent()[0].idempotency_key, key);
    let outcomes: Vec<_> = p.lab.agent.gate().audit().iter().map(|e| e.outcome.as_str()).collect();
    assert_eq!(outcomes, ["ok", "ok", "needs_approval", "ok", "replayed"]);
}

#[test]
fn saga_undoes_in_reverse_and_a_step_without_undo_goes_last() {
    let log = RefCell::new(Vec::new());
    let ok = |name: &'static str| {
        let log = &log;
        move || {
            log.borrow_mut().push(name);
            Ok(())
        }
    };
    let boom = || Err("board is down".to_string());
    let mut safe = vec![
        Step::new("reserve", ok("reserve"), ok("unreserve")),
        Step::new("set status", boom, ok("reset status")),
        Step::final_step("email", ok("email")),
    ];
    let mut risky = vec![Step::final_step("email", ok("email")), Step::new("set status", boom, ok("reset status"))];
    let r = run_saga(&mut safe);
    assert_eq!(
        (r.failed.as_deref(), r.undone.clone(), r.needs_human.clone()),
        (Some("set status"), vec!["reserve".to_string()], vec![])
    );
    assert!(order_problems(&safe).is_empty());
    let r = run_saga(&mut risky);
    assert_eq!(
        (r.failed.as_deref(), r.undone.clone(), r.needs_human.clone()),
        (Some("set status"), vec![], vec!["email".to_string()])
    );
    assert_eq!(order_problems(&risky), ["email cannot be undone but is followed by set status"]);
    assert_eq!(*log.borrow(), ["reserve", "unreserve", "email"], "the e-mail of the safe order never ran");
}
