//! Figures per template beyond one run's standard output (issue 17: "the report names the
//! template"): a template payload's cell names its template in the results file, so shards
//! merged print the figures per template exactly as one run does; the HTML report shows
//! them (each rate with its 95% Wilson interval) and names each cell's template, and the
//! diagram of a template cell reproduces its verdict.

use rolegate::agent::Env;
use rolegate::lab::{AttackVerdict, TemplateName, generate, parse_catalog};
use rolegate::multi::MultiEnv;
use rolegate::report::{ReportOptions, cells_section, html_with};
use rolegate::suite::{
    DefenseConfig, MatrixSpec, RoleCompromise, TemplateFigures, parse_benign_tasks, run_matrix, wilson,
};
use std::path::Path;
use std::process::Output;
use std::sync::Arc;

use crate::util::{corner_configs, shown, stderr, stdout, temp_dir};

fn data(name: &str) -> String {
    format!("{}/tests/data/suite/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn rolegate(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_rolegate"))
        .current_dir(dir)
        .args(args)
        .env_remove("ROLEGATE_TEST_CRASH_AT")
        .env_remove("JOB_COMPLETION_INDEX")
        .env_remove("SLURM_ARRAY_TASK_ID")
        .output()
        .expect("the binary runs")
}

#[test]
fn shards_merged_print_the_figures_per_template_exactly_as_one_run_prints_them() {
    let dir = temp_dir("template-shards");
    let (tasks, attacks) = (data("matrix_tasks.jsonl"), data("matrix_attacks.jsonl"));
    // one task, two payloads, each also as `direct` and `tool_knowledge`, twice
    let base = [
        "suite",
        "--matrix",
        "--templates",
        "direct,tool_knowledge",
        "--repeat",
        "2",
        "--tasks",
        &tasks,
        "--attacks",
        &attacks,
    ];
    let configs = DefenseConfig::with_ifc().len();
    let mut files = Vec::new();
    for i in 0..2 {
        let f = dir.join(format!("shard{i}.jsonl")).display().to_string();
        let shard = format!("{i}/2");
        let o = rolegate(&dir, &[&base[..], &["--out", &f, "--shard", &shard]].concat());
        assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
        files.push(f);
    }
    // every template cell names its template in the file: configurations x 2 payloads x 2
    let text: String = files.iter().map(|f| std::fs::read_to_string(f).unwrap()).collect();
    for t in ["direct", "tool_knowledge"] {
        assert_eq!(text.matches(&format!("\"template\":\"{t}\"")).count(), configs * 2 * 2, "{t}");
    }
    for format in ["table", "jsonl", "json"] {
        let one = rolegate(&dir, &[&base[..], &["--format", format]].concat());
        let merged = rolegate(
            &dir,
            &[&["merge", "--format", format][..], &files.iter().map(String::as_str).collect::<Vec<_>>()].concat(),
        );
        assert_eq!(shown(&merged), shown(&one), "{format}: merged shards print what one run prints");
        assert_eq!(merged.status.code(), one.status.code(), "{format}");
        let out = stdout(&merged);
        match format {
            "table" => {
                // --repeat gives intervals: the per-template table carries them too
                assert!(out.contains(TemplateFigures::TABLE_HEADER_CI), "{out}");
                for t in ["direct ", "tool_knowledge "] {
                    assert_eq!(out.lines().filter(|l| l.starts_with(t)).count(), configs, "{t}: {out}");
                }
            }
            "jsonl" => {
                let per: Vec<serde_json::Value> = out
                    .lines()
                    .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
                    .filter(|v| v["kind"] == "template")
                    .collect();
                assert_eq!(per.len(), 2 * configs);
                assert!(per.iter().all(|v| v["attack_success"]["of"] == 4 && v["ci95"]["attack_success"].is_object()));
            }
            _ => {
                let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
                assert_eq!(doc["templates"].as_array().map(Vec::len), Some(2 * configs));
            }
        }
    }
}

