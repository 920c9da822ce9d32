//! Plan-then-execute: one model call writes a [`Plan`] (at most five steps, each a tool,
//! its arguments and a short reason; unknown fields rejected), code checks every step
//! before anything runs (allowlist, argument schema, repeats, writes), and only a clean
//! plan reaches [`FixedPlan`] as the executor, which runs it through the ordinary loop and
//! gate. A rejected plan ends after that one model call with nothing run.

use crate::codes::codes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt;

use super::DesignError;
use crate::agent::FixedPlan;
use crate::agent::{Agent, AgentError, AgentState, CheckCode, Proposal, Run, Trace, TraceKind};
use crate::cost::{Ledger, UsageRecord, estimate_tokens};
use crate::gate::Access;
use crate::human::{Level, classify};
use crate::model::blocks::push_block;
use crate::model::{LlmClient, LlmRequest, Message, ModelError};
use crate::tools::fingerprint;

/// Most steps of a plan.
pub(crate) const MAX_PLAN_STEPS: usize = 5;
/// Most characters of a step's reason.
pub(crate) const MAX_REASON_CHARS: usize = 120;
/// Largest plan text accepted, in bytes.
pub(crate) const MAX_PLAN_BYTES: usize = 8 * 1024;

/// One planned tool call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanStep {
    pub tool: String,
    /// Its arguments (an object).
    pub arguments: Value,
    /// Why, in a few words (1 to 120 characters).
    pub reason: String,
}

/// A plan: what will run, in order. A reviewable artefact: a person can read it before
/// the run starts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// 1 to [`MAX_PLAN_STEPS`] steps.
    pub steps: Vec<PlanStep>,
}

codes! {
    /// Why a plan, or one of its steps, was refused.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    pub enum PlanCode {
        /// Not a JSON object (prose, truncated JSON, …).
        NotJson = "not_json",
        /// JSON, but not a plan: unknown fields, no steps or too many, a bad reason, too large.
        InvalidPlan = "invalid_plan",
        /// A step's tool is not in the task's allowlist, or does not exist.
        NotAllowed = "not_allowed",
        /// A step's arguments do not fit the tool's schema.
        InvalidArguments = "invalid_arguments",
        /// A step repeats an earlier step exactly.
        RepeatedCall = "repeated_call",
        /// A step has an effect: a plan runs unattended, so it may only read.
        WriteStep = "write_step",
        /// The planner's model call failed with a named code (the trace names it).
        ModelError = "model_error",
    }
}

/// One problem: with the 1-based step it is about, or about the whole plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanProblem {
    /// The step (1-based), or `None` for the whole plan.
    pub step: Option<usize>,
    /// What is wrong.
    pub code: PlanCode,
}

impl fmt::Display for PlanProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.step {
            Some(n) => write!(f, "step {n}: {}", self.code.as_str()),
            None => f.write_str(self.code.as_str()),
        }
    }
}

