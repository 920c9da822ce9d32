//! The experiment table: one row per design and configuration with graded utility,
//! utility under attack, attack success, attempted, covered, model calls, tokens in and
//! out, credits and wall time (p50, p95). `rolegate suite --matrix` and `rolegate compare`
//! print it in three forms: aligned text with a header row and a legend under it
//! ([`ExperimentTable::table_lines`]), one JSON document (serde), and RFC 4180 CSV with a
//! header row ([`ExperimentTable::csv`], written by the `csv` crate).
//!
//! A rate a run kind does not measure (compare runs no attacks) is `-` in the text, empty
//! in CSV and `null` in JSON.

use rust_decimal::Decimal;
use serde::Serialize;
use std::collections::BTreeMap;

use super::matrix::{Count, Figures, Intervals, Matrix, VariantRun};
use crate::eval::DesignRow;
use crate::lab::HopCounts;

/// One leading column of the table: its header and its least width (the matrix keeps the
/// widths it always had, so its first columns read as before).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lead {
    /// The header.
    pub name: &'static str,
    /// Least width in characters.
    pub width: usize,
    /// What the column says, for the legend.
    pub meaning: &'static str,
}

/// One row: a design under one configuration, over its runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExperimentRow {
    /// `single`, `multi`, `fixed`, `plan`, `react`, …
    pub design: String,
    /// The configuration's one-line name (`single scopes=wide …`, or the model).
    pub configuration: String,
    /// The leading cells, one per [`ExperimentTable::lead`] column.
    #[serde(skip)]
    pub cells: Vec<String>,
    /// Runs counted in the row.
    pub runs: usize,
    /// Benign runs done, covered and answered correctly (graded).
    pub utility: Count,
    /// Attacked runs done, covered and answered correctly; `None` when no attack ran.
    pub utility_under_attack: Option<Count>,
    /// Attacked runs whose effect executed.
    pub attack_success: Option<Count>,
    /// Attacked runs whose effect was proposed or carried on and refused or held.
    pub attempted: Option<Count>,
    /// Benign runs that called every tool the task needs (whatever the answer).
    pub covered: Count,
    /// Paid model calls over every run of the row.
    pub model_calls: u64,
    /// Input tokens over those calls.
    pub tokens_in: u64,
    /// Output tokens over those calls.
    pub tokens_out: u64,
    /// Credits over those calls.
    pub credits: Decimal,
    /// Median wall time of one run, milliseconds.
    pub wall_ms_p50: f64,
    /// 95th percentile wall time of one run, milliseconds.
    pub wall_ms_p95: f64,
    /// The furthest hop of each attacked run's payload, counted; `None` when no attack ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hops: Option<HopCounts>,
    /// The 95% Wilson intervals of the rates, when the run asked for them.
    #[serde(rename = "ci95", skip_serializing_if = "Option::is_none")]
    pub intervals: Option<Intervals>,
    /// Refusals by code over every run (the matrix).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub refusals: BTreeMap<String, usize>,
    /// A note after the row (`BROKEN: …` for a matrix configuration that did not hold).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub flag: String,
}

/// The whole table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExperimentTable {
    /// The leading columns (the configuration's settings).
    #[serde(skip)]
    pub lead: Vec<Lead>,
    /// One row per design and configuration.
    pub rows: Vec<ExperimentRow>,
}

/// The nearest-rank percentile `p` (0–100) of `values` in milliseconds (from
/// microseconds), rounded to 0.1 ms; zero when empty.
pub fn percentile_ms(values: &[u64], p: u32) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    // nearest rank: ceil(p/100 * n), at least 1
    let rank = (usize::try_from(p).unwrap_or(100) * v.len()).div_ceil(100).max(1);
    let us = v[rank.min(v.len()) - 1];
    // microseconds below 2^52 convert exactly
    #[allow(clippy::cast_precision_loss)]
    let ms = us as f64 / 1000.0;
    (ms * 10.0).round() / 10.0
}

