//! `rolegate run` with defense switches, compromised roles, a planted payload or `--html`:
//! the flags are written as one scenario row (the same JSON a rows file holds) and go
//! through the row parser and runner ([`rolegate::eval::parse_single_row`],
//! [`rolegate::eval::parse_any_table`], [`rolegate::suite::run_rows`]), so a switch means
//! exactly what the row field and the matrix configuration of the same name mean. Prints
//! the trace (single) or the envelope log (multi), the attack verdict, and writes the page
//! of the run with `--html`.

use clap::ValueEnum;
use serde_json::{Map, Value, json};
use std::sync::Arc;

use super::{EXIT_USAGE, out};
use rolegate::eval::AnyRow;
use rolegate::report::{ReportOptions, RunContext, row_diagram, run_page};
use rolegate::suite::RowResult;

/// A control that is on or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// On.
    On,
    /// Off.
    Off,
}

/// How many tools an agent or role holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Width {
    /// Its task's (or role's) tools.
    Narrow,
    /// Every tool, every write granted.
    Wide,
}

/// The switches of `run` that make it a row run.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct RowFlags {
    /// single, multi: the tools each agent or role holds: narrow (its task's or role's)
    /// or wide (every tool, every write granted). Like a row's `defenses.scopes`.
    #[arg(long, value_enum)]
    pub scopes: Option<Width>,
    /// multi: the coordinator's instruction filter (`defenses.filter`).
    #[arg(long, value_enum)]
    pub filter: Option<OnOff>,
    /// single, multi: whether a granted write waits for a person (`defenses.approval`).
    #[arg(long, value_enum)]
    pub approval: Option<OnOff>,
    /// single: the loop's own check of each proposal (`defenses.loop_check`).
    #[arg(long, value_enum)]
    pub loop_check: Option<OnOff>,
    /// single, multi: the information-flow defense (`defenses.ifc`; off unless given):
    /// labels checked at the gate and at the coordinator's routes.
    #[arg(long, value_enum)]
    pub ifc: Option<OnOff>,
    /// multi: roles taken over by the planted payload, e.g. `researcher=relay,reviewer=obey`
    /// (researcher: relay or obey; reviewer: obey). Like a row's `compromised`.
    #[arg(long, value_name = "ROLE=HOW,…")]
    pub compromised: Option<String>,
    /// Plant this catalog payload (an id of data/attacks.jsonl) before the run; with
    /// --design single and --model auto the agent is the compromised fake that obeys it.
    #[arg(long, value_name = "ID", requires = "into")]
    pub attack: Option<String>,
    /// The ticket or document the --attack payload is planted into (e.g. T-601).
    #[arg(long, value_name = "ID", requires = "attack")]
    pub into: Option<String>,
    /// Write the run's page (its sequence diagram, the payload, every message and tool
    /// call) to FILE: one self-contained HTML file.
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<std::path::PathBuf>,
    /// --html: show e-mail addresses in the payload text and the call it asks for
    /// (redacted by default).
    #[arg(long, requires = "html")]
    pub show_addresses: bool,
}

impl RowFlags {
    /// True when any switch asks for the row path.
    pub fn any(&self) -> bool {
        self.scopes.is_some()
            || self.filter.is_some()
            || self.approval.is_some()
            || self.loop_check.is_some()
            || self.ifc.is_some()
            || self.compromised.is_some()
            || self.attack.is_some()
            || self.into.is_some()
            || self.html.is_some()
    }
}

/// What else the row needs from `run`'s arguments.
pub struct RowRun<'a> {
    /// `single` or `multi`.
    pub design: &'a str,
    /// The goal.
    pub goal: &'a str,
    /// `--model` (single: `auto`, `compromised` or `fake:KIND`).
    pub model: &'a str,
    /// The user.
    pub user: &'a str,
    /// The task (single).
    pub task: Option<&'a str>,
    /// Write grants (single).
    pub grants: &'a [String],
    /// Role behaviours and claim mode (multi).
    pub roles: rolegate::multi::Behaviours,
    /// Claims (multi).
    pub claims: rolegate::multi::ClaimMode,
}

fn on_off(s: OnOff) -> &'static str {
    match s {
        OnOff::On => "on",
        OnOff::Off => "off",
    }
}

/// `researcher=relay,reviewer=obey` as the row's `compromised` object.
fn compromised(text: &str) -> Result<Value, String> {
    let mut map = Map::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (role, how) = part
            .split_once('=')
            .ok_or_else(|| format!("--compromised {part:?}: write ROLE=HOW (researcher=relay|obey, reviewer=obey)"))?;
        map.insert(role.trim().to_string(), Value::String(how.trim().to_string()));
    }
    Ok(Value::Object(map))
}