impl Serialize for PlanProblem {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Parses a plan strictly.
///
/// # Errors
/// [`PlanCode::NotJson`] when the text is not a JSON object; [`PlanCode::InvalidPlan`]
/// when it is one but not a valid plan.
pub fn parse_plan(text: &str) -> Result<Plan, PlanCode> {
    if text.len() > MAX_PLAN_BYTES {
        return Err(PlanCode::InvalidPlan);
    }
    let value: Value = serde_json::from_str(text).map_err(|_| PlanCode::NotJson)?;
    if !value.is_object() {
        return Err(PlanCode::NotJson);
    }
    let plan: Plan = serde_json::from_value(value).map_err(|_| PlanCode::InvalidPlan)?;
    let reasons_ok =
        plan.steps.iter().all(|s| !s.reason.trim().is_empty() && s.reason.chars().count() <= MAX_REASON_CHARS);
    if plan.steps.is_empty() || plan.steps.len() > MAX_PLAN_STEPS || !reasons_ok {
        return Err(PlanCode::InvalidPlan);
    }
    Ok(plan)
}

/// Checks every step with the loop's own check ([`Agent::check`]: allowlist, schema,
/// repeats), then refuses any step with an effect. Returns every problem, in step order;
/// empty means the plan may run.
pub fn check_plan(plan: &Plan, agent: &Agent, state: &AgentState) -> Vec<PlanProblem> {
    let mut seen = BTreeSet::new();
    let mut problems = Vec::new();
    for (i, step) in plan.steps.iter().enumerate() {
        let proposal = Proposal::Call { tool: step.tool.clone(), arguments: step.arguments.clone() };
        let code = match agent.check(&proposal, state, &seen) {
            CheckCode::NotAllowed => Some(PlanCode::NotAllowed),
            CheckCode::InvalidArguments => Some(PlanCode::InvalidArguments),
            CheckCode::RepeatedCall => Some(PlanCode::RepeatedCall),
            CheckCode::Ok | CheckCode::UnsupportedFinish => {
                let writes = agent.gate.policy().access_of(&step.tool) == Access::Write
                    || classify(&step.tool).level == Level::Approve;
                writes.then_some(PlanCode::WriteStep)
            }
        };
        seen.insert(fingerprint(&step.tool, &step.arguments));
        if let Some(code) = code {
            problems.push(PlanProblem { step: Some(i + 1), code });
        }
    }
    problems
}

/// The planner's request: the trusted planning prompt listing the task's tools, then the
/// goal as an untrusted block. No function is offered: the answer is a plan, never a call
/// (a planner that answers through a `finish` call anyway has its `answer` read as the
/// plan). `max_tokens` is the planner's own allowance when it has one, else the budget's.
pub(crate) fn plan_request(agent: &Agent, model: &str, max_tokens: Option<u32>, goal: &str) -> LlmRequest {
    let tools: Vec<_> = agent.gate.policy().tools_for(&agent.task).filter_map(|t| agent.gate.tools().spec(t)).collect();
    let mut system = crate::model::prompts::plan().to_string();
    system.push_str("Tools:\n");
    for t in &tools {
        system.push_str(&format!("- {}: {}\n", t.name, t.parameters["properties"]));
    }
    let mut user = String::new();
    push_block(&mut user, "goal", "user-input", &[], goal);
    LlmRequest {
        model: model.to_owned().into(),
        messages: vec![Message::system(system), Message::user(user)],
        tools: Vec::new(),
        max_tokens: max_tokens.unwrap_or(agent.budget.max_output_tokens),
    }
}

/// The journal kind of a checked plan.
pub(crate) const PLAN_STEP: &str = "plan";

/// The durable record of a checked plan: what a resumed run executes, and the planner's
/// usage and lines the outcome reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlanRecord {
    /// The plan (clean).
    pub(crate) plan: Plan,
    /// The planner's usage.
    pub(crate) ledger: Ledger,
    /// The planning lines.
    pub(crate) trace: Trace,
}

impl PlanRecord {
    /// The executor of this plan.
    pub(crate) fn executor(&self) -> FixedPlan {
        FixedPlan::new(self.plan.steps.iter().map(|s| (s.tool.clone(), s.arguments.clone())).collect())
    }
}

/// What plan-then-execute did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanOutcome {
    /// The plan, when it parsed.
    pub plan: Option<Plan>,
    /// Problems; empty when the plan ran.
    pub problems: Vec<PlanProblem>,
    /// The planner's usage (one record).
    pub ledger: Ledger,
    /// The planning lines (model, then one `plan` line per step).
    pub trace: Trace,
    /// The executor's run, when the plan was clean.
    pub run: Option<Run>,
}

