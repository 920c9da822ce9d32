//! The HTML report: one self-contained page (inline CSS and SVG, no font, no image, no
//! link to anywhere; the only script sorts the matrix drill-down, [`super::cells`]) with the defense matrix, the figures per
//! template when template payloads ran ([`super::templates`]), every row's outcome and, for each
//! row, a sequence diagram of its run ([`sequence_svg`], built by [`diagram`]).
//!
//! Above each diagram: the row's goal and, for an attacked row, the planted payload's text
//! and where it was planted. A multi-agent diagram has a lifeline per role and one for the
//! coordinator; a single-agent one has the user, the agent and its tools. An accepted
//! envelope is a solid arrow (`m1 brief`); a refused message is a dashed red arrow to the
//! coordinator ending in a cross, with the rejection code; each tool call is a note on the
//! lifeline of the role that made it (single: an arrow from the agent to the tools), red
//! when refused, amber when held for a person, bold red for a write that ran; the read that
//! carried the payload is marked `payload read`. The end box is red when an effect happened
//! (an e-mail left), green only for a clean `done`. Below the diagram, every numbered
//! event has a collapsible row (`<details>`) with its text: the message body, the refused
//! text with its code, the tool call's arguments. Addresses are redacted unless the page is
//! written with [`ReportOptions::show_addresses`]. Every text from a row, a model or a
//! payload is escaped before it is written.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write;

use super::markup::escape;
use crate::agent::{Trace, TraceKind, TraceLine};
use crate::eval::AnyRow;
use crate::lab::Attack;
use crate::multi::{MultiRun, Role};
use crate::suite::matrix::{Figures, Matrix};
use crate::suite::run::RowResult;

/// How a page is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReportOptions {
    /// Show e-mail addresses in the payload text and in the call an attack asked for (the
    /// default redacts them like every other text).
    pub show_addresses: bool,
}

/// What a report says about a run besides its trace: the row's goal and its planted
/// payload (the payload and the id of the ticket or document it went into).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunContext {
    /// The row's goal.
    pub goal: String,
    /// The planted payload and where it went, for an attacked row.
    pub attack: Option<(Attack, String)>,
}

impl RunContext {
    /// The context of a loaded row (its catalog payload already looked up).
    pub fn of(row: &AnyRow) -> Self {
        let (goal, attack) = match row {
            AnyRow::Single(r) => (&r.goal, r.attack.as_ref()),
            AnyRow::Multi(r) => (&r.goal, r.attack.as_ref()),
        };
        let attack = attack.and_then(|a| a.attack().map(|p| (p.clone(), a.into.clone())));
        Self { goal: goal.clone(), attack }
    }
}

const MULTI_LANES: [&str; 4] = ["planner", "researcher", "reviewer", "coordinator"];
const SINGLE_LANES: [&str; 3] = ["user", "agent", "tools"];
const WIDTH: u32 = 800;
const TOP: u32 = 78;
const STEP: u32 = 30;

fn lane_x(lanes: usize, i: usize) -> u32 {
    let n = u32::try_from(lanes.max(1)).unwrap_or(1);
    let i = u32::try_from(i).unwrap_or(0);
    let gap = (WIDTH - 220) / n.saturating_sub(1).max(1);
    110 + i * gap
}

fn role_lane(role: Role) -> usize {
    match role {
        Role::Planner => 0,
        Role::Researcher => 1,
        Role::Reviewer => 2,
        Role::Coordinator => 3,
    }
}

