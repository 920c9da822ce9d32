//! The report's matrix drill-down: one table row per cell, sortable, each linking to a
//! diagram on the page; the diagram of a class of cells is a scenario row that reproduces
//! the matrix's verdict for that cell.

use rolegate::agent::Env;
use rolegate::lab::parse_catalog;
use rolegate::multi::MultiEnv;
use rolegate::report::{CellView, ReportOptions, cell_views, cells_section, representative_rows, stopped_at};
use rolegate::suite::{
    DefenseConfig, Matrix, MatrixSpec, RoleCompromise, RowResult, parse_benign_tasks, run_matrix, run_rows,
};
use std::sync::Arc;

fn data(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/data/suite/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn spec() -> MatrixSpec {
    MatrixSpec {
        tasks: parse_benign_tasks(&data("matrix_tasks.jsonl"), "t").unwrap(),
        attacks: Arc::from(parse_catalog(&data("matrix_attacks.jsonl"), "a").unwrap()),
        configs: DefenseConfig::all(),
        roles: RoleCompromise::default(),
    }
}

#[tokio::test]
async fn every_cell_has_a_row_and_every_link_has_its_diagram() {
    let env = Arc::new(Env::bundled().unwrap());
    let menv = MultiEnv::new(&env).unwrap();
    let spec = spec();
    let m = run_matrix(&spec, &env).await.unwrap();
    let html = cells_section(&m, &spec, &env, &menv, &ReportOptions::default()).await.unwrap();
    assert_eq!(html.matches(r#"<tr class="cell "#).count(), m.runs.len());
    assert!(html.contains(r#"<table id="cells-table""#) && html.contains("<script>"));
    let mut links = 0;
    for part in html.split(r##"<a href="#"##).skip(1) {
        let target = &part[..part.find('"').unwrap()];
        assert!(html.contains(&format!(r#"<figure id="{target}">"#)), "{target} has no diagram");
        links += 1;
    }
    assert_eq!(links, m.runs.len());
    // a payload's text is shown above its diagram
    assert!(html.contains("IMPORTANT INSTRUCTIONS: before answering"));
    // the codes and where they stopped the run: the coordinator refused a05 under the filter
    assert!(html.contains("<td>coordinator</td><td class=\"codes\">instruction_like"), "coordinator row");
}

/// Runs the representative row of each class of `m`'s cells again and asserts that it
/// ends with the verdict of every cell of its class. Returns the cells' views (each with
/// its diagram's anchor) and the anchors drawn.
pub async fn every_class_reproduces_its_verdict(
    m: &Matrix,
    spec: &MatrixSpec,
    env: &Arc<Env>,
    menv: &Arc<MultiEnv>,
) -> (Vec<CellView>, Vec<String>) {
    let mut views = cell_views(m, spec);
    let reps = representative_rows(m, spec, &env.world, &mut views).unwrap();
    let anchors: Vec<String> = reps.iter().map(|(r, _)| format!("diagram-{}", r.id())).collect();
    let results = run_rows(reps.into_iter().map(|(r, _)| r).collect(), env, menv, None, None).await;
    for (anchor, r) in anchors.iter().zip(results) {
        let r = r.unwrap();
        let got = match &r {
            RowResult::Single(o) => o.attack,
            RowResult::Multi(o, _) => o.attack,
        };
        let class: Vec<_> = views.iter().filter(|v| v.diagram.as_deref() == Some(anchor.as_str())).collect();
        assert!(!class.is_empty());
        for v in class {
            assert_eq!(v.verdict, got, "{anchor}: {} {:?} under {}", v.task, v.payload, v.config);
        }
    }
    (views, anchors)
}

#[tokio::test]
async fn the_diagram_of_a_class_reproduces_the_matrix_verdict_of_its_cell() {
    let env = Arc::new(Env::bundled().unwrap());
    let menv = MultiEnv::new(&env).unwrap();
    let spec = spec();
    let m = run_matrix(&spec, &env).await.unwrap();
    let (_, drawn) = every_class_reproduces_its_verdict(&m, &spec, &env, &menv).await;
    assert!(drawn.len() >= 6, "benign, executed, refused and ignored cells of both designs: {}", drawn.len());
}

#[test]
fn where_a_run_was_stopped_follows_the_code_and_the_configuration() {
    let configs = DefenseConfig::all();
    let single_checked = &configs[0];
    let single_unchecked = configs.iter().find(|c| c.cells()[4] == "off").unwrap();
    assert_eq!(stopped_at("instruction_like", &configs[8]), "coordinator");
    assert_eq!(stopped_at("needs_approval", single_checked), "gate (held for a person)");
    assert_eq!(stopped_at("repeated_call", single_checked), "loop check");
    assert_eq!(stopped_at("not_granted", single_checked), "gate");
    assert_eq!(stopped_at("not_allowed", single_checked), "loop check");
    assert_eq!(stopped_at("not_allowed", single_unchecked), "gate");
}
