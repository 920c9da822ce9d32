//! The HTML report: one self-contained page (inline CSS and SVG, no script, no font, no
//! image, no link to anywhere) with the defense matrix, every row's outcome and, for each
//! multi-agent row, a sequence diagram of its run.
//!
//! A diagram has a lifeline per role and one for the coordinator. An accepted envelope is
//! a solid arrow from its sender to its recipient (`m1 brief`); a refused message is a
//! dashed red arrow from its sender to the coordinator ending in a cross, with the
//! rejection code; each tool call a role made is a note on its lifeline (refusals in red,
//! a write held for a person in amber, a write that ran in bold red); the run's end is a
//! note on the coordinator's lifeline. Every text from a row, a model or a payload is
//! escaped before it is written.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write;

use super::markup::escape;
use crate::agent::{Trace, TraceKind, TraceLine};
use crate::multi::{MultiRun, Role};
use crate::suite::matrix::{Figures, Matrix};
use crate::suite::run::RowResult;

const LANES: [Role; 4] = [Role::Planner, Role::Researcher, Role::Reviewer, Role::Coordinator];
const LANE_X: [u32; 4] = [110, 300, 490, 680];
const WIDTH: u32 = 800;
const TOP: u32 = 78;
const STEP: u32 = 30;

fn lane(role: Role) -> u32 {
    LANES.iter().position(|r| *r == role).map_or(LANE_X[3], |i| LANE_X[i])
}

