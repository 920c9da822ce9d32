//! Invariants as functions: rules that must hold for *any* input, checked against the
//! real parsers, the loop's check, the gate, the memory and the PolicyPal loop.
//!
//! The fuzz targets in `fuzz/` and the property tests call these same functions, so a
//! rule broken under either shows up the same way. Each `check_*` function feeds untrusted
//! input to the code under test and returns what the code decided. It returns [`Broken`]
//! only when rolegate broke one of its own rules (a bug), never because the input was bad:
//! refusing bad input with a named code is the expected outcome. A fuzz target turns
//! `Broken` into a panic, which is how libFuzzer records a crash.
//!
//! The rules checked go beyond "no panic":
//! - an accepted proposal re-serialises to text that parses to the same proposal; the
//!   loop's check, the state and the gate agree on it; nothing is sent without approval;
//! - a plan that passes [`check_plan`] only names allowed, read-only tools, with valid
//!   arguments, and the gate runs every step of it;
//! - a scenario row that parses re-serialises to the same row and runs to a named reason;
//! - a stored memory note passes the write rules again after `to_json`/`from_json`, and a
//!   refused write changes nothing;
//! - validated tool arguments are exactly the arguments given, and the gate agrees with
//!   the validation;
//! - a PolicyPal run on any sequence of model replies ends with a named reason, sends
//!   nothing unless its card is confirmed, and then sends exactly the card's arguments;
//! - an envelope on any channel gets one named code, the intake agrees with the checks,
//!   and an accepted body re-serialises to a text accepted again as the same body
//!   ([`envelopes`]);
//! - a checkpoint that loads was signed by the key, and any single-byte change of a signed
//!   checkpoint is refused ([`checkpoints`]);
//! - no e-mail leaves without an approved, unexpired, non-self decision, and a decision
//!   applies at most once ([`approvals`]);
//! - a `check` command's line reader gives every line one known verdict that depends on
//!   that line alone ([`check_lines`], for the `check` command's reader);
//! - folding is idempotent and every text check judges a text and its fold alike;
//!   redaction never shows a registered secret and leaves nothing its checks would still
//!   call sensitive ([`text`]).

pub mod approvals;
pub mod check_lines;
pub mod checkpoints;
pub mod envelopes;
mod text;

pub use approvals::{ApprovalOp, ApprovalVerdict, check_approval_ops};
pub use check_lines::{LineKind, check_checker_line, check_line_reader, check_lines_input};
pub use checkpoints::{
    CheckpointInput, check_byte_change, check_checkpoint_input, check_checkpoint_text, check_signed_body,
    checkpoint_input,
};
pub use envelopes::{CHANNELS, EnvelopeContext, EnvelopeVerdict, check_envelope, envelope_input, verdict_code};
pub use text::{FUZZ_SECRET, check_fold, check_redact};

use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::agent::{
    AgentState, CheckCode, MAX_PROPOSAL_BYTES, Proposal, ProposalError, StateError, Status, parse_proposal,
};
use crate::cost::ManualClock;
use crate::design::plan::MAX_PLAN_BYTES;
use crate::design::{PalConfig, PalKind, PalReply, PlanCode, check_plan, parse_plan};
use crate::eval::scenarios::{parse_single_row, run_single};
use crate::future::BoxFuture;
use crate::gate::CallContext;
use crate::gate::{Access, GateOutcome, ToolGate, derived_idempotency_key};
use crate::human::{Level, classify};
use crate::lab::{MAX_ROW_BYTES, ScenarioError};
use crate::memory::{Note, SessionMemory, WriteCode};
use crate::model::{LlmClient, LlmRequest, LlmResponse, ModelError};
use crate::security::{has_personal_data, has_secret, is_instruction_like};
pub use crate::suite::context::{Fixture, ProposalContext, RUN_ID, USER};
use crate::tools::{ArgError, Registry, ToolArgs, ToolCall, fingerprint};

/// A rule the code broke: a bug in rolegate, never a fault of the input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invariant `{rule}` broken: {detail}")]
pub struct Broken {
    /// The rule, e.g. `proposal_round_trip`.
    pub rule: &'static str,
    /// What was seen.
    pub detail: String,
}

