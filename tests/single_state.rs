//! The state rules: "try to break it", transitions, and loading through the same rules.

use rolegate::agent::{AgentState, RawState, StateError, StopReason};

fn running() -> AgentState {
    AgentState::new("r1", "kwame", "triage", "Check T-601.").unwrap().next_step().unwrap()
}

#[test]
fn try_to_break_it_every_bad_move_fails_and_says_why() {
    let state = running();
    // finish without sources
    let e = state.finish("All done.", &[]).unwrap_err();
    assert!(matches!(e, StateError::Invalid(m) if m.contains("answer and the observations")), "{e}");
    // stop for a made-up reason: the reason set is closed, in code and in data
    let e = "because".parse::<StopReason>().unwrap_err();
    assert_eq!(e.to_string(), "a stopped run needs a known reason, got \"because\"");
    let mut raw = RawState::from(state.clone());
    raw.status = "stopped".into();
    raw.reason = "because".into();
    assert!(matches!(AgentState::try_from(raw), Err(StateError::UnknownReason(r)) if r == "because"));
    // resume a run that is not waiting
    let e = state.resume().unwrap_err();
    assert_eq!(e.to_string(), "bad transition: running -> running by resume");
    // change a field in place: not expressible (fields are private; see the compile_fail
    // doctest on `agent::state`); a transition returns a new value instead
    let next = state.next_step().unwrap();
    assert_eq!((state.step(), next.step()), (1, 2));
    // the finished state
    let (state, obs) = state.observe(true, "get_ticket", r#"{"id": "T-601", "status": "open"}"#).unwrap();
    let done = state.finish("The ticket is open.", &[obs.id().to_string()]).unwrap();
    assert_eq!(
        (done.status().name(), done.reason(), done.sources()),
        ("done", Some(StopReason::Done), &["o1".to_string()][..])
    );
}

#[test]
fn done_and_stopped_are_final_and_awaiting_may_only_resume_or_stop() {
    let s = running();
    let (s, o) = s.observe(true, "get_ticket", "{}").unwrap();
    let done = s.finish("ok", &[o.id().to_string()]).unwrap();
    assert!(done.next_step().is_err());
    assert!(done.stop(StopReason::Cancelled).is_err());
    let stopped = s.stop(StopReason::Stuck).unwrap();
    assert!(stopped.is_final());
    assert!(stopped.observe(true, "x", "y").is_err());
    let waiting = s.wait("pa-1").unwrap();
    assert_eq!(waiting.pending_id(), Some("pa-1"));
    assert!(waiting.next_step().is_err());
    assert!(waiting.finish("ok", &[o.id().to_string()]).is_err());
    assert!(waiting.resume().unwrap().pending_id().is_none());
    assert_eq!(waiting.stop(StopReason::Denied).unwrap().reason(), Some(StopReason::Denied));
    // done and needs_approval have their own moves, never a plain stop
    assert!(s.stop(StopReason::Done).is_err());
    assert!(s.stop(StopReason::NeedsApproval).is_err());
    assert!(s.wait("").is_err());
}

#[test]
fn sources_must_be_successful_observations_of_this_run() {
    let s = running();
    let (s, bad) = s.observe(false, "get_ticket", "error not_found").unwrap();
    assert!(s.finish("x", &[bad.id().to_string()]).is_err(), "a failed observation is no evidence");
    assert!(s.finish("x", &["o9".to_string()]).is_err(), "an observation that never happened");
    let (s, good) = s.observe(true, "lookup_document", "{}").unwrap();
    assert!(s.finish("x", &[good.id().to_string()]).is_ok());
}

#[test]
fn a_state_round_trips_through_json_and_a_bad_one_is_refused_on_load() {
    let s = running();
    let (s, o) = s.observe(true, "get_ticket", "{}").unwrap();
    let done = s.finish("The ticket is open.", &[o.id().to_string()]).unwrap();
    let json = serde_json::to_string(&done).unwrap();
    assert_eq!(serde_json::from_str::<AgentState>(&json).unwrap(), done);
    let forged = [
        json.replace("\"done\",\"step\"", "\"running\",\"step\""),
        json.replace("\"sources\":[\"o1\"]", "\"sources\":[\"o2\"]"),
        json.replace("\"ok\":true", "\"ok\":false"),
        json.replace("\"run_id\":\"r1\"", "\"run_id\":\"R 1\""),
        json.replace("\"step\":1,", "\"step\":1,\"grant\":true,"),
    ];
    for f in forged {
        assert_ne!(f, json, "the forgery must change the text");
        assert!(serde_json::from_str::<AgentState>(&f).is_err(), "{f}");
    }
}
