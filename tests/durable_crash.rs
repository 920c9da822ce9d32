//! Durable runs across a crash, in separate processes: the built binary is killed (the
//! test hook `ROLEGATE_TEST_CRASH_AT` aborts the process as `kill -9` would) right after
//! each durable step of a single, plan, PolicyPal and three-role run commits, or just
//! before it commits; `rolegate resume` then carries the run to exactly the end, the trace
//! and the effects of the same run never interrupted.

use std::path::Path;
use std::process::Output;

use crate::durable_support::{counts, first_status, held_and_killed, printed};
use crate::util::{REPLY_GOAL, on_store, run_binary, stderr, stdout, temp_dir};

const KEY: &str = "durable-crash test signing key, not a real secret";

fn rolegate(store: &Path, args: &[&str]) -> Output {
    if args.contains(&"lena.key") {
        crate::util::register_lena(store, KEY);
    }
    run_binary(store, KEY, args)
}

/// The binary on `store` with `args`, the crash point `point` set.
fn crash_at(store: &Path, point: &str, args: &[&str]) -> std::process::Command {
    let mut c = on_store(store, KEY, args);
    c.env("ROLEGATE_TEST_CRASH_AT", point);
    c
}

fn crashing(store: &Path, point: &str, args: &[&str]) -> Output {
    crash_at(store, point, args).output().expect("the binary runs")
}

/// `(checkpoints, journal records, requests, parked actions, outbox rows, gate audit
/// rows)` of `run-1`, read with SQLite directly.
fn rows_of(store: &Path) -> [i64; 6] {
    counts(
        store,
        [
            "SELECT count(*) FROM checkpoints WHERE run_id = 'run-1'",
            "SELECT count(*) FROM steps WHERE run_id = 'run-1'",
            "SELECT count(*) FROM requests WHERE run_id = 'run-1'",
            "SELECT count(*) FROM pending WHERE run_id = 'run-1'",
            "SELECT count(*) FROM outbox",
            "SELECT count(*) FROM gate_audit WHERE run_id = 'run-1'",
        ],
    )
}

fn status(store: &Path) -> String {
    first_status(&rolegate(store, &["runs", "list", "--format", "json"]))
}

/// What a run printed, its exit code and `run-1`'s rows: what a resumed run must match.
type End = (String, Option<i32>, [i64; 6]);

fn end_of(out: &Output, store: &Path) -> End {
    (printed(out, store), out.status.code(), rows_of(store))
}

/// Asserts that `store`'s run-1 is `interrupted` and that resuming it ends as `expected`.
fn resumes_to(store: &Path, expected: &End, what: &str) {
    assert_eq!(status(store), "interrupted", "{what}");
    let resumed = rolegate(store, &["resume", "run-1"]);
    assert_eq!(end_of(&resumed, store), *expected, "{what}: {}", stderr(&resumed));
}

fn check_clean(store: &Path) {
    let check = rolegate(store, &["store", "check"]);
    assert_eq!(check.status.code(), Some(0), "{}{}", stdout(&check), stderr(&check));
}

/// Runs `args` once uninterrupted, then, for every durable step K of that run, in a fresh
/// store: killed after step K committed (and, with `before`, killed with step K written
/// but not committed), resumed, and compared with the uninterrupted run: the same printed
/// trace and outcome, the same exit code, the same rows (checkpoints, journal, requests,
/// parked actions, mail, audit). Returns how many steps were tried.
fn every_step_resumes_the_same(name: &str, args: &[&str], before: bool) -> u64 {
    let base = temp_dir(&format!("durable-{name}"));
    let plain = base.join("plain.db");
    let whole = rolegate(&plain, args);
    assert!(matches!(whole.status.code(), Some(0 | 1)), "{}", stderr(&whole));
    let expected = end_of(&whole, &plain);
    check_clean(&plain);
    let mut k = 1;
    loop {
        let mut killed_any = false;
        let phases: &[&str] = if before { &["after_commit", "before_commit"] } else { &["after_commit"] };
        for phase in phases {
            let store = base.join(format!("{phase}-{k}.db"));
            let crashed = crashing(&store, &format!("durable:{phase}:{k}"), args);
            if crashed.status.code().is_some() {
                // the run has fewer than k durable steps: it ended as the plain run did
                assert_eq!(printed(&crashed, &store), expected.0, "{name}: no crash at step {k}");
                continue;
            }
            killed_any = true;
            resumes_to(&store, &expected, &format!("{name}: killed {phase} step {k}"));
            check_clean(&store);
            let again = rolegate(&store, &["resume", "run-1"]);
            assert!(stdout(&again).contains("had already ended"), "{}", stdout(&again));
            assert_eq!(rows_of(&store), expected.2, "{name}: a second resume runs nothing");
        }
        if !killed_any {
            return k - 1;
        }
        k += 1;
    }
}