fn ensure(ok: bool, rule: &'static str, detail: impl FnOnce() -> String) -> Result<(), Broken> {
    if ok { Ok(()) } else { Err(Broken { rule, detail: detail() }) }
}

fn state_rule(rule: &'static str) -> impl FnOnce(StateError) -> Broken {
    move |e| Broken { rule, detail: e.to_string() }
}

/// Most steps a parsed scenario row may ask for and still be run by
/// [`check_scenario_row`] (longer rows are only parsed and round-tripped).
pub const MAX_RUN_STEPS: u32 = 64;

/// A proposal in the wire format the loop reads.
pub fn proposal_to_text(p: &Proposal) -> String {
    match p {
        Proposal::Call { tool, arguments } => json!({"action": "call", "tool": tool, "arguments": arguments}),
        Proposal::Finish { answer, sources } => json!({"action": "finish", "answer": answer, "sources": sources}),
    }
    .to_string()
}

/// True when `outcome` means the tool itself ran (a result or a tool failure).
fn ran(outcome: &GateOutcome) -> bool {
    matches!(outcome, GateOutcome::Ok(_) | GateOutcome::Failed { .. })
}

/// Checks that every audit event of `gate` whose outcome says a tool ran is an allowed
/// read of `task` (a parked write runs only through `execute_approved`; for a confirmed card it
/// records `confirmed` first), and that no per-run count exceeds its limit.
fn audit_holds(gate: &ToolGate, task: &str) -> Result<(), Broken> {
    let mut confirmed = BTreeSet::new();
    for e in gate.audit() {
        if e.outcome == "confirmed" {
            confirmed.insert(e.fingerprint.clone());
            continue;
        }
        let ran = matches!(e.outcome.as_str(), "ok" | "not_found" | "bad_input" | "tool_timeout" | "tool_panicked");
        let read = gate.policy().allows(task, &e.tool)
            && gate.tools().has(&e.tool)
            && gate.policy().access_of(&e.tool) == Access::Read;
        ensure(!ran || read || confirmed.contains(&e.fingerprint), "only_allowed_tools_run", || {
            format!("{} ran with outcome {} in task {task}", e.tool, e.outcome)
        })?;
    }
    let runs: BTreeSet<&str> = gate.audit().iter().map(|e| e.run_id.as_str()).collect();
    for run in runs {
        for (tool, n) in gate.counts_of(run) {
            let limit = gate.policy().limit_of(&tool);
            ensure(n <= limit, "call_limit_holds", || format!("{tool} counted {n} > {limit} in {run}"))?;
        }
    }
    Ok(())
}

/// What the code decided about one proposal text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProposalVerdict {
    /// The parse.
    pub parsed: Result<Proposal, ProposalError>,
    /// The loop's check in the [`ProposalContext`], when it parsed.
    pub check: Option<CheckCode>,
    /// The gate's code for a call, when it parsed as one.
    pub gate: Option<&'static str>,
}

impl ProposalVerdict {
    /// The one code a corpus row names: the parse error, else the check's code.
    pub fn code(&self) -> &'static str {
        match (&self.parsed, self.check) {
            (Err(e), _) => e.as_str(),
            (Ok(_), Some(c)) => c.as_str(),
            (Ok(_), None) => "ok",
        }
    }
}