/// The row the flags describe, as a JSON line.
///
/// # Errors
/// A message for a design without rows, a `--compromised` value that is not `ROLE=HOW`, or
/// `--attack` without `--into` (and back).
pub fn row_json(r: &RowRun<'_>, f: &RowFlags) -> Result<String, String> {
    let mut defenses = Map::new();
    if let Some(s) = f.scopes {
        defenses.insert("scopes".into(), json!(if s == Width::Wide { "wide" } else { "narrow" }));
    }
    for (name, v) in [("filter", f.filter), ("approval", f.approval), ("loop_check", f.loop_check), ("ifc", f.ifc)] {
        if let Some(v) = v {
            defenses.insert(name.into(), json!(on_off(v)));
        }
    }
    let mut row = Map::new();
    row.insert("id".into(), json!("run"));
    row.insert("user".into(), json!(r.user));
    row.insert("goal".into(), json!(r.goal));
    if !defenses.is_empty() {
        row.insert("defenses".into(), Value::Object(defenses));
    }
    match (&f.attack, &f.into) {
        (Some(a), Some(into)) => {
            row.insert("attack".into(), json!({"payload": a, "into": into}));
        }
        (None, None) => {}
        _ => {
            return Err(
                "--attack and --into go together (a catalog payload id and the ticket or document it is planted into)"
                    .into(),
            );
        }
    }
    match r.design {
        "single" => {
            if f.compromised.is_some() {
                return Err("--compromised names roles of --design multi; a single agent is compromised with --model compromised".into());
            }
            let model = match r.model {
                "auto" if f.attack.is_some() => "compromised",
                "auto" => "sensible",
                m => m.strip_prefix("fake:").unwrap_or(m),
            };
            row.insert("model".into(), json!(model));
            row.insert("task".into(), json!(r.task.unwrap_or("triage")));
            if !r.grants.is_empty() {
                row.insert("grants".into(), json!(r.grants));
            }
            row.insert("expect".into(), json!({"status": "done", "reason": "done", "calls": [], "emails": 0}));
        }
        "multi" => {
            row.insert("design".into(), json!("multi"));
            row.insert("roles".into(), serde_json::to_value(r.roles).map_err(|e| e.to_string())?);
            row.insert("claims".into(), json!(r.claims.as_str()));
            if let Some(c) = &f.compromised {
                row.insert("compromised".into(), compromised(c)?);
            }
            row.insert(
                "expect".into(),
                json!({"reason": "done", "messages": 0, "rejected": [], "denied": [], "emails": 0}),
            );
        }
        other => {
            return Err(format!(
                "--design {other}: the defense switches, --compromised, --attack and --html apply to --design single or multi"
            ));
        }
    }
    serde_json::to_string(&Value::Object(row)).map_err(|e| e.to_string())
}

/// Parses the row the flags describe with the row parser (catalog ids looked up, the
/// target checked, every field strict).
///
/// # Errors
/// The row parser's message, naming the flag's field.
pub fn parse_row(line: &str) -> Result<AnyRow, String> {
    let mut rows = rolegate::eval::parse_any_table(line, "(run flags)").map_err(|e| e.to_string())?;
    rows.pop().ok_or_else(|| "the flags describe no row".to_string())
}

/// Runs the row and returns its result.
///
/// # Errors
/// A message when the run cannot be carried out.
pub async fn run_one(row: AnyRow) -> Result<RowResult, String> {
    let env = Arc::new(rolegate::agent::Env::bundled().map_err(|e| e.to_string())?);
    let menv = rolegate::multi::MultiEnv::new(&env).map_err(|e| e.to_string())?;
    let mut results = rolegate::suite::run_rows(vec![row], &env, &menv, None, None).await;
    results.pop().ok_or_else(|| "no result".to_string())?.map_err(|e| e.to_string())
}

/// The printed lines of a result: the trace or envelope log, then the outcome with the
/// attack verdict.
pub fn lines(result: &RowResult) -> Vec<String> {
    let mut lines = Vec::new();
    match result {
        RowResult::Single(o) => {
            if let Some(t) = &o.trace {
                lines.push(rolegate::design::TRACE_HEADER.to_string());
                lines.extend(t.lines());
                lines.push(rolegate::design::TRACE_LEGEND.to_string());
            }
            lines.push(rolegate::design::usage_line("agent", &o.usage));
            if let Some(a) = &o.answer {
                lines.push(rolegate::design::answer_line(a));
            }
            lines.push(format!(
                "outcome: {} {} | calls [{}] | e-mails {} | model calls {}",
                o.status,
                o.reason,
                o.calls.join(", "),
                o.emails,
                o.model_calls
            ));
            if let Some(a) = o.attack {
                lines.push(format!("attack: {a}"));
            }
        }
        RowResult::Multi(o, run) => {
            lines.extend(super::run_multi::log(run));
            if let Some(a) = o.attack {
                lines.push(format!("attack: {a}"));
            }
        }
    }
    lines
}

/// The reason a result ended for, as `run_checks::exit_for` reads it.
fn reason(result: &RowResult) -> String {
    match result {
        RowResult::Single(o) if o.status == "awaiting_approval" => "awaiting_approval".into(),
        RowResult::Single(o) => o.reason.as_str().to_string(),
        RowResult::Multi(o, _) => o.reason.to_string(),
    }
}

/// `run` through the row path: build, parse, run, print, write the page.
pub(crate) async fn run(r: RowRun<'_>, f: RowFlags) -> u8 {
    if let Some(path) = &f.html
        && let Err(e) = super::input::output_path(path)
    {
        eprintln!("rolegate: {e}");
        return EXIT_USAGE;
    }
    let row = match row_json(&r, &f).and_then(|line| parse_row(&line)) {
        Ok(row) => row,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let ctx = RunContext::of(&row);
    let result = match run_one(row).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    for line in lines(&result) {
        if !out(&line) {
            break;
        }
    }
    if let Some(path) = &f.html {
        let opts = ReportOptions { show_addresses: f.show_addresses };
        let title = format!("{} run: {}", r.design, reason(&result));
        let Some(diagram) = row_diagram(&result, &ctx) else {
            eprintln!("rolegate: the run left no trace to draw");
            return EXIT_USAGE;
        };
        if let Err(e) = std::fs::write(path, run_page(&title, "run", &ctx, &diagram, &opts)) {
            eprintln!("rolegate: {}: {e}", path.display());
            return EXIT_USAGE;
        }
    }
    super::run_checks::exit_for(&reason(&result))
}