#[test]
fn a_single_run_killed_at_each_step_resumes_to_the_same_end_and_parks_its_email_once() {
    let args = ["run", "--task", "reply", "--user", "kwame", REPLY_GOAL];
    let steps = every_step_resumes_the_same("single", &args, true);
    assert!(steps >= 3, "the reply run has a durable step per loop step ({steps})");
}

#[test]
fn a_single_run_that_finishes_killed_at_each_step_resumes_to_the_same_answer() {
    let args = ["run", "--user", "kwame", "What is the status of T-601 and our refund policy?"];
    assert!(every_step_resumes_the_same("single-done", &args, false) >= 2);
}

#[test]
fn a_plan_run_killed_at_each_step_resumes_to_the_same_end() {
    let args = ["run", "--design", "plan", "--user", "kwame", "What is the status of T-601 and our refund policy?"];
    assert!(every_step_resumes_the_same("plan", &args, true) >= 3, "the plan and each executed step");
}

#[test]
fn a_policypal_run_killed_at_each_turn_resumes_to_the_same_end() {
    let args =
        ["run", "--design", "policypal", "--user", "kwame", "E-mail the refund policy for T-601 to kwame@example.com."];
    assert!(every_step_resumes_the_same("policypal", &args, false) >= 2);
}

#[test]
fn a_three_role_run_killed_at_each_hand_off_resumes_to_the_same_verdict() {
    let args = ["run", "--design", "multi", "--user", "kwame", "Status of T-601 and our refund policy?"];
    let steps = every_step_resumes_the_same("multi", &args, true);
    assert!(steps >= 3, "three hand-offs and the researcher's steps ({steps})");
}

/// The crash between the effect and the checkpoint: the gate parked the e-mail in memory
/// (the effect), the process dies before the transaction that holds the parked action,
/// its request and the checkpoint waiting on it commits (or inside it). The resumed run
/// parks it once; approving sends one e-mail, and approving again sends none.
#[test]
fn a_crash_between_parking_the_email_and_its_commit_parks_and_sends_it_exactly_once() {
    for point in ["durable:before_end", "durable:before_end_commit"] {
        let store = temp_dir(&format!("durable-effect-{}", point.replace(':', "-"))).join("rolegate.db");
        let crashed = crashing(&store, point, &["run", "--task", "reply", "--user", "kwame", REPLY_GOAL]);
        assert_eq!(crashed.status.code(), None, "{point}: killed");
        let [_, _, requests, pending, sent, _] = rows_of(&store);
        assert_eq!((requests, pending, sent), (0, 0, 0), "{point}: nothing of the effect is kept half-done");
        let resumed = rolegate(&store, &["resume", "run-1"]);
        assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
        assert!(stdout(&resumed).contains("approval needed: req-1"), "{}", stdout(&resumed));
        let [_, _, requests, pending, _, _] = rows_of(&store);
        assert_eq!((requests, pending), (1, 1), "{point}: parked exactly once");
        let approved = rolegate(&store, &["approvals", "approve", "req-1", "--key", "lena.key"]);
        assert!(stdout(&approved).contains("emails_sent=1"), "{}{}", stdout(&approved), stderr(&approved));
        let again = rolegate(&store, &["approvals", "approve", "req-1", "--key", "lena.key"]);
        assert!(stdout(&again).contains("not_pending"), "{}", stdout(&again));
        let resumed_again = rolegate(&store, &["resume", "run-1"]);
        assert!(stdout(&resumed_again).contains("had already ended"), "{}", stdout(&resumed_again));
        assert_eq!(rows_of(&store)[4], 1, "{point}: one e-mail, ever");
        check_clean(&store);
    }
}