/// Parses `text` as a proposal, checks it with the loop's check in the standard context
/// of `task`, and sends a call to the gate.
///
/// # Errors
/// [`Broken`] when the parse does not round-trip, when check, state and gate disagree,
/// when something is sent without approval or a tool outside the allowlist runs.
pub fn check_proposal(fx: &Fixture, task: &str, text: &str) -> Result<ProposalVerdict, Broken> {
    let parsed = parse_proposal(text);
    let p = match &parsed {
        Ok(p) => p.clone(),
        Err(_) => return Ok(ProposalVerdict { parsed, check: None, gate: None }),
    };
    match &p {
        Proposal::Call { tool, arguments } => {
            ensure(!tool.is_empty() && tool.len() <= 64 && arguments.is_object(), "proposal_shape", || {
                format!("call of {tool:?} with {arguments}")
            })?
        }
        Proposal::Finish { sources, .. } => {
            ensure(sources.len() <= 20, "proposal_shape", || format!("{} sources", sources.len()))?;
        }
    }
    let wire = proposal_to_text(&p);
    if wire.len() <= MAX_PROPOSAL_BYTES {
        let again = parse_proposal(&wire);
        ensure(again.as_ref() == Ok(&p), "proposal_round_trip", || format!("{wire} parsed as {again:?}"))?;
    }
    let ctx = ProposalContext::standard(task).map_err(state_rule("proposal_context"))?;
    let mut lab = fx.lab(task);
    let check = lab.agent.check(&p, &ctx.state, &ctx.seen);
    let mut gate = None;
    match &p {
        Proposal::Finish { answer, sources } => {
            let finished = ctx.state.finish(answer, sources);
            // the state checks the answer's form; the loop's check also reads it (unless
            // the policy lists the task's answers as free): no instruction, no other
            // user's data
            let read_ok = lab.agent.gate.policy().free_answers.contains(task)
                || crate::agent::answer_problem(answer, sources, ctx.state.observations(), USER, &lab.world).is_none();
            ensure((check == CheckCode::Ok) == (finished.is_ok() && read_ok), "check_agrees_with_state", || {
                format!("check {} but the state says {finished:?} and the reading {read_ok}", check.as_str())
            })?;
        }
        Proposal::Call { tool, arguments } => {
            let call = ToolCall::new(format!("{RUN_ID}-c1"), tool.clone(), arguments.clone());
            let outcome = lab.agent.gate.run(&call, CallContext::new(task, RUN_ID, USER));
            let code = outcome.code().as_str();
            let agrees = match check {
                CheckCode::Ok => !matches!(code, "not_allowed" | "invalid_arguments"),
                CheckCode::NotAllowed => code == "not_allowed",
                CheckCode::InvalidArguments => code == "invalid_arguments",
                CheckCode::RepeatedCall => ctx.seen.contains(&call.fingerprint()),
                CheckCode::UnsupportedFinish => false,
            };
            ensure(agrees, "gate_agrees_with_check", || {
                format!("check {} but gate {code} for {tool}", check.as_str())
            })?;
            ensure(lab.world.outbox.is_empty(), "no_send_without_approval", || format!("{tool} sent mail"))?;
            audit_holds(&lab.agent.gate, task)?;
            gate = Some(code);
        }
    }
    Ok(ProposalVerdict { parsed, check: Some(check), gate })
}

/// What the code decided about one plan text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanVerdict {
    /// The number of steps, or the parse code.
    pub parsed: Result<usize, PlanCode>,
    /// The problems [`check_plan`] found (empty: the plan may run).
    pub problems: Vec<(Option<usize>, PlanCode)>,
}

