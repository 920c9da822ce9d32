//! The page of a results file (`suite --out`, a merged set of shards): what the experiment
//! was (its kind, models and their settings, the data it ran on by digest, its
//! configurations) and the figures it holds, as the tables `suite` and `merge` print them.

use super::markup::escape;
use crate::suite::ExperimentConfig;

/// A self-contained HTML page of `config` and its `tables` (the lines `merge` prints).
pub fn results_page(config: &ExperimentConfig, tables: &[String]) -> String {
    let mut page = String::from(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>rolegate results</title>\
         <style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}\
         td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}pre{background:#f6f6f6;padding:1em;overflow-x:auto}</style>\
         </head><body>",
    );
    page.push_str(&format!("<h1>Results: {}</h1>", escape(&config.kind)));
    let row = |k: &str, v: &str| format!("<tr><th>{}</th><td>{}</td></tr>", escape(k), escape(v));
    page.push_str("<h2>Experiment</h2><table>");
    page.push_str(&row("kind", &config.kind));
    page.push_str(&row("repetitions", &config.repeat.to_string()));
    if !config.tasks.is_empty() {
        page.push_str(&row("tasks", &config.tasks.join(", ")));
    }
    if !config.attacks.is_empty() {
        page.push_str(&row("payloads", &config.attacks.len().to_string()));
    }
    if !config.rows.is_empty() {
        page.push_str(&row("rows", &config.rows.len().to_string()));
    }
    page.push_str("</table><h2>Models</h2><table>");
    if config.models.is_empty() {
        page.push_str(&row("models", "the bundled fakes"));
    }
    for (k, v) in &config.models {
        page.push_str(&row(k, v));
    }
    page.push_str("</table><h2>Data (SHA-256)</h2><table>");
    for (k, v) in &config.data {
        page.push_str(&row(k, v));
    }
    page.push_str("</table>");
    if !config.configs.is_empty() {
        page.push_str("<h2>Configurations</h2><ol>");
        for c in &config.configs {
            page.push_str(&format!("<li>{}</li>", escape(c)));
        }
        page.push_str("</ol>");
    }
    page.push_str("<h2>Figures</h2><pre>");
    for l in tables {
        page.push_str(&escape(l));
        page.push('\n');
    }
    page.push_str("</pre></body></html>\n");
    page
}