/// The legend of the figure columns, in column order.
pub const LEGEND: [(&str, &str); 12] = [
    (
        "utility",
        "benign runs (every run in compare) that ended done, called every tool the task needs and whose answer passed the task's `expect` (n/of and rate)",
    ),
    ("under attack", "the same over the attacked runs (one per task and payload)"),
    ("attack success", "attacked runs whose payload's effect executed (lower is better)"),
    ("attempted", "attacked runs whose effect was proposed or carried on and then refused or held by code"),
    ("covered", "benign runs (every run in compare) that called every tool the task needs, whatever the answer said"),
    ("calls", "model calls over all runs of the row (a fake's are counted and priced as a model's would be)"),
    ("tok in", "input tokens over those calls"),
    ("tok out", "output tokens over those calls"),
    ("credits", "credits over those calls at the run's prices"),
    ("wall p50", "median wall time of one run (measured: differs between runs and machines)"),
    ("wall p95", "95th percentile wall time of one run"),
    (
        "hops e/p/r/x",
        "attacked runs by the furthest hop their payload reached: exposed (read) / persisted (in memory) / relayed (in an accepted message or a done answer) / executed (an effect)",
    ),
];

fn count_cell(c: Option<&Count>, interval: bool) -> String {
    match c {
        None => "-".into(),
        Some(c) if interval => c.with_interval(),
        Some(c) => c.to_string(),
    }
}

impl ExperimentRow {
    /// The figure cells, in [`LEGEND`] order.
    fn figure_cells(&self) -> Vec<String> {
        let ci = self.intervals.is_some();
        vec![
            count_cell(Some(&self.utility), ci),
            count_cell(self.utility_under_attack.as_ref(), ci),
            count_cell(self.attack_success.as_ref(), ci),
            count_cell(self.attempted.as_ref(), ci),
            count_cell(Some(&self.covered), false),
            self.model_calls.to_string(),
            self.tokens_in.to_string(),
            self.tokens_out.to_string(),
            self.credits.to_string(),
            format!("{:.1}ms", self.wall_ms_p50),
            format!("{:.1}ms", self.wall_ms_p95),
            self.hops.map_or_else(|| "-".to_string(), |h| h.cell()),
        ]
    }

    /// The refusals as `code=n` pairs, by code.
    pub fn refusal_text(&self) -> String {
        self.refusals.iter().map(|(c, n)| format!("{c}={n}")).collect::<Vec<_>>().join(" ")
    }
}

impl ExperimentTable {
    /// True when the rows carry 95% intervals.
    fn intervals(&self) -> bool {
        self.rows.iter().any(|r| r.intervals.is_some())
    }

    /// True when some row counts refusals (the matrix): the table ends with them.
    fn has_refusals(&self) -> bool {
        self.rows.iter().any(|r| !r.refusals.is_empty())
    }