/// Asks `planner` for a plan for `goal`, checks it and, when clean, runs it with `agent`
/// (whose decider is replaced by the plan as a [`FixedPlan`]).
///
/// # Errors
/// [`DesignError`] when the planner has no price or crashed, or the run could not be
/// carried out. A planner that fails with a named code is a rejected plan, not an error.
pub async fn plan_then_execute(
    planner: &mut dyn LlmClient,
    agent: &mut Agent,
    goal: &str,
    run_id: &str,
) -> Result<PlanOutcome, DesignError> {
    let state = agent.new_state(run_id, goal)?;
    let price = agent.prices.price(planner.model())?;
    let request = plan_request(agent, planner.model(), planner.max_tokens(), goal);
    let mut trace = Trace::new(run_id);
    let mut ledger = Ledger::default();
    // the run's time budget is the planner call's deadline too (its retries and waits end
    // there; the failure is the plan's model_error, with the code in the trace)
    planner.set_deadline(tokio::time::Instant::now().checked_add(agent.budget.max_seconds));
    // the plan is a message: the reply's own text, or the `answer` of a `finish` call
    let response = match planner.complete_message(&request).await {
        Ok(r) => r,
        Err(ModelError::Failed { code, message, answered }) => {
            // an answer the server gave is paid whatever became of it
            if let Some(a) = answered.as_deref() {
                let (input, output) = a.tokens(request.estimated_input_tokens());
                ledger.add(UsageRecord::priced(run_id, request.model.clone(), price, input, output));
            }
            trace.add(0, TraceKind::Model, code, &message);
            rejected(&mut trace);
            let problems = vec![PlanProblem { step: None, code: PlanCode::ModelError }];
            return Ok(PlanOutcome { plan: None, problems, ledger, trace, run: None });
        }
        Err(crash) => return Err(DesignError::Agent(crate::agent::AgentError::Model(crash))),
    };
    let (input, output) = response.tokens(|| (request.estimated_input_tokens(), estimate_tokens(&response.text)));
    ledger.add(UsageRecord::priced(run_id, request.model.clone(), price, input, output));
    let plan = match parse_plan(&response.text) {
        Ok(p) => p,
        Err(code) => {
            trace.add(0, TraceKind::Model, code.as_str(), &response.text);
            rejected(&mut trace);
            return Ok(PlanOutcome {
                plan: None,
                problems: vec![PlanProblem { step: None, code }],
                ledger,
                trace,
                run: None,
            });
        }
    };
    trace.add(0, TraceKind::Model, "ok", &response.text);
    let problems = check_plan(&plan, agent, &state);
    for (i, step) in plan.steps.iter().enumerate() {
        let code = problems.iter().find(|p| p.step == Some(i + 1)).map_or("ok", |p| p.code.as_str());
        trace.add(0, TraceKind::Plan, code, &format!("step {} {}: {}", i + 1, step.tool, step.reason));
    }
    if !problems.is_empty() {
        rejected(&mut trace);
        return Ok(PlanOutcome { plan: Some(plan), problems, ledger, trace, run: None });
    }
    if agent.durable().is_on() {
        // the checked plan is durable before its first step runs
        let record = PlanRecord { plan: plan.clone(), ledger: ledger.clone(), trace: trace.clone() };
        let body = serde_json::to_string(&record).map_err(|e| AgentError::Checkpoint(e.to_string()))?;
        agent.durable().design_step(run_id, PLAN_STEP, 0, body).await.map_err(AgentError::Checkpoint)?;
    }
    let calls = plan.steps.iter().map(|s| (s.tool.clone(), s.arguments.clone())).collect();
    agent.decider = Box::new(FixedPlan::new(calls));
    let run = agent.run(goal, run_id).await?;
    Ok(PlanOutcome { plan: Some(plan), problems, ledger, trace, run: Some(run) })
}

/// The closing line of a rejected plan's trace: every run's trace ends with a `stop` line.
fn rejected(trace: &mut Trace) {
    trace.add_known(0, TraceKind::Stop, "plan_rejected", &["nothing ran"]);
}