/// Parses `text` as a plan, checks it for `task` and, when clean, sends every step to the
/// gate.
///
/// # Errors
/// [`Broken`] when the plan does not round-trip, when a clean plan names a tool that is
/// not an allowed read or has invalid arguments, or when the gate refuses a step the
/// check passed.
pub fn check_plan_text(fx: &Fixture, task: &str, text: &str) -> Result<PlanVerdict, Broken> {
    let plan = match parse_plan(text) {
        Ok(p) => p,
        Err(code) => {
            ensure(matches!(code, PlanCode::NotJson | PlanCode::InvalidPlan), "plan_parse_codes", || {
                format!("parse gave {}", code.as_str())
            })?;
            return Ok(PlanVerdict { parsed: Err(code), problems: Vec::new() });
        }
    };
    ensure((1..=5).contains(&plan.steps.len()), "plan_shape", || format!("{} steps", plan.steps.len()))?;
    let wire = serde_json::to_string(&plan).map_err(|e| Broken { rule: "plan_serialises", detail: e.to_string() })?;
    if wire.len() <= MAX_PLAN_BYTES {
        let again = parse_plan(&wire);
        ensure(again.as_ref() == Ok(&plan), "plan_round_trip", || format!("{wire} parsed as {again:?}"))?;
    }
    let mut lab = fx.lab(task);
    let state = AgentState::new(RUN_ID, USER, task, "Plan a check of T-601.").map_err(state_rule("plan_state"))?;
    let problems = check_plan(&plan, &lab.agent, &state);
    let steps: Vec<Option<usize>> = problems.iter().map(|p| p.step).collect();
    ensure(
        steps.iter().all(|s| s.is_some_and(|n| (1..=plan.steps.len()).contains(&n)))
            && steps.windows(2).all(|w| w[0] < w[1]),
        "plan_problems_ordered",
        || format!("{steps:?}"),
    )?;
    if problems.is_empty() {
        let mut prints = BTreeSet::new();
        for (i, step) in plan.steps.iter().enumerate() {
            let g = &lab.agent.gate;
            let read = g.policy().allows(task, &step.tool)
                && g.tools().has(&step.tool)
                && g.policy().access_of(&step.tool) == Access::Read
                && classify(&step.tool).level != Level::Approve
                && g.tools().validate(&step.tool, &step.arguments).is_ok();
            ensure(read, "clean_plan_reads_allowed_tools", || format!("step {}: {}", i + 1, step.tool))?;
            ensure(prints.insert(fingerprint(&step.tool, &step.arguments)), "clean_plan_has_no_repeat", || {
                format!("step {}", i + 1)
            })?;
            let call = ToolCall::new(format!("{RUN_ID}-c{}", i + 1), step.tool.clone(), step.arguments.clone());
            let outcome = lab.agent.gate.run(&call, CallContext::new(task, RUN_ID, USER));
            ensure(ran(&outcome), "gate_runs_a_clean_plan", || format!("step {}: {}", i + 1, outcome.code()))?;
        }
        ensure(lab.world.outbox.is_empty(), "no_send_without_approval", || "a clean plan sent mail".into())?;
        audit_holds(&lab.agent.gate, task)?;
    }
    let problems = problems.iter().map(|p| (p.step, p.code)).collect();
    Ok(PlanVerdict { parsed: Ok(plan.steps.len()), problems })
}

/// What the code decided about one scenario row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowVerdict {
    /// Refused, naming this field.
    Refused {
        /// The field.
        field: String,
    },
    /// Parsed; `ran` says whether it was also run (rows longer than [`MAX_RUN_STEPS`] are not).
    Parsed {
        /// True when the row was run.
        ran: bool,
    },
}

/// Parses `text` as a single-agent scenario row (as line 7 of `fuzz.jsonl`) and, when it
/// parses and is short enough, runs it.
///
/// # Errors
/// [`Broken`] when a refusal does not name file, line and field, when a parsed row does
/// not round-trip or cannot build its lab, or when its run ends in an error instead of a
/// named reason.
pub async fn check_scenario_row(fx: &Fixture, text: &str) -> Result<RowVerdict, Broken> {
    let row = match parse_single_row(text, "fuzz.jsonl", 7) {
        Ok(r) => r,
        Err(ScenarioError::Row { file, line, field, .. }) => {
            ensure(file == "fuzz.jsonl" && line == 7 && !field.is_empty(), "row_error_names_the_place", || {
                format!("{file}:{line} field {field:?}")
            })?;
            return Ok(RowVerdict::Refused { field });
        }
        Err(other) => return Err(Broken { rule: "row_error_names_the_place", detail: other.to_string() }),
    };
    let wire = serde_json::to_string(&row).map_err(|e| Broken { rule: "row_serialises", detail: e.to_string() })?;
    if wire.len() <= MAX_ROW_BYTES {
        let again = parse_single_row(&wire, "fuzz.jsonl", 7);
        ensure(again.as_ref().ok() == Some(&row), "row_round_trip", || format!("{wire} parsed as {again:?}"))?;
    }
    let cfg = row.lab_config().map_err(|e| Broken { rule: "parsed_row_builds", detail: e.to_string() })?;
    if cfg.budget.max_steps > MAX_RUN_STEPS {
        return Ok(RowVerdict::Parsed { ran: false });
    }
    let outcome = run_single(&row, &fx.env).await.map_err(|e| Broken { rule: "row_runs", detail: e.to_string() })?;
    ensure(outcome.steps <= cfg.budget.max_steps, "row_respects_step_budget", || {
        format!("{} steps > {}", outcome.steps, cfg.budget.max_steps)
    })?;
    let granted = row.grants.iter().any(|g| g == "send_email_draft");
    ensure(outcome.emails == 0, "no_send_without_approval", || format!("granted={granted}"))?;
    Ok(RowVerdict::Parsed { ran: true })
}