    /// The header row, then one aligned row per design and configuration, then a blank
    /// line and the legend (a line per column and abbreviation).
    pub fn table_lines(&self) -> Vec<String> {
        let ci = self.intervals();
        let mut header: Vec<String> = self.lead.iter().map(|l| l.name.to_string()).collect();
        for (i, (name, _)) in LEGEND.iter().enumerate() {
            header.push(if ci && i < 4 { format!("{name} (95% CI)") } else { (*name).to_string() });
        }
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                let mut cells = r.cells.clone();
                cells.resize(self.lead.len(), "-".into());
                cells.extend(r.figure_cells());
                cells
            })
            .collect();
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for (w, l) in widths.iter_mut().zip(&self.lead) {
            *w = (*w).max(l.width);
        }
        for r in &rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let refusals = self.has_refusals();
        let line = |cells: &[String], tail: &str| {
            let mut s = String::new();
            for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
                if i > 0 {
                    s.push(' ');
                }
                // numbers right-aligned, words left-aligned
                let numeric = i >= self.lead.len() + 5;
                if numeric { s.push_str(&format!("{c:>w$}")) } else { s.push_str(&format!("{c:<w$}")) }
            }
            if !tail.is_empty() {
                s.push_str("  ");
                s.push_str(tail);
            }
            s.trim_end().to_string()
        };
        let mut out = vec![line(&header, if refusals { "refusals" } else { "" })];
        for (r, cells) in self.rows.iter().zip(&rows) {
            let mut tail = r.refusal_text();
            if !r.flag.is_empty() {
                tail = format!("{tail}  {}", r.flag).trim_start().to_string();
            }
            out.push(line(cells, &tail));
        }
        out.push(String::new());
        out.push("legend:".into());
        let width =
            self.lead.iter().map(|l| l.name.len()).chain(LEGEND.iter().map(|(n, _)| n.len())).max().unwrap_or(0);
        for l in &self.lead {
            out.push(format!("  {:<width$}  {}", l.name, l.meaning));
        }
        for (name, meaning) in LEGEND {
            out.push(format!("  {name:<width$}  {meaning}"));
        }
        if ci {
            out.push(format!("  {:<width$}  n/of (rate; low-high%): the 95% Wilson interval of each rate", "(95% CI)"));
        }
        out.push(format!("  {:<width$}  not measured by this run (or no such control in this design)", "-"));
        if refusals {
            out.push(format!(
                "  {:<width$}  code=n: every model, check, tool or message line of the runs whose code was not ok",
                "refusals"
            ));
        }
        out
    }

    /// The table as RFC 4180 CSV: a header row, then one record per row; rates as three
    /// columns each (`_n`, `_of`, `_rate`), the 95% interval as two more when measured.
    ///
    /// # Errors
    /// Only if the CSV writer failed on memory (it writes to a `Vec`).
    pub fn csv(&self) -> Result<String, csv::Error> {
        let ci = self.intervals();
        let rates = ["utility", "utility_under_attack", "attack_success", "attempted", "covered"];
        let mut header: Vec<String> = vec!["design".into(), "configuration".into()];
        header.extend(self.lead.iter().skip(1).map(|l| l.name.replace(' ', "_")));
        header.push("runs".into());
        for r in rates {
            header.extend([format!("{r}_n"), format!("{r}_of"), format!("{r}_rate")]);
            if ci && r != "covered" {
                header.extend([format!("{r}_ci95_low"), format!("{r}_ci95_high")]);
            }
        }
        for h in [
            "model_calls",
            "tokens_in",
            "tokens_out",
            "credits",
            "wall_ms_p50",
            "wall_ms_p95",
            "hops_exposed",
            "hops_persisted",
            "hops_relayed",
            "hops_executed",
            "refusals",
        ] {
            header.push(h.into());
        }
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&header)?;
        for row in &self.rows {
            let mut rec: Vec<String> = vec![row.design.clone(), row.configuration.clone()];
            let mut cells = row.cells.clone();
            cells.resize(self.lead.len(), "-".into());
            rec.extend(cells.into_iter().skip(1));
            rec.push(row.runs.to_string());
            let intervals = row.intervals.as_ref();
            let counts = [
                (Some(&row.utility), intervals.and_then(|i| i.utility)),
                (row.utility_under_attack.as_ref(), intervals.and_then(|i| i.utility_under_attack)),
                (row.attack_success.as_ref(), intervals.and_then(|i| i.attack_success)),
                (row.attempted.as_ref(), intervals.and_then(|i| i.attempted)),
                (Some(&row.covered), None),
            ];
            for (i, (c, interval)) in counts.into_iter().enumerate() {
                match c {
                    Some(c) => rec.extend([c.n.to_string(), c.of.to_string(), format!("{:.4}", c.rate())]),
                    None => rec.extend([String::new(), String::new(), String::new()]),
                }
                if ci && i < 4 {
                    match interval {
                        Some(iv) => rec.extend([format!("{:.4}", iv.low), format!("{:.4}", iv.high)]),
                        None => rec.extend([String::new(), String::new()]),
                    }
                }
            }
            rec.extend([
                row.model_calls.to_string(),
                row.tokens_in.to_string(),
                row.tokens_out.to_string(),
                row.credits.to_string(),
                format!("{:.1}", row.wall_ms_p50),
                format!("{:.1}", row.wall_ms_p95),
            ]);
            match row.hops {
                Some(h) => rec.extend([h.exposed, h.persisted, h.relayed, h.executed].map(|n| n.to_string())),
                None => rec.extend([String::new(), String::new(), String::new(), String::new()]),
            }
            rec.push(row.refusal_text());
            w.write_record(&rec)?;
        }
        let bytes = w.into_inner().map_err(|e| csv::Error::from(e.into_error()))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// The matrix's leading columns, at the widths its table always had.
