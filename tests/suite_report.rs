//! `rolegate report`: one self-contained page (no script, no link, nothing fetched) with
//! the matrix, the rows and one sequence diagram per multi-agent row; every diagram is
//! well-formed XML and untrusted text in it is escaped.

use rolegate::agent::TraceKind;
use rolegate::eval::{bundled_multi, run_multi};
use rolegate::report::sequence_svg;
use std::process::Command;

use crate::util::{menv, temp_dir};

fn path(name: &str) -> String {
    format!("{}/tests/data/suite/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Every `<svg …>…</svg>` of a page.
fn svgs(html: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find("<svg") {
        let end = rest[start..].find("</svg>").expect("every svg is closed") + start + "</svg>".len();
        out.push(&rest[start..end]);
        rest = &rest[end..];
    }
    out
}

#[test]
fn the_report_is_self_contained_and_every_diagram_parses_as_xml() {
    let out = temp_dir("suite-report").join("report.html");
    let status = Command::new(env!("CARGO_BIN_EXE_rolegate"))
        .args(["report", "--out", out.to_str().unwrap(), &path("user_rows.jsonl")])
        .args(["--tasks", &path("matrix_tasks.jsonl"), "--attacks", &path("matrix_attacks.jsonl")])
        .status()
        .expect("the binary runs");
    assert_eq!(status.code(), Some(0));
    let html = std::fs::read_to_string(&out).unwrap();
    for outside in
        ["http:", "https:", "src=", "<link", "url(", "@import", "<img", "<iframe", "fetch(", "xmlhttprequest"]
    {
        assert!(!html.to_ascii_lowercase().contains(outside), "the page must not hold {outside}");
    }
    // the one script is the inline sort of the matrix cell table
    assert_eq!(html.to_ascii_lowercase().matches("<script").count(), 1);
    assert!(html.contains("<script>\n(function () {\n  var t = document.getElementById('cells-table');"));
    assert!(html.contains(r#"<table id="matrix-table""#));
    assert_eq!(html.matches(r#"<tr class="single">"#).count() + html.matches(r#"<tr class="multi">"#).count(), 48 + 7);
    // the matrix cells' diagrams come first, in their own section; each parses as XML
    let (cells, rows) = html.split_at(html.find(r#"<section id="diagrams">"#).unwrap());
    let cell_svgs = svgs(&cells[cells.find(r#"<section id="cell-diagrams">"#).unwrap()..]);
    assert!(!cell_svgs.is_empty(), "the cell links have diagrams");
    for svg in &cell_svgs {
        roxmltree::Document::parse(svg).expect("a cell diagram is XML");
    }
    let all = svgs(rows);
    assert_eq!(all.len(), 7, "one diagram per row (u1 to u7), single-agent rows included");
    let diagrams: Vec<&str> = all.iter().copied().filter(|s| s.contains(">coordinator<")).collect();
    assert_eq!(diagrams.len(), 4, "the multi rows u4 to u7 have role lifelines");
    for svg in &all {
        let doc = roxmltree::Document::parse(svg).expect("a diagram is XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
    }
    for svg in &all[..3] {
        let doc = roxmltree::Document::parse(svg).expect("a diagram is XML");
        for lane in ["user", "agent", "tools"] {
            assert!(doc.descendants().any(|n| n.text() == Some(lane)), "{lane} lifeline of a single-agent row");
        }
    }
    for svg in &diagrams {
        let doc = roxmltree::Document::parse(svg).expect("a diagram is XML");
        for lane in ["planner", "researcher", "reviewer", "coordinator"] {
            assert!(doc.descendants().any(|n| n.text() == Some(lane)), "{lane} lifeline");
        }
    }
    // u6: an accepted brief, then the finding refused with its code
    let u6 = diagrams[2];
    assert!(u6.contains("m1 brief") && u6.contains("rejected: unsupported_claim"), "{u6}");
    // u5: the reviewer's send ran
    assert!(diagrams[1].contains("send_email_draft: SENT"), "{}", diagrams[1]);
    assert!(diagrams[1].contains(r#"class="endbox effect""#), "an e-mail left: the end box is red");
}

#[tokio::test]
async fn text_from_a_run_is_escaped_in_the_diagram() {
    let row = bundled_multi().unwrap().into_iter().find(|r| r.id == "m07").unwrap();
    let (mut run, _) = run_multi(&row, &menv()).await.unwrap();
    let hostile = r#"<script>alert("x")</script> & 'quotes'"#;
    for t in &mut run.traces {
        for l in &mut t.lines {
            if l.kind == TraceKind::Check && l.code != "ok" {
                l.detail = format!("call {hostile}").into();
            }
        }
    }
    let svg = sequence_svg(&format!("m07 {hostile}"), &run);
    assert!(!svg.contains("<script"), "{svg}");
    let doc = roxmltree::Document::parse(&svg).expect("still XML");
    assert!(doc.descendants().any(|n| n.text().is_some_and(|t| t.contains(hostile))), "the text survives, escaped");
    assert!(doc.descendants().any(|n| n.text().is_some_and(|t| t.ends_with(" m3 verdict"))));
}
