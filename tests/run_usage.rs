//! `rolegate run` prints, for every design, what the run cost (model calls, input and output
//! tokens, credits per decider) and the final answer, marked as agent output, before its
//! closing summary line.

use std::process::Command;

fn run(design: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_rolegate"))
        .args(["run", "--design", design, "What is the status of T-601?"])
        .env_remove("ROLEGATE_API_KEY")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{design}: {text}{}", String::from_utf8_lossy(&out.stderr));
    text
}

/// The `usage` line of `who`: (calls, input tokens, output tokens, credits).
fn usage(text: &str, who: &str) -> (u64, u64, u64, String) {
    let prefix = format!("usage    {who}: ");
    let line = text.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no {prefix:?} in {text}"));
    let fields: Vec<&str> = line[prefix.len()..].split(" | ").collect();
    let value = |i: usize, name: &str| fields[i].strip_prefix(name).unwrap_or_else(|| panic!("{line}")).to_string();
    (
        value(0, "calls ").parse().unwrap(),
        value(1, "input tokens ").parse().unwrap(),
        value(2, "output tokens ").parse().unwrap(),
        value(3, "credits "),
    )
}

#[test]
fn every_design_prints_its_usage_and_answer_before_the_summary() {
    for (design, who) in [("single", "agent"), ("plan", "plan"), ("policypal", "policypal")] {
        let text = run(design);
        let (calls, input, output, credits) = usage(&text, who);
        assert!(calls > 0 && input > 0 && output > 0, "{design}: {text}");
        assert!(credits.parse::<f64>().unwrap() > 0.0, "{design}: {text}");
        assert!(text.contains("answer (agent output, shown as data): "), "{design}: {text}");
        let last = text.lines().last().unwrap();
        assert!(last.contains("calls=[\"get_ticket\"]"), "the summary stays last: {text}");
    }
    // the fixed design calls no model: its usage says so
    let text = run("fixed");
    assert_eq!(usage(&text, "fixed"), (0, 0, 0, "0".to_string()), "{text}");
    assert!(text.contains("answer (agent output, shown as data): Plan finished"), "{text}");
    // the three roles: one line per role
    let text = run("multi");
    for role in ["planner", "researcher", "reviewer"] {
        assert!(usage(&text, role).0 > 0, "{role}: {text}");
    }
    assert!(text.contains("answer (agent output, shown as data): "), "{text}");
}
