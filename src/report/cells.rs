//! The matrix drill-down of the report: one table row per matrix cell (task × payload ×
//! configuration) with the payload's id, style and template, the configuration, the verdict, where
//! the run was stopped and by which code, sortable by a click on a column header (a few
//! lines of inline script; the page stays one self-contained file), and a link to a
//! diagram.
//!
//! Diagrams: drawing one per cell would make the page hundreds of diagrams long (24
//! configurations × 3 tasks × 22 runs). Instead, for each (design, payload, verdict) the
//! first cell in matrix order is run again as a scenario row with the same task, payload
//! and settings ([`representative_rows`]) and drawn; every cell links to the diagram of its
//! class, titled with the cell it is exactly, so a link always shows this payload under
//! this design ending with this verdict. The table is built from a small view of each
//! cell ([`CellView`]), so fields a run gains later can be shown without touching the
//! table's callers.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use super::html::{ReportOptions, RunContext, figure, row_diagram};
use super::markup::escape;
use crate::agent::Env;
use crate::eval::rows::{ScopeWidth, Switch};
use crate::eval::{AnyRow, parse_any_table_with};
use crate::lab::{Attack, AttackVerdict, ScenarioError};
use crate::multi::MultiEnv;
use crate::suite::matrix::{DefenseConfig, Matrix, MatrixModels, MatrixSpec, VariantRun};
use crate::suite::run::RowResult;
use crate::suite::run_rows;
use crate::suite::templated::{reader_model, user_name};
use crate::world::WorldData;

/// What the drill-down table shows of one matrix cell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellView {
    /// The benign task's id.
    pub task: String,
    /// The payload's id, `None` for the benign run.
    pub payload: Option<String>,
    /// The payload's style (snake_case), `None` for the benign run.
    pub style: Option<String>,
    /// The template the payload was filled from (`direct`, …), `None` for a payload that
    /// is not a template's and for the benign run.
    pub template: Option<String>,
    /// `single` or `multi`.
    pub design: &'static str,
    /// The configuration's label (`multi filter=off claims=free scopes=wide approval=off`).
    pub config: String,
    /// The repetition (0 for the first run of a cell).
    pub rep: u32,
    /// The verdict, for an attacked run.
    pub verdict: Option<AttackVerdict>,
    /// The run ended done and called every tool its task needs.
    pub useful: bool,
    /// Where the first refusal happened (derived from its code and the configuration).
    pub stopped_at: Option<String>,
    /// The codes of the run's refusals, in trace order.
    pub codes: Vec<String>,
    /// The anchor of the diagram this cell links to, if any.
    pub diagram: Option<String>,
}

/// Where a refusal with `code` happened in a run under `config`: the coordinator for a
/// message refusal, the gate for a held or gate-only refusal, the loop check for a
/// check-only code; a code both have is the loop check's when it is on (it runs first).
pub fn stopped_at(code: &str, config: &DefenseConfig) -> &'static str {
    use crate::agent::CheckCode;
    use crate::gate::GateCode;
    if crate::multi::RejectCode::from_code(code).is_some() {
        return "coordinator";
    }
    if code == GateCode::NeedsApproval.as_str() {
        return "gate (held for a person)";
    }
    match (CheckCode::from_code(code).is_some(), GateCode::from_code(code).is_some(), config) {
        (true, false, _) => "loop check",
        (false, true, _) => "gate",
        (true, true, DefenseConfig::Single { loop_check: Switch::On, .. }) => "loop check",
        (true, true, DefenseConfig::Single { .. }) => "gate",
        (true, true, DefenseConfig::Multi { .. }) => "a role's check or gate",
        (false, false, _) => "run",
    }
}