#[test]
fn an_exit_durability_run_cannot_be_resumed_and_runs_list_says_how_each_run_was_kept() {
    let store = temp_dir("durable-exit").join("rolegate.db");
    let exit = rolegate(&store, &["run", "--durability", "exit", "--task", "reply", "--user", "kwame", REPLY_GOAL]);
    assert_eq!(exit.status.code(), Some(0), "{}", stderr(&exit));
    let step = rolegate(&store, &["run", "--design", "plan", "--user", "kwame", "What is the status of T-601?"]);
    assert!(step.status.code().is_some(), "{}", stderr(&step));
    let resumed = rolegate(&store, &["resume", "run-1"]);
    assert_eq!(resumed.status.code(), Some(2));
    assert!(stderr(&resumed).contains("not run with --durability step"), "{}", stderr(&resumed));
    let list = stdout(&rolegate(&store, &["runs", "list"]));
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 3, "{list}");
    assert!(
        lines[1].starts_with("run-1") && lines[1].contains(" exit ") && lines[1].contains("awaiting_approval"),
        "{list}"
    );
    assert!(lines[2].starts_with("run-2") && lines[2].contains(" plan ") && lines[2].contains(" step "), "{list}");
    let refused = rolegate(&store, &["run", "--design", "multi", "--durability", "exit", "goal"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
}

/// A real `SIGKILL` from the test: the process is held right after its K-th durable step
/// committed (the hook says so on standard error), the test kills it, and the resumed run
/// ends as the run never interrupted did, for every K of a three-role and a single run.
#[test]
fn a_run_sigkilled_after_each_durable_step_resumes_to_the_same_end() {
    for (name, args) in [
        ("multi", &["run", "--design", "multi", "--user", "kwame", "Status of T-601 and our refund policy?"][..]),
        ("single", &["run", "--task", "reply", "--user", "kwame", REPLY_GOAL][..]),
    ] {
        let base = temp_dir(&format!("durable-sigkill-{name}"));
        let plain = base.join("plain.db");
        let whole = rolegate(&plain, args);
        let expected = end_of(&whole, &plain);
        let mut k = 1;
        loop {
            let store = base.join(format!("killed-{k}.db"));
            let held = crash_at(&store, &format!("durable:hold_after_commit:{k}"), args);
            if !held_and_killed(held, &format!("{name} {k}")) {
                // fewer than k durable steps: the run ended by itself
                break;
            }
            resumes_to(&store, &expected, &format!("{name}: SIGKILL after step {k}"));
            k += 1;
        }
        assert!(k > 3, "{name}: killed after every one of its durable steps ({})", k - 1);
    }
}

/// Issue 32, defect 4: a run is its whole configuration. A stored run under a narrowing
/// policy honours it (the e-mail it may not send does not park), and a three-role run
/// under a call graph whose researcher-to-reviewer edge takes only trusted envelopes,
/// killed after its first hand-off and resumed in a process given none of those flags,
/// ends as the uninterrupted run did (`rejected_message`), in the policy and graph it
/// recorded.
#[test]
fn a_stored_run_keeps_its_policy_and_call_graph_through_a_crash_and_a_resume() {
    let dir = temp_dir("durable-config");
    // the reply task without the e-mail tool
    let mut policy: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/data/policy.json")).unwrap(),
    )
    .unwrap();
    let reply = policy["tasks"]["reply"].as_array_mut().unwrap();
    reply.retain(|t| t != "send_email_draft");
    let narrow = dir.join("narrow.json");
    std::fs::write(&narrow, policy.to_string()).unwrap();
    let store = dir.join("policy.db");
    let narrow_s = narrow.display().to_string();
    let out = rolegate(&store, &["run", "--task", "reply", "--user", "kwame", "--policy", &narrow_s, REPLY_GOAL]);
    let text = stdout(&out);
    assert!(!text.contains("approval needed"), "the narrowed policy parks nothing: {text}");
    assert!(text.contains("not_allowed"), "the e-mail is refused by the run's own policy: {text}");
    let requests = counts(&store, ["SELECT count(*) FROM requests"]);
    assert_eq!(requests, [0], "no request was filed");

    // a call graph whose finding edge takes trusted envelopes only: a relayed finding
    // (untrusted) is refused there
    let graph = dir.join("trusted.json");
    std::fs::write(
        &graph,
        r#"{"edges": [
            {"from": "planner", "to": "researcher", "kinds": ["brief"], "fields": ["question"]},
            {"from": "researcher", "to": "reviewer", "kinds": ["finding"], "fields": ["claim", "sources"], "labels": "trusted_only"},
            {"from": "reviewer", "to": "coordinator", "kinds": ["verdict"], "fields": ["approve", "notes"]}
        ]}"#,
    )
    .unwrap();
    let graph_s = graph.display().to_string();
    let goal = "Status of T-602 and our refund policy?";
    let args =
        ["run", "--design", "multi", "--claims", "free", "--researcher", "paraphrase", "--call-graph", &graph_s, goal];
    let plain = dir.join("plain.db");
    let uninterrupted = rolegate(&plain, &args);
    assert!(
        stdout(&uninterrupted).contains("rejected_message"),
        "{}{}",
        stdout(&uninterrupted),
        stderr(&uninterrupted)
    );
    let killed = dir.join("killed.db");
    let crashed = crashing(&killed, "durable:after_commit:2", &args);
    assert_ne!(crashed.status.code(), Some(0), "killed after its second durable record");
    // resumed with no --call-graph: the run's own graph is used
    let resumed = rolegate(&killed, &["resume", "run-1"]);
    assert_eq!(resumed.status.code(), uninterrupted.status.code(), "{}", stderr(&resumed));
    assert!(stdout(&resumed).contains("rejected_message"), "{}{}", stdout(&resumed), stderr(&resumed));
    assert_eq!(printed(&resumed, &killed), printed(&uninterrupted, &plain));
}