/// One row of a diagram.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Event {
    /// An accepted envelope.
    Envelope { from: Role, to: Role, label: String },
    /// A refused message.
    Rejected { from: Role, code: String },
    /// A tool call on a role's lifeline.
    Tool { role: Role, text: String, class: &'static str },
    /// A note on the coordinator's lifeline.
    Note { text: String, class: &'static str },
}

/// The tool events of some trace lines: every tool line, and every check line that
/// refused a call.
fn tool_events(role: Role, lines: &[TraceLine]) -> Vec<Event> {
    lines
        .iter()
        .filter_map(|l| {
            let code = l.code.as_ref();
            let (tool, class) = match l.kind {
                TraceKind::Check if code != "ok" => (l.detail.strip_prefix("call ")?, "refused"),
                TraceKind::Tool if code == "ok" && l.detail == "send_email_draft" => (l.detail.as_str(), "effect"),
                TraceKind::Tool if code == "ok" => (l.detail.as_str(), "tool"),
                TraceKind::Tool if code == "needs_approval" => (l.detail.as_str(), "held"),
                TraceKind::Tool => (l.detail.as_str(), "refused"),
                _ => return None,
            };
            let text = if class == "effect" { format!("{tool}: SENT") } else { format!("{tool}: {code}") };
            Some(Event::Tool { role, text, class })
        })
        .collect()
}

/// The researcher's trace split per assignment (each loop run ends with a stop line).
fn per_assignment(trace: Option<&Trace>) -> VecDeque<Vec<Event>> {
    let mut out = VecDeque::new();
    let mut current = Vec::new();
    for l in trace.map(|t| t.lines.as_slice()).unwrap_or_default() {
        if l.kind == TraceKind::Stop {
            out.push_back(tool_events(Role::Researcher, &std::mem::take(&mut current)));
        } else {
            current.push(l.clone());
        }
    }
    if !current.is_empty() {
        out.push_back(tool_events(Role::Researcher, &current));
    }
    out
}

/// A planner's or reviewer's trace split per round (their lines carry the round as step).
fn per_round(role: Role, trace: Option<&Trace>) -> BTreeMap<u32, Vec<Event>> {
    let mut by_round: BTreeMap<u32, Vec<TraceLine>> = BTreeMap::new();
    for l in trace.map(|t| t.lines.as_slice()).unwrap_or_default() {
        by_round.entry(l.step).or_default().push(l.clone());
    }
    by_round.into_iter().map(|(r, lines)| (r, tool_events(role, &lines))).collect()
}

/// Tool events not yet drawn, per role.
struct Pending {
    research: VecDeque<Vec<Event>>,
    planner: BTreeMap<u32, Vec<Event>>,
    reviewer: BTreeMap<u32, Vec<Event>>,
}

impl Pending {
    /// The tool events of `role`'s work that led to its message in `round`.
    fn take(&mut self, role: Role, round: u32) -> Vec<Event> {
        match role {
            Role::Researcher => self.research.pop_front().unwrap_or_default(),
            Role::Planner => self.planner.remove(&round).unwrap_or_default(),
            Role::Reviewer => self.reviewer.remove(&round).unwrap_or_default(),
            Role::Coordinator => Vec::new(),
        }
    }

    /// Everything left: work that led to no message (a stop, a budget).
    fn rest(&mut self) -> Vec<Event> {
        let mut out: Vec<Event> = std::mem::take(&mut self.planner).into_values().flatten().collect();
        out.extend(std::mem::take(&mut self.research).into_iter().flatten());
        out.extend(std::mem::take(&mut self.reviewer).into_values().flatten());
        out
    }
}

/// The events of a run, in the coordinator's order; each role's tool calls come just
/// before the message they led to.
fn events(run: &MultiRun) -> Vec<Event> {
    let mut pending = Pending {
        research: per_assignment(run.traces.get(2)),
        planner: per_round(Role::Planner, run.traces.get(1)),
        reviewer: per_round(Role::Reviewer, run.traces.get(3)),
    };
    let (mut accepted, mut refused) = (run.messages.iter(), run.rejected.iter());
    let mut out = Vec::new();
    let lines = run.traces.first().map(|t| t.lines.as_slice()).unwrap_or_default();
    for (i, l) in lines.iter().enumerate() {
        match l.kind {
            TraceKind::Message if l.code == "ok" => {
                if let Some(env) = accepted.next() {
                    out.extend(pending.take(env.sender, l.step));
                    let label = format!("{} {}", env.id, env.kind);
                    out.push(Event::Envelope { from: env.sender, to: env.recipient, label });
                }
            }
            TraceKind::Message => {
                if let Some(r) = refused.next() {
                    out.extend(pending.take(r.sender, l.step));
                    out.push(Event::Rejected { from: r.sender, code: r.code.as_str().to_string() });
                }
            }
            TraceKind::Stop if i + 1 == lines.len() => {
                out.extend(pending.rest());
                let class = if run.reason == crate::multi::MultiReason::Done { "done" } else { "stop" };
                out.push(Event::Note { text: format!("end: {}", l.code), class });
            }
            TraceKind::Stop => {
                out.push(Event::Note { text: format!("{} {}", l.code, l.detail).trim().to_string(), class: "stop" });
            }
            _ => {}
        }
    }
    out
}

fn arrow_head(svg: &mut String, x: u32, y: u32, left: bool, class: &str) {
    let (a, b) = if left { (x + 9, x) } else { (x.saturating_sub(9), x) };
    let _ = write!(svg, r#"<polygon class="{class}" points="{a},{} {b},{y} {a},{}"/>"#, y - 4, y + 4);
}

/// The sequence diagram of `run` as one `<svg>` element (no namespace declaration: it is
/// meant to sit inside an HTML page, where none is needed).
pub fn sequence_svg(title: &str, run: &MultiRun) -> String {
    let events = events(run);
    let count = u32::try_from(events.len()).unwrap_or(u32::MAX / STEP - 10);
    let height = TOP + count * STEP + 30;
    let mut svg = String::with_capacity(2048 + events.len() * 256);
    let _ = write!(
        svg,
        r#"<svg class="seq" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{}">"#,
        escape(title)
    );
    let _ = write!(svg, "<title>{}</title>", escape(title));
    for (role, x) in LANES.iter().zip(LANE_X) {
        let _ = write!(
            svg,
            r#"<rect class="head" x="{}" y="10" width="140" height="30" rx="6"/><text class="headtext" x="{x}" y="30">{}</text>"#,
            x - 70,
            role.as_str()
        );
        let _ = write!(svg, r#"<line class="life" x1="{x}" y1="40" x2="{x}" y2="{}"/>"#, height - 10);
    }
    for (i, e) in events.iter().enumerate() {
        let y = TOP + u32::try_from(i).unwrap_or(0) * STEP;
        match e {
            Event::Envelope { from, to, label } => {
                let (x1, x2) = (lane(*from), lane(*to));
                let _ = write!(svg, r#"<line class="msg" x1="{x1}" y1="{y}" x2="{x2}" y2="{y}"/>"#);
                arrow_head(&mut svg, x2, y, x2 < x1, "msghead");
                let _ =
                    write!(svg, r#"<text class="label" x="{}" y="{}">{}</text>"#, (x1 + x2) / 2, y - 6, escape(label));
            }
            Event::Rejected { from, code } => {
                let (x1, x2) = (lane(*from), lane(Role::Coordinator));
                let _ = write!(svg, r#"<line class="rej" x1="{x1}" y1="{y}" x2="{x2}" y2="{y}"/>"#);
                let _ = write!(
                    svg,
                    r#"<path class="cross" d="M{a} {b} L{c} {d} M{a} {d} L{c} {b}"/>"#,
                    a = x2 - 6,
                    b = y - 6,
                    c = x2 + 6,
                    d = y + 6
                );
                let _ = write!(
                    svg,
                    r#"<text class="label rejlabel" x="{}" y="{}">rejected: {}</text>"#,
                    (x1 + x2) / 2,
                    y - 6,
                    escape(code)
                );
            }
            Event::Tool { role, text, class } => {
                let x = lane(*role);
                let _ = write!(svg, r#"<circle class="dot {class}" cx="{x}" cy="{y}" r="4"/>"#);
                let _ =
                    write!(svg, r#"<text class="note {class}" x="{}" y="{}">{}</text>"#, x + 9, y + 4, escape(text));
            }
            Event::Note { text, class } => {
                let x = lane(Role::Coordinator);
                let _ = write!(
                    svg,
                    r#"<rect class="endbox {class}" x="{}" y="{}" width="150" height="22" rx="5"/><text class="endtext" x="{x}" y="{}">{}</text>"#,
                    x - 75,
                    y - 12,
                    y + 3,
                    escape(text)
                );
            }
        }
    }
    svg.push_str("</svg>");
    svg
}

const STYLE: &str = r#"
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #1f2937; background: #fff; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 28px 0 8px; border-bottom: 1px solid #e5e7eb; padding-bottom: 4px; }
p.lead { color: #4b5563; margin: 4px 0 12px; max-width: 1100px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #d1d5db; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f3f4f6; } tr.multi td.design { color: #1d4ed8; } td.num { text-align: right; white-space: nowrap; }
td.bad { background: #fee2e2; color: #991b1b; font-weight: 600; } td.good { background: #dcfce7; color: #166534; }
td.warn { background: #fef3c7; } td.codes { font-family: ui-monospace, monospace; font-size: 12px; min-width: 300px; }
.ok { color: #166534; font-weight: 600; } .fail { color: #991b1b; font-weight: 600; }
figure { margin: 16px 0 24px; } figcaption { font-weight: 600; margin-bottom: 4px; }
svg.seq { border: 1px solid #e5e7eb; background: #fcfcfd; display: block; }
svg .head { fill: #eef2ff; stroke: #6366f1; } svg .headtext { font-size: 13px; font-weight: 600; text-anchor: middle; fill: #312e81; }
svg .life { stroke: #9ca3af; stroke-dasharray: 4 4; } svg .msg { stroke: #2563eb; stroke-width: 2; } svg .msghead { fill: #2563eb; }
svg .rej { stroke: #dc2626; stroke-width: 2; stroke-dasharray: 6 4; } svg .cross { stroke: #dc2626; stroke-width: 3; }
svg .label { font-size: 12px; text-anchor: middle; fill: #1e3a8a; } svg .rejlabel { fill: #b91c1c; font-weight: 600; }
svg .note { font-size: 11px; fill: #4b5563; } svg .dot { fill: #9ca3af; }
svg .note.refused { fill: #b91c1c; } svg .dot.refused { fill: #dc2626; } svg .note.held { fill: #b45309; } svg .dot.held { fill: #f59e0b; }
svg .note.effect { fill: #991b1b; font-weight: 700; } svg .dot.effect { fill: #991b1b; }
svg .endbox { fill: #f3f4f6; stroke: #6b7280; } svg .endbox.done { fill: #dcfce7; stroke: #16a34a; } svg .endbox.stop { fill: #fee2e2; stroke: #dc2626; }
svg .endtext { font-size: 12px; text-anchor: middle; fill: #111827; }
"#;

fn count_cell(svg: &mut String, c: &crate::suite::matrix::Count, class: &str) {
    let _ = write!(svg, r#"<td class="num {class}">{}/{} ({})</td>"#, c.n, c.of, c.percent());
}

fn matrix_table(h: &mut String, m: &Matrix) {
    h.push_str(r#"<table id="matrix-table" class="matrix"><thead><tr><th>design</th><th>filter</th><th>claims</th><th>scopes</th><th>loop check</th><th>approval</th><th>utility</th><th>utility under attack</th><th>attack success</th><th>attempted</th><th>must stop all</th><th>refusals by code</th></tr></thead><tbody>"#);
    for f in &m.figures {
        let Figures { utility, utility_under_attack, attack_success, attempted, .. } = f;
        let _ = write!(h, r#"<tr class="{}">"#, f.config.design());
        for (i, cell) in f.config.cells().iter().enumerate() {
            let class = if i == 0 { r#" class="design""# } else { "" };
            let _ = write!(h, "<td{class}>{}</td>", escape(cell));
        }
        count_cell(h, utility, "");
        count_cell(h, utility_under_attack, "");
        count_cell(h, attack_success, if attack_success.n > 0 { "bad" } else { "good" });
        count_cell(h, attempted, "");
        let hold = match (f.must_hold, f.holds) {
            (false, _) => r#"<td>no</td>"#,
            (true, true) => r#"<td class="good">yes: held</td>"#,
            (true, false) => r#"<td class="bad">yes: BROKEN</td>"#,
        };
        h.push_str(hold);
        let _ = write!(h, r#"<td class="codes">{}</td></tr>"#, escape(&f.refusal_text()));
    }
    h.push_str("</tbody></table>");
}

fn rows_table(h: &mut String, rows: &[RowResult]) {
    h.push_str(r#"<table id="rows-table"><thead><tr><th>row</th><th>design</th><th>outcome</th><th>attack</th><th>e-mails</th><th>as expected</th><th>what differs</th></tr></thead><tbody>"#);
    for r in rows {
        let (outcome, attack) = match r {
            RowResult::Single(o) => (format!("{} / {} (calls: {})", o.status, o.reason, o.calls.join(", ")), o.attack),
            RowResult::Multi(o, _) => {
                let codes: Vec<&str> = o.rejected.iter().map(|c| c.as_str()).collect();
                let text = format!(
                    "{} (messages {}, rejected [{}], denied [{}])",
                    o.reason,
                    o.messages,
                    codes.join(", "),
                    o.denied.join(", ")
                );
                (text, o.attack)
            }
        };
        let attack = attack.map_or("-", |a| a.as_str());
        let ok = if r.matches() { r#"<td class="good">yes</td>"# } else { r#"<td class="bad">no</td>"# };
        let _ = write!(
            h,
            r#"<tr class="{t}"><td>{}</td><td class="design">{t}</td><td>{}</td><td>{}</td><td class="num">{}</td>{ok}<td>{}</td></tr>"#,
            escape(r.id()),
            escape(&outcome),
            attack,
            r.emails(),
            escape(&crate::security::redact(&r.mismatches().join("; "))),
            t = r.table(),
        );
    }
    h.push_str("</tbody></table>");
}

/// The whole page.
pub fn html(rows: &[RowResult], matrix: &Matrix) -> String {
    let matching = rows.iter().filter(|r| r.matches()).count();
    let broken = matrix.figures.iter().filter(|f| !f.holds).count();
    let mut h = String::with_capacity(64 * 1024);
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    h.push_str("<title>rolegate report</title><style>");
    h.push_str(STYLE);
    h.push_str("</style></head><body>");
    h.push_str("<h1>rolegate: prompt-injection suite</h1>");
    let _ = write!(
        h,
        r#"<p class="lead" id="summary">{matching} of {} rows as expected. Defense matrix: {} configurations × {} task(s) × (1 benign + {} attacked) = {} runs; configurations that must stop every effect and did not: <span class="{}">{broken}</span>.</p>"#,
        rows.len(),
        matrix.figures.len(),
        matrix.tasks,
        matrix.attacks,
        matrix.runs.len(),
        if broken == 0 { "ok" } else { "fail" }
    );
    h.push_str(r#"<section id="matrix"><h2>Defense matrix</h2><p class="lead">Every benign task, as it is and with each catalog payload planted into it, under each configuration. Utility: runs done that called every tool the task needs. Attack success: attacked runs whose effect executed (an e-mail left the outbox). Attempted: attacked runs whose effect was proposed or carried on and refused or held by code. The models are compromised fakes that obey every payload they read: the figures show what the controls do with a model that is fully taken over, not how susceptible a real model is.</p>"#);
    matrix_table(&mut h, matrix);
    h.push_str("</section>");
    h.push_str(r#"<section id="diagrams"><h2>Multi-agent runs</h2><p class="lead">Blue: an accepted envelope. Red dashed with a cross: a message the coordinator refused, with its code. Dots: tool calls on a role's lifeline (red refused, amber held for a person, bold red a write that ran).</p>"#);
    for r in rows {
        if let RowResult::Multi(o, run) = r {
            let title = format!("{}: {}", o.id, o.reason);
            let _ = write!(h, r#"<figure id="diagram-{}"><figcaption>{}</figcaption>"#, escape(&o.id), escape(&title));
            h.push_str(&sequence_svg(&title, run));
            h.push_str("</figure>");
        }
    }
    h.push_str("</section>");
    h.push_str(r#"<section id="rows"><h2>Scenario rows</h2>"#);
    rows_table(&mut h, rows);
    h.push_str("</section></body></html>\n");
    h
}