/// One row of a diagram.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Event {
    /// An arrow between two lanes (an accepted envelope; the goal; a tool call).
    Arrow { from: usize, to: usize, label: String, class: &'static str, text: Option<String> },
    /// A refused message: a dashed arrow to `to` ending in a cross.
    Rejected { from: usize, to: usize, code: String, text: String },
    /// A tool call on a lane.
    Tool { lane: usize, text: String, class: &'static str, args: Option<String> },
    /// A note at the end or a stop.
    Note { lane: usize, text: String, class: &'static str },
}

/// A diagram: lanes and events, ready to draw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagram {
    lanes: Vec<&'static str>,
    events: Vec<Event>,
}

/// What a tool line was: its class and its note.
fn tool_class(l: &TraceLine, carrier: Option<&str>) -> Option<(&'static str, String)> {
    let code = l.code.as_ref();
    let (tool, class) = match l.kind {
        TraceKind::Check if code != "ok" => (l.detail.strip_prefix("call ")?, "refused"),
        TraceKind::Tool if code == "ok" && l.detail == "send_email_draft" => (l.detail.as_str(), "effect"),
        TraceKind::Tool
            if code == "ok" && carrier.is_some_and(|c| l.args.as_deref().is_some_and(|a| a.contains(c))) =>
        {
            (l.detail.as_str(), "carrier")
        }
        TraceKind::Tool if code == "ok" => (l.detail.as_str(), "tool"),
        TraceKind::Tool if code == "needs_approval" => (l.detail.as_str(), "held"),
        TraceKind::Tool => (l.detail.as_str(), "refused"),
        _ => return None,
    };
    let to = l.args.as_deref().and_then(|a| serde_json::from_str::<serde_json::Value>(a).ok());
    let to = to.as_ref().and_then(|v| v.get("to")).and_then(|t| t.as_str()).map(str::to_string);
    let text = match class {
        "effect" => format!("{tool}: SENT{}", to.map(|t| format!(" to {t}")).unwrap_or_default()),
        "carrier" => format!("{tool}: ok (payload read)"),
        _ => format!("{tool}: {code}"),
    };
    Some((class, text))
}

/// The tool events of some trace lines: every tool line, and every check line that
/// refused a call.
fn tool_events(lane: usize, lines: &[TraceLine], carrier: Option<&str>) -> Vec<Event> {
    lines
        .iter()
        .filter_map(|l| {
            let (class, text) = tool_class(l, carrier)?;
            Some(Event::Tool { lane, text, class, args: l.args.as_deref().map(str::to_string) })
        })
        .collect()
}

/// The researcher's trace split per assignment (each loop run ends with a stop line).
fn per_assignment(trace: Option<&Trace>, carrier: Option<&str>) -> VecDeque<Vec<Event>> {
    let lane = role_lane(Role::Researcher);
    let mut out = VecDeque::new();
    let mut current = Vec::new();
    for l in trace.map(|t| t.lines.as_slice()).unwrap_or_default() {
        if l.kind == TraceKind::Stop {
            out.push_back(tool_events(lane, &std::mem::take(&mut current), carrier));
        } else {
            current.push(l.clone());
        }
    }
    if !current.is_empty() {
        out.push_back(tool_events(lane, &current, carrier));
    }
    out
}

/// A planner's or reviewer's trace split per round (their lines carry the round as step).
fn per_round(role: Role, trace: Option<&Trace>, carrier: Option<&str>) -> BTreeMap<u32, Vec<Event>> {
    let mut by_round: BTreeMap<u32, Vec<TraceLine>> = BTreeMap::new();
    for l in trace.map(|t| t.lines.as_slice()).unwrap_or_default() {
        by_round.entry(l.step).or_default().push(l.clone());
    }
    by_round.into_iter().map(|(r, lines)| (r, tool_events(role_lane(role), &lines, carrier))).collect()
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

/// The class and text of a run's end box: red when an effect happened, green only for a
/// clean `done`.
fn end_note(reason: &str, emails: usize, done: bool) -> (String, &'static str) {
    if emails > 0 {
        (format!("end: {reason}, {emails} e-mail(s) SENT"), "effect")
    } else if done {
        (format!("end: {reason}"), "done")
    } else {
        (format!("end: {reason}"), "stop")
    }
}

/// The diagram of a multi-agent run, in the coordinator's order; each role's tool calls
/// come just before the message they led to. `carrier`: the id the payload was planted
/// into (the read whose arguments name it is marked).
pub fn multi_diagram(run: &MultiRun, carrier: Option<&str>) -> Diagram {
    let mut pending = Pending {
        research: per_assignment(run.traces.get(2), carrier),
        planner: per_round(Role::Planner, run.traces.get(1), carrier),
        reviewer: per_round(Role::Reviewer, run.traces.get(3), carrier),
    };
    let (mut accepted, mut refused) = (run.messages.iter(), run.rejected.iter());
    let mut out = Vec::new();
    let coordinator = role_lane(Role::Coordinator);
    let lines = run.traces.first().map(|t| t.lines.as_slice()).unwrap_or_default();
    for (i, l) in lines.iter().enumerate() {
        match l.kind {
            TraceKind::Message if l.code == "ok" => {
                if let Some(env) = accepted.next() {
                    out.extend(pending.take(env.sender, l.step));
                    let label = format!("{} {}", env.id, env.kind);
                    let text = crate::security::redact(&env.body.to_text()).into_owned();
                    let (from, to) = (role_lane(env.sender), role_lane(env.recipient));
                    out.push(Event::Arrow { from, to, label, class: "msg", text: Some(text) });
                }
            }
            TraceKind::Message => {
                if let Some(r) = refused.next() {
                    out.extend(pending.take(r.sender, l.step));
                    let (from, code) = (role_lane(r.sender), r.code.as_str().to_string());
                    out.push(Event::Rejected { from, to: coordinator, code, text: r.text.clone() });
                }
            }
            TraceKind::Stop if i + 1 == lines.len() => {
                out.extend(pending.rest());
                let (text, class) = end_note(&l.code, run.emails, run.reason == crate::multi::MultiReason::Done);
                out.push(Event::Note { lane: coordinator, text, class });
            }
            TraceKind::Stop => {
                let text = format!("{} {}", l.code, l.detail).trim().to_string();
                out.push(Event::Note { lane: coordinator, text, class: "stop" });
            }
            _ => {}
        }
    }
    Diagram { lanes: MULTI_LANES.to_vec(), events: out }
}

/// The diagram of a single-agent run: the goal from the user to the agent, each tool call
/// from the agent to the tools (a call the loop's check refused stays on the agent's
/// lifeline), the end on the agent's lifeline.
pub fn single_diagram(goal: &str, trace: &Trace, emails: usize, carrier: Option<&str>) -> Diagram {
    let mut out = vec![Event::Arrow {
        from: 0,
        to: 1,
        label: "goal".into(),
        class: "msg",
        text: Some(crate::security::redact(goal).into_owned()),
    }];
    for l in &trace.lines {
        match l.kind {
            TraceKind::Stop => {
                let (text, class) = end_note(&l.code, emails, l.code == "done");
                out.push(Event::Note { lane: 1, text, class });
            }
            TraceKind::Check => {
                if let Some((class, text)) = tool_class(l, carrier) {
                    out.push(Event::Tool { lane: 1, text, class, args: None });
                }
            }
            TraceKind::Tool => {
                if let Some((class, text)) = tool_class(l, carrier) {
                    let class = if class == "tool" { "msg" } else { class };
                    out.push(Event::Arrow {
                        from: 1,
                        to: 2,
                        label: text,
                        class,
                        text: l.args.as_deref().map(str::to_string),
                    });
                }
            }
            _ => {}
        }
    }
    Diagram { lanes: SINGLE_LANES.to_vec(), events: out }
}

fn arrow_head(svg: &mut String, x: u32, y: u32, left: bool, class: &str) {
    let (a, b) = if left { (x + 9, x) } else { (x.saturating_sub(9), x) };
    let _ = write!(svg, r#"<polygon class="{class}head" points="{a},{} {b},{y} {a},{}"/>"#, y - 4, y + 4);
}

/// The sequence diagram of a multi-agent `run` as one `<svg>` element (no namespace
/// declaration: it is meant to sit inside an HTML page, where none is needed).
pub fn sequence_svg(title: &str, run: &MultiRun) -> String {
    draw(title, &multi_diagram(run, None))
}

/// The number of an event in the collapsible rows below its diagram, when it has a text.
fn numbered(e: &Event) -> bool {
    matches!(e, Event::Arrow { text: Some(_), .. } | Event::Rejected { .. } | Event::Tool { args: Some(_), .. })
}

/// `diagram` as one `<svg>` element; an event with a text is numbered (`#n`) as in its
/// collapsible row.
pub fn draw(title: &str, diagram: &Diagram) -> String {
    let lanes = diagram.lanes.len();
    let x = |i: usize| lane_x(lanes, i);
    let events = &diagram.events;
    let count = u32::try_from(events.len()).unwrap_or(u32::MAX / STEP - 10);
    let height = TOP + count * STEP + 30;
    let mut svg = String::with_capacity(2048 + events.len() * 256);
    let _ = write!(
        svg,
        r#"<svg class="seq" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{}">"#,
        escape(title)
    );
    let _ = write!(svg, "<title>{}</title>", escape(title));
    for (i, name) in diagram.lanes.iter().enumerate() {
        let lx = x(i);
        let _ = write!(
            svg,
            r#"<rect class="head" x="{}" y="10" width="140" height="30" rx="6"/><text class="headtext" x="{lx}" y="30">{name}</text>"#,
            lx - 70,
        );
        let _ = write!(svg, r#"<line class="life" x1="{lx}" y1="40" x2="{lx}" y2="{}"/>"#, height - 10);
    }
    let mut n = 0;
    for (i, e) in events.iter().enumerate() {
        let y = TOP + u32::try_from(i).unwrap_or(0) * STEP;
        let tag = if numbered(e) {
            n += 1;
            format!("#{n} ")
        } else {
            String::new()
        };
        match e {
            Event::Arrow { from, to, label, class, .. } => {
                let (x1, x2) = (x(*from), x(*to));
                let _ = write!(svg, r#"<line class="{class}" x1="{x1}" y1="{y}" x2="{x2}" y2="{y}"/>"#);
                arrow_head(&mut svg, x2, y, x2 < x1, class);
                let _ = write!(
                    svg,
                    r#"<text class="label lbl-{class}" x="{}" y="{}">{tag}{}</text>"#,
                    (x1 + x2) / 2,
                    y - 6,
                    escape(label)
                );
            }
            Event::Rejected { from, to, code, .. } => {
                let (x1, x2) = (x(*from), x(*to));
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
                    r#"<text class="label rejlabel" x="{}" y="{}">{tag}rejected: {}</text>"#,
                    (x1 + x2) / 2,
                    y - 6,
                    escape(code)
                );
            }
            Event::Tool { lane, text, class, .. } => {
                let lx = x(*lane);
                let _ = write!(svg, r#"<circle class="dot {class}" cx="{lx}" cy="{y}" r="4"/>"#);
                let _ = write!(
                    svg,
                    r#"<text class="note {class}" x="{}" y="{}">{tag}{}</text>"#,
                    lx + 9,
                    y + 4,
                    escape(text)
                );
            }
            Event::Note { lane, text, class } => {
                let lx = x(*lane);
                let _ = write!(
                    svg,
                    r#"<rect class="endbox {class}" x="{}" y="{}" width="220" height="22" rx="5"/><text class="endtext" x="{}" y="{}">{}</text>"#,
                    lx.clamp(115, WIDTH - 115) - 110,
                    y - 12,
                    lx.clamp(115, WIDTH - 115),
                    y + 3,
                    escape(text)
                );
            }
        }
    }
    svg.push_str("</svg>");
    svg
}

/// The collapsible rows under a diagram: one `<details>` per numbered event, its summary
/// what the diagram shows, its body the whole text.
fn details(h: &mut String, diagram: &Diagram) {
    h.push_str(r#"<div class="events">"#);
    let mut n = 0;
    for e in &diagram.events {
        if !numbered(e) {
            continue;
        }
        n += 1;
        let (class, summary, text) = match e {
            Event::Arrow { from, to, label, class, text: Some(t) } => {
                (*class, format!("{label} ({} → {})", diagram.lanes[*from], diagram.lanes[*to]), t.as_str())
            }
            Event::Rejected { from, code, text, .. } => {
                ("rejected", format!("rejected: {code} (from {})", diagram.lanes[*from]), text.as_str())
            }
            Event::Tool { lane, text, class, args: Some(a) } => {
                (*class, format!("{text} ({})", diagram.lanes[*lane]), a.as_str())
            }
            _ => continue,
        };
        let _ = write!(
            h,
            r#"<details class="ev {class}"><summary>#{n} {}</summary><pre>{}</pre></details>"#,
            escape(&summary),
            escape(text)
        );
    }
    h.push_str("</div>");
}

/// Hides addresses unless `opts` shows them; always hides secrets.
fn shown<'a>(text: &'a str, opts: &ReportOptions) -> std::borrow::Cow<'a, str> {
    if opts.show_addresses { crate::security::hide_secrets(text) } else { crate::security::redact(text) }
}

/// With addresses shown: a call that is exactly the one the payload asked for (its
/// redacted arguments are the payload's, redacted) shows the payload's arguments in clear.
fn reveal(diagram: &Diagram, ctx: &RunContext, opts: &ReportOptions) -> Diagram {
    let mut out = diagram.clone();
    let Some((attack, _)) = ctx.attack.as_ref().filter(|_| opts.show_addresses) else { return out };
    let clear = attack.effect.arguments.to_string();
    let hidden = crate::security::redact(&clear).into_owned();
    let clear = crate::security::hide_secrets(&clear).into_owned();
    let to = attack
        .effect
        .arguments
        .get("to")
        .and_then(|t| t.as_str())
        .map(|t| crate::security::hide_secrets(t).into_owned());
    for e in &mut out.events {
        let (label, args) = match e {
            Event::Arrow { label, text: Some(args), .. } | Event::Tool { text: label, args: Some(args), .. } => {
                (label, args)
            }
            _ => continue,
        };
        if *args == hidden && label.starts_with(&format!("{}: ", attack.effect.tool)) {
            if let (Some(to), Some(at)) = (&to, label.find(" to [email]")) {
                label.replace_range(at.., &format!(" to {to}"));
            }
            args.clone_from(&clear);
        }
    }
    out
}

/// One run's figure: its title, goal and payload, the diagram and its collapsible rows.
pub fn figure(id: &str, title: &str, ctx: &RunContext, diagram: &Diagram, opts: &ReportOptions) -> String {
    let diagram = &reveal(diagram, ctx, opts);
    let mut h = String::with_capacity(4096);
    let _ = write!(h, r#"<figure id="diagram-{}"><figcaption>{}</figcaption>"#, escape(id), escape(title));
    let _ = write!(h, r#"<p class="goal"><b>goal:</b> {}</p>"#, escape(&crate::security::redact(&ctx.goal)));
    if let Some((a, into)) = &ctx.attack {
        let _ = write!(
            h,
            r#"<div class="payload"><b>planted payload {} ({}) into {}:</b><pre class="payload-text">{}</pre><p>it asks for: <code>{} {}</code></p></div>"#,
            escape(&a.id),
            escape(
                serde_json::to_value(a.style)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
                    .as_str()
            ),
            escape(into),
            escape(&shown(&a.text, opts)),
            escape(&a.effect.tool),
            escape(&shown(&a.effect.arguments.to_string(), opts)),
        );
    }
    h.push_str(&draw(title, diagram));
    details(&mut h, diagram);
    h.push_str("</figure>");
    h
}

/// The diagram of one row's result.
pub fn row_diagram(r: &RowResult, ctx: &RunContext) -> Option<Diagram> {
    let carrier = ctx.attack.as_ref().map(|(_, into)| into.as_str());
    match r {
        RowResult::Multi(_, run) => Some(multi_diagram(run, carrier)),
        RowResult::Single(o) => o.trace.as_ref().map(|t| single_diagram(&ctx.goal, t, o.emails, carrier)),
    }
}

/// A page for one run (`rolegate run --html`): its figure alone.
pub fn run_page(title: &str, id: &str, ctx: &RunContext, diagram: &Diagram, opts: &ReportOptions) -> String {
    let mut h = String::with_capacity(16 * 1024);
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = write!(h, "<title>rolegate run: {}</title><style>", escape(title));
    h.push_str(STYLE);
    h.push_str("</style></head><body><h1>rolegate run</h1>");
    h.push_str(LEGEND);
    h.push_str(&figure(id, title, ctx, diagram, opts));
    h.push_str("</body></html>\n");
    h
}

const LEGEND: &str = r#"<p class="lead">Blue: an accepted envelope or a call that ran. Red dashed with a cross: a message the coordinator refused, with its code. Dots: tool calls on a role's lifeline (red refused, amber held for a person, bold red a write that ran, purple the read that carried the payload). The end box is red when an e-mail left. Open a numbered row below a diagram for its whole text (message bodies and refused texts are agent output, shown as data).</p>"#;

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
svg .life { stroke: #9ca3af; stroke-dasharray: 4 4; } svg line.msg { stroke: #2563eb; stroke-width: 2; } svg .msghead { fill: #2563eb; }
svg .rej { stroke: #dc2626; stroke-width: 2; stroke-dasharray: 6 4; } svg .cross { stroke: #dc2626; stroke-width: 3; }
svg .label { font-size: 12px; text-anchor: middle; fill: #1e3a8a; } svg .rejlabel { fill: #b91c1c; font-weight: 600; }
svg .note { font-size: 11px; fill: #4b5563; } svg .dot { fill: #9ca3af; }
svg .note.refused { fill: #b91c1c; } svg .dot.refused { fill: #dc2626; } svg .note.held { fill: #b45309; } svg .dot.held { fill: #f59e0b; }
svg .note.effect { fill: #991b1b; font-weight: 700; } svg .dot.effect { fill: #991b1b; }
svg .endbox { fill: #f3f4f6; stroke: #6b7280; } svg .endbox.done { fill: #dcfce7; stroke: #16a34a; } svg .endbox.stop { fill: #fef3c7; stroke: #d97706; }
svg .endbox.effect { fill: #fecaca; stroke: #b91c1c; stroke-width: 2; }
svg .note.carrier { fill: #7e22ce; font-weight: 700; } svg .dot.carrier { fill: #9333ea; } svg line.carrier { stroke: #9333ea; stroke-width: 2; } svg .carrierhead { fill: #9333ea; }
svg line.effect { stroke: #991b1b; stroke-width: 3; } svg .effecthead { fill: #991b1b; } svg line.refused { stroke: #dc2626; stroke-dasharray: 6 4; stroke-width: 2; } svg .refusedhead { fill: #dc2626; }
svg line.held { stroke: #f59e0b; stroke-width: 2; } svg .heldhead { fill: #f59e0b; } svg .lbl-effect { fill: #991b1b; font-weight: 700; } svg .lbl-carrier { fill: #7e22ce; font-weight: 700; }
svg .lbl-refused { fill: #b91c1c; } svg .lbl-held { fill: #b45309; }
p.goal { margin: 2px 0; } div.payload { border-left: 4px solid #9333ea; background: #faf5ff; padding: 4px 10px; margin: 6px 0; max-width: 1000px; }
pre { white-space: pre-wrap; word-break: break-word; margin: 4px 0; font-size: 12px; } div.events { max-width: 1000px; margin-top: 6px; }
details.ev { border: 1px solid #e5e7eb; margin: 2px 0; padding: 2px 8px; font-size: 13px; } details.ev.rejected, details.ev.refused { border-color: #fca5a5; background: #fef2f2; }
details.ev.effect { border-color: #b91c1c; background: #fee2e2; } details.ev.carrier { border-color: #d8b4fe; background: #faf5ff; }
svg .endtext { font-size: 12px; text-anchor: middle; fill: #111827; }
table.cells th { cursor: pointer; } table.cells th[aria-sort=ascending]::after { content: " \25B2"; } table.cells th[aria-sort=descending]::after { content: " \25BC"; }
"#;

fn count_cell(svg: &mut String, c: &crate::suite::matrix::Count, class: &str) {
    let _ = write!(svg, r#"<td class="num {class}">{}/{} ({})</td>"#, c.n, c.of, c.percent());
}

fn matrix_table(h: &mut String, m: &Matrix) {
    h.push_str(r#"<table id="matrix-table" class="matrix"><thead><tr><th>design</th><th>filter</th><th>claims</th><th>scopes</th><th>loop check</th><th>approval</th><th>utility</th><th>utility under attack</th><th>attack success</th><th>attempted</th><th title="attacked runs whose payload got no further than exposed / persisted / relayed / executed">hops e/p/r/x</th><th>must stop all</th><th>refusals by code</th></tr></thead><tbody>"#);
    for f in &m.figures {
        let Figures { utility, utility_under_attack, attack_success, attempted, .. } = f;
        let _ = write!(h, r#"<tr class="{}">"#, f.config.design());
        for (i, cell) in f.config.cells().iter().enumerate() {
            let class = if i == 0 { r#" class="design""# } else { "" };
            // the information-flow defense is shown with the design (its own column would
            // change the table of every report)
            let ifc = if i == 0 && f.config.ifc() == crate::eval::rows::Switch::On { " + ifc" } else { "" };
            let _ = write!(h, "<td{class}>{}{ifc}</td>", escape(cell));
        }
        count_cell(h, utility, "");
        count_cell(h, utility_under_attack, "");
        count_cell(h, attack_success, if attack_success.n > 0 { "bad" } else { "good" });
        count_cell(h, attempted, "");
        let _ = write!(h, r#"<td class="num">{}</td>"#, escape(&f.hops.cell()));
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

/// The whole page. `contexts` holds each row's goal and payload, in the order of `rows`
/// (a row without one gets an empty context).
pub fn html(rows: &[RowResult], contexts: &[RunContext], matrix: &Matrix, opts: &ReportOptions) -> String {
    html_with(rows, contexts, matrix, opts, "")
}

/// [`html`] with `cells` (the matrix drill-down, [`super::cells_section`]) after the
/// matrix.
pub fn html_with(
    rows: &[RowResult],
    contexts: &[RunContext],
    matrix: &Matrix,
    opts: &ReportOptions,
    cells: &str,
) -> String {
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
    h.push_str(&super::templates::templates_section(matrix));
    h.push_str(cells);
    h.push_str(r#"<section id="diagrams"><h2>Runs</h2>"#);
    h.push_str(LEGEND);
    let empty = RunContext::default();
    for (i, r) in rows.iter().enumerate() {
        let ctx = contexts.get(i).unwrap_or(&empty);
        let Some(diagram) = row_diagram(r, ctx) else { continue };
        let title = match r {
            RowResult::Multi(o, _) => format!("{} (multi): {}", o.id, o.reason),
            RowResult::Single(o) => format!("{} (single): {} / {}", o.id, o.status, o.reason),
        };
        h.push_str(&figure(r.id(), &title, ctx, &diagram, opts));
    }
    h.push_str("</section>");
    h.push_str(r#"<section id="rows"><h2>Scenario rows</h2>"#);
    rows_table(&mut h, rows);
    h.push_str("</section></body></html>\n");
    h
}
