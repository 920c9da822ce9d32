//! The design table: tasks t1–t4 under the fixed, plan, ReAct and three-role designs, from
//! runs; a task the three roles cannot serve gets `out_of_scope`.

use rolegate::design::{Design, DesignCode, TaskGroup, bundled_tasks, parse_tasks};
use rolegate::eval::{DESIGN_TABLE_COLUMNS, design_table};

use crate::util::env;

#[tokio::test]
async fn four_tasks_under_four_designs_reproduce_the_design_table() {
    let tasks: Vec<_> = bundled_tasks().unwrap().into_iter().filter(|t| t.group == TaskGroup::Designs).collect();
    let rows = design_table(&env(), &tasks, &DESIGN_TABLE_COLUMNS).await.unwrap();
    for r in &rows {
        println!("{}", r.table_line());
    }
    let got: Vec<(&str, Design, &str, u64, bool)> =
        rows.iter().map(|r| (r.task.as_str(), r.design, r.code.as_str(), r.model_calls, r.covered)).collect();
    use Design::{Fixed, Multi, Plan, React};
    assert_eq!(
        got,
        [
            ("t1", Fixed, "done", 0, true),
            ("t1", Plan, "done", 1, true),
            ("t1", React, "done", 2, true),
            ("t1", Multi, "done", 4, true),
            ("t2", Fixed, "done", 0, true),
            ("t2", Plan, "done", 1, true),
            ("t2", React, "done", 3, true),
            ("t2", Multi, "done", 5, true),
            ("t3", Fixed, "no_route", 0, false),
            ("t3", Plan, "done", 1, true),
            ("t3", React, "done", 2, true),
            ("t3", Multi, "done", 4, true),
            ("t4", Fixed, "done", 0, false),
            ("t4", Plan, "done", 1, true),
            ("t4", React, "done", 3, true),
            ("t4", Multi, "done", 5, true),
        ]
    );
    let tokens = |task: &str, design: Design| {
        rows.iter().find(|r| r.task == task && r.design == design).map(|r| r.input_tokens).unwrap()
    };
    for t in ["t1", "t2", "t3", "t4"] {
        assert_eq!(tokens(t, Fixed), 0, "{t}: no model, no tokens");
        assert!(tokens(t, Plan) > 0 && tokens(t, Plan) < tokens(t, React), "{t}");
    }
    // ReAct resends everything seen so far: three calls cost more than 1.5 times two
    assert!(2 * tokens("t2", React) > 3 * tokens("t1", React), "{} vs {}", tokens("t2", React), tokens("t1", React));
    assert!(2 * tokens("t4", React) > 3 * tokens("t3", React));
    // t4 under the fixed design: done, but the battery policy was never read
    let t4 = rows.iter().find(|r| r.task == "t4" && r.design == Fixed).unwrap();
    assert_eq!(t4.calls, ["get_ticket"]);
    // three roles: the researcher is the ReAct loop, plus one planner and one reviewer
    // call; the reviewer re-reads the cited policy through its own gate
    let calls = |task: &str, design: Design| rows.iter().find(|r| r.task == task && r.design == design).unwrap();
    for t in ["t1", "t2", "t3", "t4"] {
        assert_eq!(calls(t, Multi).model_calls, calls(t, React).model_calls + 2, "{t}");
        assert!(tokens(t, Multi) > tokens(t, React), "{t}: three prompts and two hand-offs cost tokens");
    }
    assert_eq!(calls("t1", Multi).calls, ["get_ticket"], "no policy cited, nothing to re-read");
    assert_eq!(calls("t2", Multi).calls, ["get_ticket", "lookup_document", "lookup_document"]);
}