/// Issue 32, defect 5: a run being driven shows as running with its owner, a second resume
/// of it is refused as a conflict (exit 1) before it does anything, and once the driver is
/// gone (killed) the run is interrupted and resumes to its end.
#[test]
fn a_run_being_driven_is_listed_running_and_a_second_resume_is_a_conflict() {
    use std::io::BufRead;
    let store = temp_dir("durable-lease").join("rolegate.db");
    let args = ["run", "--design", "multi", "Status of T-601 and our refund policy?"];
    let mut c = crash_at(&store, "durable:hold_after_commit:2", &args);
    let mut child = c.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stderr.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.starts_with("rolegate-test: held"), "{line}");
    let before = counts(&store, ["SELECT count(*) FROM steps"]);
    // the live run: listed running by its process, and a second driver is refused
    assert_eq!(status(&store), format!("running (pid {})", child.id()));
    let second = rolegate(&store, &["resume", "run-1"]);
    assert_eq!(second.status.code(), Some(1), "a conflict: {}", stderr(&second));
    assert!(stderr(&second).contains(&format!("being driven by process {}", child.id())), "{}", stderr(&second));
    assert_eq!(counts(&store, ["SELECT count(*) FROM steps"]), before, "the refused resume wrote nothing");
    // the driver killed: the run is interrupted, and resumes to its end
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(status(&store), "interrupted");
    let resumed = rolegate(&store, &["resume", "run-1"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert_eq!(status(&store), "done");
}