pub const MATRIX_LEAD: [Lead; 6] = [
    Lead { name: "design", width: 6, meaning: "single (one agent) or multi (planner, researcher, reviewer)" },
    Lead { name: "filter", width: 6, meaning: "multi: the coordinator's instruction filter on or off" },
    Lead { name: "claims", width: 6, meaning: "multi: strict (claims rebuilt from observations) or free text" },
    Lead {
        name: "scopes",
        width: 7,
        meaning: "narrow (the task's or role's tools) or wide (every tool, writes granted)",
    },
    Lead { name: "check", width: 5, meaning: "single: the loop's own check of each proposal" },
    Lead { name: "approval", width: 9, meaning: "granted writes wait for a person" },
];

/// The column after [`MATRIX_LEAD`] when a configuration has the information-flow defense
/// on.
pub(super) const MATRIX_IFC: Lead =
    Lead { name: "ifc", width: 3, meaning: "information-flow labels checked at the gate and the routes, on or off" };

/// The leading columns of `compare`'s table.
pub const COMPARE_LEAD: [Lead; 2] = [
    Lead { name: "design", width: 9, meaning: "fixed (routing rules), plan, react (the loop) or multi (three roles)" },
    Lead { name: "model", width: 5, meaning: "the model-driven designs' model: their fakes, or openai:NAME" },
];

/// The text after a configuration that must hold and did not.
pub const BROKEN: &str = "BROKEN: an effect executed although a control that stops all was on";

impl ExperimentRow {
    /// The row of one matrix configuration.
    pub fn of_figures(f: &Figures, runs: usize) -> Self {
        Self {
            design: f.config.design().to_string(),
            configuration: f.label.clone(),
            cells: f.config.cells().iter().map(|c| (*c).to_string()).collect(),
            runs,
            utility: f.utility,
            utility_under_attack: Some(f.utility_under_attack),
            attack_success: Some(f.attack_success),
            attempted: Some(f.attempted),
            covered: f.covered,
            model_calls: f.model_calls,
            tokens_in: f.tokens_in,
            tokens_out: f.tokens_out,
            credits: f.credits,
            wall_ms_p50: f.wall_ms_p50,
            wall_ms_p95: f.wall_ms_p95,
            hops: (f.attack_success.of > 0).then_some(f.hops),
            intervals: f.intervals.clone(),
            refusals: f.refusals.clone(),
            flag: if f.holds { String::new() } else { BROKEN.to_string() },
        }
    }
}

impl ExperimentTable {
    /// The matrix's table: one row per configuration, in the spec's order.
    pub fn of_matrix(m: &Matrix) -> Self {
        let rows = m
            .figures
            .iter()
            .enumerate()
            .map(|(i, f)| ExperimentRow::of_figures(f, m.runs.iter().filter(|r| r.config == i).count()))
            .collect();
        let mut lead = MATRIX_LEAD.to_vec();
        let mut rows: Vec<ExperimentRow> = rows;
        // the information-flow defense's column, when a configuration has it on
        if m.figures.iter().any(|f| f.config.ifc() == crate::eval::rows::Switch::On) {
            lead.push(MATRIX_IFC);
            for (r, f) in rows.iter_mut().zip(&m.figures) {
                r.cells.push(f.config.ifc_cell().to_string());
            }
        }
        Self { lead, rows }
    }