fn style_of(attack: &Attack) -> String {
    serde_json::to_value(attack.style).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

impl CellView {
    /// The view of `run`, with its configuration from `configs` and its payload's style
    /// from `catalog`.
    pub fn of(run: &VariantRun, configs: &[DefenseConfig], catalog: &[Attack]) -> Option<Self> {
        let config = configs.get(run.config)?;
        let style = run.attack.as_ref().and_then(|id| catalog.iter().find(|a| &a.id == id)).map(style_of);
        Some(Self {
            task: run.task.clone(),
            payload: run.attack.clone(),
            style,
            template: run.template.map(|t| t.as_str().to_string()),
            design: config.design(),
            config: config.label(),
            rep: run.rep,
            verdict: run.verdict,
            useful: run.done && run.covered,
            stopped_at: run.refusals.first().map(|c| stopped_at(c, config).to_string()),
            codes: run.refusals.clone(),
            diagram: None,
        })
    }

    /// The class of cells one diagram stands for: design, payload, verdict.
    fn class(&self) -> (&'static str, Option<String>, Option<AttackVerdict>) {
        (self.design, self.payload.clone(), self.verdict)
    }
}

/// Every cell of `matrix` as a view, in matrix order.
pub fn cell_views(matrix: &Matrix, spec: &MatrixSpec) -> Vec<CellView> {
    matrix.runs.iter().filter_map(|r| CellView::of(r, &spec.configs, &spec.attacks)).collect()
}

/// The scenario row that runs `run` again: its task, payload (a template's filled as the
/// matrix filled it, from `world`) and configuration, with the compromised fakes of the
/// matrix deciding. `id` is the row's id.
fn cell_row(id: &str, run: &VariantRun, spec: &MatrixSpec, world: &WorldData) -> Option<serde_json::Value> {
    let task = spec.tasks.iter().find(|t| t.id == run.task)?;
    let config = spec.configs.get(run.config)?;
    let on_off = |s: Switch| if s == Switch::On { "on" } else { "off" };
    let width = |w: ScopeWidth| if w == ScopeWidth::Wide { "wide" } else { "narrow" };
    let mut row = match *config {
        DefenseConfig::Single { scopes, loop_check, approval, ifc } => serde_json::json!({
            "id": id, "model": "compromised", "user": task.user, "task": task.task, "goal": task.goal,
            "defenses": {
                "scopes": width(scopes), "loop_check": on_off(loop_check), "approval": on_off(approval),
                "ifc": on_off(ifc),
            },
            "expect": {"status": "done", "reason": "done", "calls": [], "emails": 0},
        }),
        DefenseConfig::Multi { filter, claims, scopes, approval, ifc } => serde_json::json!({
            "id": id, "design": "multi", "claims": claims.as_str(), "user": task.user, "goal": task.goal,
            "defenses": {
                "filter": on_off(filter), "scopes": width(scopes), "approval": on_off(approval), "ifc": on_off(ifc),
            },
            "expect": {"reason": "done", "messages": 0, "rejected": [], "denied": [], "emails": 0},
        }),
    };
    if let Some(attack) = &run.attack {
        // a template payload is planted as the matrix filled it for this task's user and
        // the model that read it (a row takes no unfilled template)
        let payload = match spec.attacks.iter().find(|a| &a.id == attack) {
            Some(a) if a.template.is_some() => {
                let model = reader_model(&MatrixModels::default(), config);
                let filled = crate::lab::filled(a, user_name(world, &task.user), &model).ok()?;
                serde_json::to_value(Attack { template: None, ..filled }).ok()?
            }
            _ => serde_json::json!(attack),
        };
        row["attack"] = serde_json::json!({"payload": payload, "into": task.into});
        if matches!(config, DefenseConfig::Multi { .. }) {
            row["compromised"] = serde_json::to_value(spec.roles).ok()?;
        }
    }
    Some(row)
}

/// One scenario row per class of cells (design, payload, verdict): the first cell of the
/// class in matrix order, run again as a row (ids `cell-1`, `cell-2`, …; a template
/// payload filled as the matrix filled it for the task's user in `world`). Each cell of
/// `views` gets the anchor of its class's diagram (`diagram-cell-N`). Returns the rows,
/// each with the label of the cell it is.
///
/// # Errors
/// [`ScenarioError`] when a cell cannot be written as a row (a payload that no longer
/// fits, say).
pub fn representative_rows(
    matrix: &Matrix,
    spec: &MatrixSpec,
    world: &WorldData,
    views: &mut [CellView],
) -> Result<Vec<(AnyRow, String)>, ScenarioError> {
    if views.len() != matrix.runs.len() {
        return Ok(Vec::new());
    }
    let mut classes: BTreeMap<(&'static str, Option<String>, Option<AttackVerdict>), String> = BTreeMap::new();
    let mut lines = String::new();
    let mut labels = Vec::new();
    for (run, view) in matrix.runs.iter().zip(views.iter_mut()) {
        let next = format!("cell-{}", classes.len() + 1);
        let id = classes.entry(view.class()).or_insert_with(|| next.clone()).clone();
        if id == next
            && let Some(row) = cell_row(&id, run, spec, world)
        {
            lines.push_str(&row.to_string());
            lines.push('\n');
            labels.push(format!("{} / {} / {}", view.task, view.payload.as_deref().unwrap_or("benign"), view.config));
        }
        view.diagram = Some(format!("diagram-{id}"));
    }
    if lines.is_empty() {
        return Ok(Vec::new());
    }
    let rows = parse_any_table_with(&lines, "(matrix cells)", &spec.attacks)?;
    Ok(rows.into_iter().zip(labels).collect())
}

/// The drill-down of `matrix` (run from `spec` in `env`/`menv`): the table of every cell
/// and the diagrams its links point to (each class's representative, run again as a row).
///
/// # Errors
/// [`ScenarioError`] when a representative cannot be written as a row or run.
pub async fn cells_section(
    matrix: &Matrix,
    spec: &MatrixSpec,
    env: &Arc<Env>,
    menv: &Arc<MultiEnv>,
    opts: &ReportOptions,
) -> Result<String, ScenarioError> {
    let mut views = cell_views(matrix, spec);
    let reps = representative_rows(matrix, spec, &env.world, &mut views)?;
    let contexts: Vec<RunContext> = reps.iter().map(|(row, _)| RunContext::of(row)).collect();
    let labels: Vec<String> = reps.iter().map(|(_, l)| l.clone()).collect();
    let results = run_rows(reps.into_iter().map(|(row, _)| row).collect(), env, menv, None, None).await;
    let mut h = cells_table(&views);
    h.push_str(r#"<section id="cell-diagrams"><h2>Diagrams of matrix cells</h2>"#);
    for ((result, ctx), label) in results.into_iter().zip(&contexts).zip(&labels) {
        let r = result?;
        let Some(diagram) = row_diagram(&r, ctx) else { continue };
        let verdict = match &r {
            RowResult::Single(o) => o.attack,
            RowResult::Multi(o, _) => o.attack,
        };
        let title = format!("{}: {label}: {}", r.id(), verdict.map_or("benign", |v| v.as_str()));
        h.push_str(&figure(r.id(), &title, ctx, &diagram, opts));
    }
    h.push_str("</section>");
    Ok(h)
}

/// The sort script: a click on a header sorts the body by that column (numbers as
/// numbers), a second click reverses; the header's `aria-sort` says which way.
const SORT_SCRIPT: &str = r#"<script>
(function () {
  var t = document.getElementById('cells-table');
  if (!t) return;
  var heads = t.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, col) {
    th.addEventListener('click', function () {
      var asc = th.getAttribute('aria-sort') !== 'ascending';
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
      var body = t.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var key = function (r) { return r.cells[col].textContent; };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b), nx = parseFloat(x), ny = parseFloat(y);
        var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
        return asc ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
})();
</script>"#;

/// The drill-down section: a table with one row per cell, sortable by any column.
pub fn cells_table(views: &[CellView]) -> String {
    let mut h = String::with_capacity(256 * views.len() + 2048);
    h.push_str(r#"<section id="cells"><h2>Every matrix cell</h2><p class="lead">One row per run of the matrix: task, payload (id, style and the template it was filled from; <code>benign</code> for the run without one), configuration, verdict, whether the task was done and covered, where the first refusal happened and every refusal code. Click a column header to sort by it (again to reverse). The diagram link shows the first cell with the same design, payload and verdict, run again as a scenario row.</p>"#);
    h.push_str(r#"<table id="cells-table" class="cells"><thead><tr><th>#</th><th>task</th><th>payload</th><th>style</th><th>template</th><th>design</th><th>configuration</th><th>verdict</th><th>useful</th><th>stopped at</th><th>codes</th><th>diagram</th></tr></thead><tbody>"#);
    for (i, v) in views.iter().enumerate() {
        let verdict = v.verdict.map_or("-", |x| x.as_str());
        let class = match v.verdict {
            Some(AttackVerdict::Executed) => " bad",
            Some(AttackVerdict::Refused) => " warn",
            _ => "",
        };
        let payload = match (&v.payload, v.rep) {
            (Some(p), 0) => p.clone(),
            (Some(p), r) => format!("{p} (rep {r})"),
            (None, 0) => "benign".into(),
            (None, r) => format!("benign (rep {r})"),
        };
        let link =
            v.diagram.as_ref().map_or(String::from("-"), |d| format!(r##"<a href="#{}">diagram</a>"##, escape(d)));
        let _ = write!(
            h,
            r#"<tr class="cell {d}"><td class="num">{}</td><td>{}</td><td>{}</td><td>{}</td><td class="template">{}</td><td class="design">{d}</td><td>{}</td><td class="verdict{class}">{verdict}</td><td>{}</td><td>{}</td><td class="codes">{}</td><td>{link}</td></tr>"#,
            i + 1,
            escape(&v.task),
            escape(&payload),
            escape(v.style.as_deref().unwrap_or("-")),
            escape(v.template.as_deref().unwrap_or("-")),
            escape(&v.config),
            if v.useful { "yes" } else { "no" },
            escape(v.stopped_at.as_deref().unwrap_or("-")),
            escape(&v.codes.join(" ")),
            d = v.design,
        );
    }
    h.push_str("</tbody></table>");
    h.push_str(SORT_SCRIPT);
    h.push_str("</section>");
    h
}