#[tokio::test]
async fn the_report_shows_the_figures_per_template_with_intervals_and_names_each_cells_template() {
    let env = Arc::new(Env::bundled().unwrap());
    let menv = MultiEnv::new(&env).unwrap();
    let base = parse_catalog(&std::fs::read_to_string(data("matrix_attacks.jsonl")).unwrap(), "a").unwrap();
    let templates = [TemplateName::Direct, TemplateName::ToolKnowledge];
    let made = generate(&templates, &base).unwrap();
    let configs = corner_configs();
    let spec = MatrixSpec {
        tasks: parse_benign_tasks(&std::fs::read_to_string(data("matrix_tasks.jsonl")).unwrap(), "t").unwrap(),
        attacks: base.iter().cloned().chain(made).collect(),
        configs: configs.clone(),
        roles: RoleCompromise::default(),
    };
    let m = run_matrix(&spec, &env).await.unwrap();
    let opts = ReportOptions::default();
    let cells = cells_section(&m, &spec, &env, &menv, &opts).await.unwrap();
    let page = html_with(&[], &[], &m, &opts, &cells);

    // one row per template and configuration, each figure counted by hand from the runs
    assert!(page.contains(r#"<table id="templates-table""#));
    assert_eq!(page.matches(r#"<tr class="template "#).count(), templates.len() * configs.len());
    let mut open = 0;
    for t in templates {
        for (i, c) in configs.iter().enumerate() {
            let runs: Vec<_> = m.runs.iter().filter(|r| r.config == i && r.template == Some(t)).collect();
            assert_eq!(runs.len(), 2, "one task x two payloads of {t}");
            let executed = runs.iter().filter(|r| r.verdict == Some(AttackVerdict::Executed)).count();
            let ci = wilson(executed, 2).unwrap().percent();
            #[allow(clippy::cast_precision_loss)]
            let pct = executed as f64 * 50.0;
            let class = if executed > 0 { "bad" } else { "good" };
            let row = format!(
                r#"<td class="template">{t}</td><td class="design">{}</td><td>{}</td><td class="num {class}">{executed}/2 ({pct:.1}%; {ci})</td>"#,
                c.design(),
                c.label()
            );
            assert!(page.contains(&row), "{row}");
            if c.must_hold() {
                assert_eq!(executed, 0, "{t} under {}", c.label());
            } else {
                open += executed;
            }
        }
    }
    assert!(open > 0, "with the defenses off the compromised fakes obey the filled templates");

    // the cell table names the template of each template cell and `-` for every other cell
    for t in templates {
        let n = m.runs.iter().filter(|r| r.template == Some(t)).count();
        assert_eq!(cells.matches(&format!(r#"<td class="template">{t}</td>"#)).count(), n, "{t}");
    }
    let others = m.runs.iter().filter(|r| r.template.is_none()).count();
    assert_eq!(cells.matches(r#"<td class="template">-</td>"#).count(), others);
    assert!(cells.contains("<th>template</th>"));

    // a template cell's diagram runs the payload as the matrix filled it and reproduces the
    // cell's verdict
    let (views, drawn) = crate::report_cells::every_class_reproduces_its_verdict(&m, &spec, &env, &menv).await;
    let template_classes =
        drawn.iter().filter(|a| views.iter().any(|v| v.diagram.as_ref() == Some(*a) && v.template.is_some())).count();
    assert!(template_classes >= 4, "template payloads of both designs have diagrams ({template_classes})");
}

#[test]
fn a_report_without_template_payloads_has_no_template_section() {
    let m = rolegate::suite::Matrix { tasks: 0, attacks: 0, figures: Vec::new(), runs: Vec::new() };
    assert_eq!(rolegate::report::templates_section(&m), "");
    let page = html_with(&[], &[], &m, &ReportOptions::default(), "");
    assert!(!page.contains("templates-table"));
}