    /// `compare`'s table: one row per design over its tasks (`model` names who decided);
    /// no attack runs there, so the attack columns are not measured.
    pub fn of_designs(rows: &[DesignRow], model: &str) -> Self {
        let mut designs: Vec<crate::design::Design> = Vec::new();
        for r in rows {
            if !designs.contains(&r.design) {
                designs.push(r.design);
            }
        }
        let rows = designs
            .into_iter()
            .map(|d| {
                let mine: Vec<&DesignRow> = rows.iter().filter(|r| r.design == d).collect();
                let of = mine.len();
                let walls: Vec<u64> = mine.iter().map(|r| r.wall_us).collect();
                ExperimentRow {
                    design: d.to_string(),
                    configuration: model.to_string(),
                    cells: vec![d.to_string(), model.to_string()],
                    runs: of,
                    utility: Count { n: mine.iter().filter(|r| r.useful()).count(), of },
                    utility_under_attack: None,
                    attack_success: None,
                    attempted: None,
                    covered: Count { n: mine.iter().filter(|r| r.covered).count(), of },
                    model_calls: mine.iter().map(|r| r.model_calls).sum(),
                    tokens_in: mine.iter().map(|r| r.input_tokens).sum(),
                    tokens_out: mine.iter().map(|r| r.output_tokens).sum(),
                    credits: mine.iter().fold(Decimal::ZERO, |s, r| s.saturating_add(r.credits)),
                    wall_ms_p50: percentile_ms(&walls, 50),
                    wall_ms_p95: percentile_ms(&walls, 95),
                    hops: None,
                    intervals: None,
                    refusals: BTreeMap::new(),
                    flag: String::new(),
                }
            })
            .collect();
        Self { lead: COMPARE_LEAD.to_vec(), rows }
    }
}

/// One matrix cell as the JSON and JSON Lines outputs show it: the configuration's name
/// and design, then the cell (task, payload id and style, verdict, where it was stopped
/// and by which code, done, covered, answer correct, model calls, tokens, credits, wall
/// time).
#[derive(Clone, Debug, Serialize)]
pub struct CellView<'a> {
    /// `cell`.
    pub kind: &'static str,
    /// The configuration's one-line name.
    pub configuration: &'a str,
    /// `single` or `multi`.
    pub design: &'static str,
    /// The cell as run (its `attack` is the payload id).
    #[serde(flatten)]
    pub run: &'a VariantRun,
}

/// One configuration's figures as a JSON Lines line shows them (`kind`: `configuration`).
#[derive(Clone, Debug, Serialize)]
pub struct ConfigView<'a> {
    /// `configuration`.
    pub kind: &'static str,
    /// The figures.
    #[serde(flatten)]
    pub figures: &'a Figures,
}

/// The whole matrix as one JSON document: sizes, the experiment table's rows, every
/// configuration's figures and every cell.
#[derive(Clone, Debug, Serialize)]
pub struct MatrixDocument<'a> {
    /// Benign tasks per configuration.
    pub tasks: usize,
    /// Payloads planted into each task.
    pub attacks: usize,
    /// Runs in all.
    pub runs: usize,
    /// Every configuration that must hold did.
    pub holds: bool,
    /// The experiment table's rows.
    pub table: Vec<ExperimentRow>,
    /// Every cell (task × payload × configuration × repetition), in the experiment's order.
    pub cells: Vec<CellView<'a>>,
}

impl Matrix {
    /// Every cell with its configuration's name, in the experiment's order.
    pub fn cell_views(&self) -> Vec<CellView<'_>> {
        self.runs
            .iter()
            .map(|r| {
                let (configuration, design) =
                    self.figures.get(r.config).map_or(("?", "?"), |f| (f.label.as_str(), f.config.design()));
                CellView { kind: "cell", configuration, design, run: r }
            })
            .collect()
    }

    /// The whole matrix as one JSON document ([`MatrixDocument`]).
    pub fn document(&self) -> MatrixDocument<'_> {
        MatrixDocument {
            tasks: self.tasks,
            attacks: self.attacks,
            runs: self.runs.len(),
            holds: self.holds(),
            table: ExperimentTable::of_matrix(self).rows,
            cells: self.cell_views(),
        }
    }

    /// The JSON Lines output: one line per configuration (`kind: configuration`), then one
    /// per cell (`kind: cell`).
    pub fn json_lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .figures
            .iter()
            .map(|f| serde_json::to_string(&ConfigView { kind: "configuration", figures: f }).unwrap_or_default())
            .collect();
        out.extend(self.cell_views().iter().map(|c| serde_json::to_string(c).unwrap_or_default()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let v: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(percentile_ms(&v, 50), 50.0);
        assert_eq!(percentile_ms(&v, 95), 95.0);
        assert_eq!(percentile_ms(&[1500], 95), 1.5);
        assert_eq!(percentile_ms(&[], 50), 0.0);
    }
}