#[tokio::test]
async fn a_task_no_role_scope_can_serve_gets_out_of_scope_and_runs_nothing() {
    let tasks = bundled_tasks().unwrap();
    let picked: Vec<_> = tasks.into_iter().filter(|t| ["p1", "p2", "p3"].contains(&t.id.as_str())).collect();
    let rows = design_table(&env(), &picked, &[Design::Multi]).await.unwrap();
    let got: Vec<(&str, DesignCode, u64, bool, usize)> =
        rows.iter().map(|r| (r.task.as_str(), r.code, r.model_calls, r.covered, r.calls.len())).collect();
    use rolegate::multi::MultiReason::Done;
    assert_eq!(
        got,
        [
            ("p1", DesignCode::OutOfScope, 0, false, 0), // needs search_documents: no role holds it
            ("p2", DesignCode::Multi(Done), 4, true, 2), // two policies: reads fit the scopes
            ("p3", DesignCode::OutOfScope, 0, false, 0), // needs send_email_draft: no role may hold it
        ]
    );
    assert_eq!(rows[0].table_line(), "p1   multi     out_of_scope         0      0       0 no      no");
}

#[test]
fn the_task_table_refuses_bad_rows_with_file_and_line() {
    let good = r#"{"id": "x1", "group": "designs", "goal": "Status of T-601?", "needs": ["get_ticket"]}"#;
    assert_eq!(parse_tasks(good, "f").unwrap().len(), 1);
    for bad in [
        r#"{"id": "x1", "group": "designs", "goal": "g", "needs": ["get_ticket"], "extra": 1}"#,
        r#"{"id": "x1", "group": "nope", "goal": "g", "needs": ["get_ticket"]}"#,
        r#"{"id": "", "group": "designs", "goal": "g", "needs": ["get_ticket"]}"#,
        r#"{"id": "x1", "group": "designs", "goal": "", "needs": ["get_ticket"]}"#,
        r#"{"id": "x1", "group": "designs", "goal": "g", "needs": []}"#,
        "{",
    ] {
        let text = format!("# comment\n{bad}\n");
        let err = parse_tasks(&text, "tasks.jsonl").unwrap_err().to_string();
        assert!(err.starts_with("tasks.jsonl:2:"), "{err}");
    }
    assert!(parse_tasks(&format!("{good}\n{good}"), "f").is_err(), "a repeated id");
}

#[tokio::test]
async fn the_compare_report_holds_every_section_including_three_roles() {
    use rolegate::eval::compare_report;

    let report = compare_report(&env(), &bundled_tasks().unwrap()).await.unwrap();
    assert_eq!(report.plan_checks.len(), 6);
    assert_eq!(report.designs.len(), 4 * 4, "t1–t4 × fixed, plan, react, multi");
    assert_eq!(
        report.policypal.median_steps.iter().map(|(k, m)| format!("{k}={m}")).collect::<Vec<_>>(),
        ["sequential=3", "parallel=2"]
    );
    let guard: Vec<(bool, &str, &str)> =
        report.policypal.guard.iter().map(|r| (r.guard, r.code.as_str(), r.reply)).collect();
    assert_eq!(guard, [(true, "done", "answer"), (false, "step_budget", "gave_up")]);
    let json: serde_json::Value = serde_json::to_value(&report).unwrap();
    let svr = &json["single_versus_roles"];
    assert_eq!((svr["single"]["model_calls"].as_u64(), svr["single"]["messages"].as_u64()), (Some(3), Some(0)));
    assert_eq!((svr["multi"]["role_calls"].as_u64(), svr["multi"]["messages"].as_u64()), (Some(5), Some(3)));
    assert_eq!(
        (json["designs"][8]["task"].as_str(), json["designs"][8]["code"].as_str()),
        (Some("t3"), Some("no_route"))
    );
    assert_eq!(
        (json["designs"][3]["design"].as_str(), json["designs"][3]["code"].as_str()),
        (Some("multi"), Some("done"))
    );
    let lines = report.table_lines();
    assert_eq!(lines[0], "== single versus three roles");
    assert!(
        lines.contains(&"t3   fixed     no_route             0      0       0 no      no".to_string()),
        "{lines:#?}"
    );
    assert!(lines.contains(&rolegate::eval::DESIGN_ROW_HEADER.to_string()), "a header row over the design rows");
}
