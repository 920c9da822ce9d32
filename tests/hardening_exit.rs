//! Honest exit codes for `rolegate run`: 0 when the run ended `done` (or parked awaiting a
//! person), 1 when it stopped for any other reason (a model failure, a budget, a
//! refusal, no route, a rejected plan), 2 when the input is unusable; an unknown task,
//! user or grant is refused before anything runs, with the known names listed.

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rolegate"))
        .arg("run")
        .args(args)
        .env_remove("ROLEGATE_API_KEY")
        .env_remove("ROLEGATE_BASE_URL")
        .output()
        .expect("the binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_run_exits_0_only_when_it_ended_done_and_1_for_every_other_stop() {
    let cases: &[(&[&str], i32, &str)] = &[
        (&["What is the status of T-601 and our refund policy?"], 0, "done done"),
        (&["Check T-601.", "--model", "fake:loop"], 1, "stopped repeated_call"),
        (&["Check T-601.", "--model", "fake:garbage"], 1, "stopped stuck"),
        (&["--design", "fixed", "What does the warranty policy say?"], 1, "no_route"),
        (&["--design", "plan", "--model", "fake:bad_tool", "Status of T-601?"], 1, "plan_rejected"),
        (&["--design", "plan", "Status of T-601 and our refund policy?"], 0, " done "),
        (&["--design", "multi", "Status of T-601 and our refund policy?"], 0, "done"),
        (
            &["Check T-601.", "--model", "openai:local-model", "--zero-price", "--base-url", "http://127.0.0.1:9/v1"],
            1,
            "model_error",
        ),
    ];
    for (args, code, shown) in cases {
        let out = run(args);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(*code), "{args:?}\n{stdout}\n{}", text(&out.stderr));
        assert!(stdout.contains(shown), "{args:?}: {stdout}");
    }
}

#[test]
fn unknown_names_are_refused_before_anything_runs_listing_the_known_ones() {
    let cases: &[(&[&str], &str)] = &[
        (&["--task", "nope", "Check T-601."], "--task \"nope\" is not a task (known: helpdesk, planner, reply,"),
        (&["--user", "ghost", "Check T-601."], "--user \"ghost\" is not a user (known: kwame, lena, mallory)"),
        (
            &["--grant", "rm_rf", "--task", "reply", "Check T-601."],
            "--grant \"rm_rf\" is not a write tool (known: send_email_draft)",
        ),
        (&["--design", "policypal", "--user", "ghost", "Check T-601."], "is not a user"),
        (&["--design", "nope", "Check T-601."], "nope"),
    ];
    for (args, message) in cases {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stdout));
        assert!(text(&out.stderr).contains(message), "{args:?}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "", "{args:?}: nothing ran");
    }
}