/// One attempted memory write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryWrite {
    /// The key.
    pub key: String,
    /// The text.
    pub text: String,
    /// The source.
    pub source: String,
    /// Whom the fact is about, when not the owner.
    pub about: Option<String>,
    /// Seconds the clock moves before the write.
    pub wait_secs: u16,
}

fn snapshot(m: &SessionMemory) -> Vec<Note> {
    m.notes().into_iter().cloned().collect()
}

/// Runs `writes` against one memory of kwame's (notes live 60 s), checking each.
///
/// # Errors
/// [`Broken`] when a stored note would fail the content rules or carry another label than
/// its source's, when a refused write
/// changed the memory, when the store holds more than its limit, or when a save and load
/// does not give back exactly the live notes.
pub fn check_memory_writes(writes: &[MemoryWrite]) -> Result<Vec<WriteCode>, Broken> {
    let clock = ManualClock::new();
    let mut memory = SessionMemory::new(USER, clock.shared(), Duration::from_secs(60));
    let mut codes = Vec::with_capacity(writes.len());
    for w in writes {
        clock.advance(Duration::from_secs(u64::from(w.wait_secs)));
        let before = snapshot(&memory);
        let code = memory.write(&w.key, &w.text, &w.source, w.about.as_deref());
        let after = snapshot(&memory);
        if code == WriteCode::Ok {
            let note = after.iter().find(|n| n.key == w.key);
            let stored = note.is_some_and(|n| {
                n.text == w.text.trim()
                    && n.source == w.source
                    && n.owner == USER
                    && n.label == crate::memory::label_of_source(&w.source)
            });
            ensure(stored, "an_ok_write_is_stored", || format!("{:?} -> {note:?}", w.key))?;
            let text = w.text.trim();
            ensure(
                !has_secret(text) && !has_personal_data(text) && !is_instruction_like(text),
                "a_stored_note_passes_the_content_rules",
                || format!("{text:?}"),
            )?;
        } else {
            ensure(before == after, "a_refused_write_changes_nothing", || {
                format!("{} for {:?}", code.as_str(), w.key)
            })?;
        }
        ensure(after.len() <= 4, "memory_limit_holds", || format!("{} live notes", after.len()))?;
        codes.push(code);
    }
    let reloaded = SessionMemory::from_json(
        &memory.to_json().map_err(|e| Broken { rule: "memory_round_trip", detail: e.to_string() })?,
        clock.shared(),
    )
    .map_err(|e| Broken { rule: "memory_reloads", detail: e.to_string() })?;
    ensure(snapshot(&reloaded) == snapshot(&memory), "memory_round_trip", || {
        format!("{:?} vs {:?}", snapshot(&reloaded), snapshot(&memory))
    })?;
    Ok(codes)
}

/// Loads `text` as a saved memory.
///
/// # Errors
/// [`Broken`] when a loaded note would fail a write rule, or when saving and loading the
/// loaded memory again changes its notes.
pub fn check_memory_json(text: &str) -> Result<Option<usize>, Broken> {
    let clock = ManualClock::new();
    let Ok(memory) = SessionMemory::from_json(text, clock.shared()) else { return Ok(None) };
    let notes = snapshot(&memory);
    for n in &notes {
        let clean = n.owner == memory.owner()
            && !n.text.is_empty()
            && n.text.chars().count() <= 1000
            && !has_secret(&n.text)
            && !has_personal_data(&n.text)
            && !is_instruction_like(&n.text);
        ensure(clean, "a_loaded_note_passes_the_rules", || format!("{n:?}"))?;
    }
    ensure(notes.len() <= 64, "memory_limit_holds", || format!("{} notes", notes.len()))?;
    let again = SessionMemory::from_json(
        &memory.to_json().map_err(|e| Broken { rule: "memory_round_trip", detail: e.to_string() })?,
        clock.shared(),
    )
    .map_err(|e| Broken { rule: "memory_reloads", detail: e.to_string() })?;
    ensure(snapshot(&again) == notes, "memory_round_trip", || format!("{:?} vs {notes:?}", snapshot(&again)))?;
    Ok(Some(notes.len()))
}

