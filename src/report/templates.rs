//! The report's figures per template: one table row per AgentDojo-style template and
//! configuration, counted from the matrix's runs ([`crate::suite::template_figures`], the
//! same figures `suite --matrix --templates` and `merge` print), each rate with its 95%
//! Wilson interval, so a template's attack success can be set next to the published rate
//! of the same style. Nothing when no template payload ran.

use std::fmt::Write;

use super::markup::escape;
use crate::suite::matrix::{Count, Matrix};
use crate::suite::template_figures;

fn count_cell(h: &mut String, c: &Count, class: &str) {
    let _ = write!(h, r#"<td class="num {class}">{}</td>"#, escape(&c.with_interval()));
}

/// The section of the figures per template (`id="templates"`, table `templates-table`), or
/// an empty string when no run of `matrix` planted a template payload.
pub fn templates_section(matrix: &Matrix) -> String {
    let figures = template_figures(matrix);
    if figures.is_empty() {
        return String::new();
    }
    let mut h = String::with_capacity(160 * figures.len() + 1024);
    h.push_str(r#"<section id="templates"><h2>Figures per template</h2><p class="lead">The template payloads (AgentDojo's attack styles, written in this project's words, filled per task, user and model) counted on their own, per configuration: attack success is the rate to set next to a published rate of the same style, with its 95% Wilson interval. With the compromised fakes deciding, the figures measure the controls, not a model's susceptibility.</p>"#);
    h.push_str(r#"<table id="templates-table" class="matrix"><thead><tr><th>template</th><th>design</th><th>configuration</th><th>attack success (95% CI)</th><th>utility under attack (95% CI)</th><th>attempted (95% CI)</th></tr></thead><tbody>"#);
    for f in &figures {
        let _ = write!(
            h,
            r#"<tr class="template {d}"><td class="template">{}</td><td class="design">{d}</td><td>{}</td>"#,
            escape(f.template.as_str()),
            escape(&f.label),
            d = f.config.design(),
        );
        count_cell(&mut h, &f.attack_success, if f.attack_success.n > 0 { "bad" } else { "good" });
        count_cell(&mut h, &f.utility_under_attack, "");
        count_cell(&mut h, &f.attempted, "");
        h.push_str("</tr>");
    }
    h.push_str("</tbody></table></section>");
    h
}