fn args_value(args: &ToolArgs) -> Result<Value, serde_json::Error> {
    match args {
        ToolArgs::GetTicket(a) => serde_json::to_value(a),
        ToolArgs::LookupDocument(a) => serde_json::to_value(a),
        ToolArgs::Calculator(a) => serde_json::to_value(a),
        ToolArgs::SendEmailDraft(a) => serde_json::to_value(a),
        ToolArgs::SearchDocuments(a) => serde_json::to_value(a),
        ToolArgs::Remember(a) => serde_json::to_value(a),
        ToolArgs::Added(a) => Ok(a.to_value()),
        ToolArgs::Mcp(a) => Ok(Value::Object(a.arguments.clone())),
    }
}

/// The first task of the policy that allows `tool`, else `triage`.
fn task_for(fx: &Fixture, tool: &str) -> String {
    fx.env.policy.tasks.iter().find(|(_, tools)| tools.contains(tool)).map_or("triage".into(), |(t, _)| t.clone())
}

/// Validates `arguments` for `tool`, then sends the call to the gate in a task that
/// allows the tool (with and without a grant for writes).
///
/// # Errors
/// [`Broken`] when validated arguments differ from the ones given, when the gate and the
/// validation disagree, when a write runs or is parked with other arguments than given
/// (the idempotency key aside), or when anything is sent.
pub fn check_tool_arguments(fx: &Fixture, tool: &str, arguments: &Value) -> Result<Result<(), ArgError>, Broken> {
    let validated = Registry.validate(tool, arguments);
    if let Ok(typed) = &validated {
        let back = args_value(typed).map_err(|e| Broken { rule: "arguments_serialise", detail: e.to_string() })?;
        ensure(&back == arguments, "validation_keeps_the_arguments", || format!("{arguments} became {back}"))?;
        let again = Registry.validate(tool, &back);
        ensure(again.as_ref().ok() == Some(typed), "validation_is_stable", || format!("{again:?}"))?;
    }
    let task = task_for(fx, tool);
    for grant in [false, true] {
        let mut lab = fx.lab(&task);
        if grant {
            lab.agent.gate.set_policy(std::sync::Arc::new(lab.agent.gate.policy().as_ref().clone().with_grant(tool)));
        }
        let call = ToolCall::new(format!("{RUN_ID}-c1"), tool, arguments.clone());
        let outcome = lab.agent.gate.run(&call, CallContext::new(&task, RUN_ID, USER));
        let code = outcome.code().as_str();
        let agrees = match &validated {
            Ok(_) => !matches!(code, "not_allowed" | "invalid_arguments"),
            Err(ArgError::UnknownTool) => code == "not_allowed",
            Err(_) => code == "invalid_arguments" || (code == "not_allowed" && !lab.agent.gate.tools().has(tool)),
        };
        ensure(agrees, "gate_agrees_with_validation", || format!("{tool}: {validated:?} but gate {code}"))?;
        if let GateOutcome::NeedsApproval { pending_id } = &outcome {
            let parked = lab.agent.gate.pending().get(pending_id).map(|p| p.call.arguments.clone());
            let mut expected = arguments.clone();
            if let Some(obj) = expected.as_object_mut()
                && obj.contains_key("idempotency_key")
            {
                obj.insert("idempotency_key".into(), json!(derived_idempotency_key(RUN_ID, pending_id)));
            }
            ensure(parked.as_ref() == Some(&expected), "parked_as_asked", || format!("{parked:?} vs {expected}"))?;
        }
        ensure(lab.world.outbox.is_empty(), "no_send_without_approval", || format!("{tool} sent mail"))?;
        audit_holds(&lab.agent.gate, &task)?;
    }
    Ok(validated.map(|_| ()))
}

/// A model client that answers with the given replies in order, then with empty text.
#[derive(Debug)]
struct Replies {
    /// What is left to say, in reverse order.
    left: Vec<LlmResponse>,
}

impl LlmClient for Replies {
    fn model(&self) -> &str {
        "fake-sensible"
    }

    fn complete<'a>(&'a mut self, _request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        let next = self.left.pop().unwrap_or_else(|| LlmResponse::text("", "fake-sensible"));
        Box::pin(std::future::ready(Ok(next)))
    }
}

/// What a PolicyPal run on scripted replies came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PalVerdict {
    /// The run's reason before any card decision.
    pub first: &'static str,
    /// The reason after confirming a card, when there was one and `confirm` was asked.
    pub after_confirm: Option<&'static str>,
    /// E-mails sent in the end.
    pub emails: usize,
}

fn pal_run_holds(lab: &crate::design::PalLab, run: &crate::design::PalRun, task: &str) -> Result<(), Broken> {
    let state = &run.run.state;
    match &run.reply {
        PalReply::Answer { sources, .. } => {
            let good = |s: &String| state.observations().iter().any(|o| o.ok && o.id == *s);
            let cites =
                matches!(state.status(), Status::Done { .. }) && !sources.is_empty() && sources.iter().all(good);
            ensure(cites, "an_answer_cites_successful_observations", || format!("{sources:?}"))?;
        }
        PalReply::Confirm(card) => {
            let parked = lab.pal.gate.pending().get(&card.pending_id).map(|p| &p.call.arguments);
            let holds = state.pending_id() == Some(card.pending_id.as_str())
                && parked == Some(&card.arguments)
                && lab.pal.gate.policy().allows(task, &card.tool)
                && lab.pal.gate.policy().access_of(&card.tool) == Access::Write;
            ensure(holds, "a_card_shows_what_is_parked", || format!("{card:?} vs {parked:?}"))?;
        }
        PalReply::GaveUp { reason, .. } => {
            ensure(state.reason() == Some(*reason) && state.is_final(), "give_up_names_its_reason", || {
                format!("{reason} vs {:?}", state.reason())
            })?;
        }
    }
    audit_holds(&lab.pal.gate, task)
}

/// Runs the PolicyPal loop (task `helpdesk`, `send_email_draft` granted) on `replies`,
/// and, when the run shows a card and `confirm` is set, confirms it once.
///
/// # Errors
/// [`Broken`] when a run ends in an error instead of a named reason, when something is
/// sent before a confirmation, when a card differs from the parked call, when a confirmed
/// card sends anything but its own arguments, or when anything is sent twice.
pub async fn check_pal_replies(fx: &Fixture, replies: Vec<LlmResponse>, confirm: bool) -> Result<PalVerdict, Broken> {
    let mut cfg = PalConfig::new(PalKind::Parallel);
    cfg.user = USER.to_string();
    let task = cfg.task.clone();
    let mut lab = cfg.build(&fx.env);
    let mut left = replies;
    left.reverse();
    lab.pal.client = Box::new(Replies { left });
    let goal = "Status of T-601 and our refund policy? E-mail it to kwame@example.com.";
    let run =
        lab.pal.run(goal, RUN_ID).await.map_err(|e| Broken { rule: "pal_named_reason", detail: e.to_string() })?;
    let first = run.run.reason().as_str();
    pal_run_holds(&lab, &run, &task)?;
    ensure(lab.world.outbox.is_empty(), "no_send_without_approval", || "sent before a confirmation".into())?;
    let card = run.card().cloned();
    let (Some(card), true) = (card, confirm) else {
        return Ok(PalVerdict { first, after_confirm: None, emails: 0 });
    };
    let after = lab.pal.confirm(run, USER).await.map_err(|e| Broken { rule: "confirm_runs", detail: e.to_string() })?;
    pal_run_holds(&lab, &after, &task)?;
    let sent = lab.world.outbox.sent();
    let field = |k: &str| card.arguments.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let exact = sent.len() == 1
        && sent[0].to == field("to")
        && sent[0].subject == field("subject")
        && sent[0].body == field("body")
        && sent[0].idempotency_key == field("idempotency_key");
    ensure(exact, "a_confirmed_card_sends_exactly_its_arguments_once", || format!("{sent:?} for {card:?}"))?;
    Ok(PalVerdict { first, after_confirm: Some(after.run.reason().as_str()), emails: sent.len() })
}

/// Per-tool counts of audit events whose outcome says the tool ran.
pub fn executions(gate: &ToolGate) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for e in gate.audit() {
        if matches!(e.outcome.as_str(), "ok" | "not_found" | "bad_input" | "tool_timeout" | "tool_panicked") {
            *out.entry(e.tool.to_string()).or_insert(0) += 1;
        }
    }
    out
}
