//! Role actors. Each role is a task that owns its model, its scoped gate and its trace; the
//! coordinator holds a cheap [`RoleHandle`] (an `mpsc::Sender`) and gives the role, with
//! every assignment, a fresh `oneshot` to answer on. A role holds nothing else: no other
//! role's handle, no route, no way to address anyone. What it answers is raw text; the
//! coordinator knows who sent it from the channel it came on.
//!
//! The planner and the reviewer make one model call per assignment; a tool call in their
//! reply goes through their own scope check and gate. The researcher runs the single-agent
//! loop ([`Agent`]) with its own gate, inside the budget the coordinator hands it. A refused
//! tool call is reported as a [`Denial`].
//!
//! A panic in a role's work is caught by its actor: the role answers that it failed (with
//! the calls its gate made before the panic) and its actor stops. Its trace and its gate's
//! audit are taken out before the rest of the role is dropped, so a panic while the actor
//! shuts down is reported too and loses nothing.

use rust_decimal::Decimal;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::budget::Remaining;
use super::envelope::{Body, Envelope, Role};
use super::short_text::ShortText;
use super::{Denial, DenialCode, MultiReason};
use crate::agent::{Agent, StopReason, Trace, TraceKind};
use crate::cost::{Price, PriceTable, Summary, estimate_tokens};
use crate::future::BoxFuture;
use crate::gate::CallContext;
use crate::gate::Observation;
use crate::gate::{AuditEvent, GateOutcome, ToolGate};
use crate::model::blocks::push_block;
use crate::model::http::FINISH_TOOL;
use crate::model::prompts;
use crate::model::{LlmClient, LlmRequest, LlmResponse, Message, ModelError, RequestedCall, answer_or_cancelled};
use crate::tools::{ToolCall, ToolSpec};
use crate::unwind::{CatchUnwind, panic_text};

/// Output allowance of a planner or reviewer call on a fake, in tokens (a real model's
/// client brings its own: [`LlmClient::max_tokens`]).
const MAX_OUTPUT_TOKENS: u32 = 200;

/// A send to a role whose task has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the {0} actor has stopped")]
pub(crate) struct ActorStopped(pub Role);

/// What the coordinator asks of a role.
#[derive(Debug)]
pub(crate) enum Assignment {
    /// Write a brief for `goal` (with the last verdict's notes from a later round).
    Plan {
        /// The user's goal (untrusted).
        goal: Arc<str>,
        /// The previous round's verdict notes (untrusted).
        notes: Option<String>,
        /// The notes' label (the verdict envelope's; trusted without notes).
        notes_label: crate::label::Label,
    },
    /// Research the brief.
    Research(Arc<Envelope>),
    /// Review the finding.
    Review(Arc<Envelope>),
}

/// One assignment and the part of the run's budget the role may spend on it.
#[derive(Debug)]
pub(crate) struct Work {
    /// What to do.
    pub what: Assignment,
    /// Calls, credits and time left in the run.
    pub remaining: Remaining,
    /// The round (trace step of planner and reviewer lines).
    pub round: u32,
    /// The run's span: the role's turn (`invoke_agent`) is opened under it.
    pub span: tracing::Span,
}

/// Why a role answered without a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RoleStop {
    /// A run budget (or cancellation) stopped it before or during its work.
    Budget(MultiReason),
    /// Its own loop ended for a reason of its own; `cause` is the failure behind it when
    /// there is one (`truncated: the server stopped the reply …`, redacted).
    Own {
        /// The loop's reason.
        reason: StopReason,
        /// The code and message of a failed model call (`code: message`).
        cause: Option<String>,
    },
    /// It could not work at all (a crashed model, an unpriced model).
    Failed(String),
}

/// A role's answer to one assignment. Only `text` comes from a model; everything else is
/// recorded by the role's code.
#[derive(Debug, Default)]
pub(crate) struct RoleReply {
    /// The raw message text (untrusted).
    pub text: String,
    /// The researcher's observations of this assignment that its finish cited (what claim
    /// support reads: a finding may cite only a record this run read and the researcher
    /// cited as its own support).
    pub observations: Vec<Observation>,
    /// Model calls made.
    pub calls: u32,
    /// Credits spent.
    pub cost: Decimal,
    /// The paid calls (those with an answer), their tokens as the model's server
    /// reported them (estimated when it did not) and their credits.
    pub paid: Summary,
    /// Refused tool calls, in order.
    pub denied: Vec<Denial>,
    /// Tool names sent to the gate, in order.
    pub tools: Vec<String>,
    /// Set when there is no message.
    pub stop: Option<RoleStop>,
    /// What the role's model had in view, as its gate recorded it (results handed back,
    /// envelopes its actor put in): the label the coordinator stamps from.
    pub label: crate::label::Label,
}

/// What a role leaves behind when its task ends: its trace, its gate's audit, and the
/// answers nobody was waiting for any more (work interrupted by the end of the run still
/// counts: its calls, cost, tools and refusals).
#[derive(Debug)]
pub(crate) struct RoleReport {
    /// Every line the role wrote, over all assignments.
    pub trace: Trace,
    /// Its gate's audit.
    pub audit: Vec<AuditEvent>,
    /// Answers the coordinator had stopped waiting for.
    pub late: Vec<RoleReply>,
    /// `panicked: …` when the role's work panicked, or its model or gate panicked while
    /// the actor shut down (the trace and audit above were kept).
    pub panicked: Option<String>,
}

/// The role actor's inbox message: one pointer, so the inbox's 32-slot block stays small.
#[derive(Debug)]
pub(crate) struct RoleMsg(Box<Assigned>);

/// An assignment and the channel to answer it on.
#[derive(Debug)]
pub(crate) struct Assigned {
    /// What to do.
    work: Work,
    /// The channel only this role holds, for this one answer.
    respond_to: oneshot::Sender<RoleReply>,
}

/// A cheap handle on a role actor; the coordinator is its only holder. Dropping it closes
/// the inbox and ends the actor.
#[derive(Debug)]
pub(crate) struct RoleHandle {
    pub role: Role,
    tx: mpsc::Sender<RoleMsg>,
}

impl RoleHandle {
    /// Spawns the actor for `worker`; `cancel` is the run's token, as the role holds it.
    pub(crate) fn spawn(worker: Worker, cancel: CancellationToken) -> (Self, JoinHandle<RoleReport>) {
        let (tx, rx) = mpsc::channel(1);
        let role = worker.role();
        let join = tokio::spawn(run_actor(RoleActor { rx, worker, cancel }));
        (Self { role, tx }, join)
    }

    /// Hands `work` to the role and returns the channel its answer will come on.
    ///
    /// # Errors
    /// [`ActorStopped`] when the actor's task has ended (or is busy, which the coordinator
    /// never causes: it waits for each answer).
    pub(crate) fn assign(&self, work: Work) -> Result<oneshot::Receiver<RoleReply>, ActorStopped> {
        let (respond_to, rx) = oneshot::channel();
        self.tx.try_send(RoleMsg(Box::new(Assigned { work, respond_to }))).map_err(|_| ActorStopped(self.role))?;
        Ok(rx)
    }
}

struct RoleActor {
    rx: mpsc::Receiver<RoleMsg>,
    worker: Worker,
    cancel: CancellationToken,
}

async fn run_actor(mut actor: RoleActor) -> RoleReport {
    let mut late = Vec::new();
    let mut panicked = None;
    while let Some(RoleMsg(assigned)) = actor.rx.recv().await {
        let Assigned { work, respond_to } = *assigned;
        let audited = actor.worker.audit().len();
        let turn = crate::spans::agent(&work.span, actor.worker.role().as_str(), work.round);
        let worked = CatchUnwind(actor.worker.handle(work, &actor.cancel)).instrument(turn).await;
        // a panic in the role's work fails the role, not its actor: the calls its gate
        // made before it stay in the audit and in the reply, and the actor stops
        let reply = match worked {
            Ok(reply) => reply,
            Err(text) => {
                let detail = format!("panicked: {text}");
                panicked = Some(detail.clone());
                actor.worker.crashed(audited, detail)
            }
        };
        // the coordinator stopped waiting (the run ended meanwhile): keep the answer for
        // the report
        if let Err(reply) = respond_to.send(reply) {
            late.push(reply);
        }
        if panicked.is_some() {
            break;
        }
    }
    let mut report = actor.worker.report(late);
    report.panicked = panicked.or(report.panicked);
    report
}

/// What a role actor does with an assignment.
pub(crate) enum Worker {
    /// Planner or reviewer: one model call per assignment.
    Call(Box<CallRole>),
    /// The researcher: the single-agent loop.
    Research(Box<ResearchRole>),
}

impl Worker {
    fn role(&self) -> Role {
        match self {
            Self::Call(c) => c.role,
            Self::Research(_) => Role::Researcher,
        }
    }

    fn handle<'a>(&'a mut self, work: Work, cancel: &'a CancellationToken) -> BoxFuture<'a, RoleReply> {
        // boxed: an idle actor's task then holds only its inbox and its state, not the
        // largest state machine of any role's work (the researcher's loop)
        match self {
            Self::Call(c) => Box::pin(c.handle(work, cancel)),
            Self::Research(r) => Box::pin(r.handle(work)),
        }
    }

    /// Its gate's audit so far.
    fn audit(&self) -> &[AuditEvent] {
        match self {
            Self::Call(c) => c.gate.audit(),
            Self::Research(r) => r.agent.gate.audit(),
        }
    }

    /// The reply of work that panicked: no message, the role failed, and the calls its
    /// gate audited since `audited` (what the gate ran or refused before the panic).
    fn crashed(&self, audited: usize, detail: String) -> RoleReply {
        let since = self.audit().get(audited..).unwrap_or_default();
        let role = self.role();
        RoleReply {
            tools: since.iter().map(|e| e.tool.to_string()).collect(),
            denied: since
                .iter()
                .filter_map(|e| Some(Denial { role, tool: e.tool.to_string(), code: DenialCode::of_gate(e.outcome)? }))
                .collect(),
            stop: Some(RoleStop::Failed(detail)),
            ..RoleReply::default()
        }
    }

    /// The trace and audit, taken before the rest of the role (its model, its gate) is
    /// dropped; a panic while dropping it is reported, not allowed to lose them.
    fn report(mut self, late: Vec<RoleReply>) -> RoleReport {
        let (trace, audit) = match &mut self {
            Self::Call(c) => (std::mem::take(&mut c.trace), c.gate.take_audit()),
            Self::Research(r) => (std::mem::take(&mut r.trace), r.agent.gate.take_audit()),
        };
        let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(self)));
        let panicked = dropped.err().map(|p| format!("panicked: {}", panic_text(p.as_ref())));
        RoleReport { trace, audit, late, panicked }
    }
}

/// A role that answers with one model call: the planner or the reviewer.
pub(crate) struct CallRole {
    /// Which one.
    pub role: Role,
    /// Its model; owned by this role, dropped with it.
    pub client: Box<dyn LlmClient>,
    /// Its gate, scoped to the task named after the role.
    pub gate: ToolGate,
    /// Prices, for the ledger and the worst-case check before the call.
    pub prices: Arc<PriceTable>,
    /// The user the run acts for (one copy per run, shared by the call roles).
    pub user: Arc<str>,
    /// The run's id (one copy per run).
    pub run_id: Arc<str>,
    /// The trusted system prompt.
    pub prompt: &'static str,
    pub trace: Trace,
}

impl CallRole {
    /// A planner or reviewer over `gate`.
    pub(crate) fn new(
        role: Role,
        client: Box<dyn LlmClient>,
        gate: ToolGate,
        prices: Arc<PriceTable>,
        user: Arc<str>,
        run_id: Arc<str>,
    ) -> Self {
        let prompt = if role == Role::Planner { prompts::planner() } else { prompts::reviewer() };
        let mut trace = Trace::new(&run_id);
        trace.role = Some(role.as_str().into());
        Self { role, client, gate, prices, user, run_id, prompt, trace }
    }

    fn task(&self) -> &'static str {
        self.role.as_str()
    }

    /// Writes the tools the model is shown into `out` (empty): its scope, built per call.
    fn specs(&self, out: &mut Vec<ToolSpec>) {
        out.extend(self.gate.policy().tools_for(self.task()).filter_map(|t| self.gate.tools().spec(t)));
    }

    /// Runs one call through the scope check and the gate, as the loop does: a call outside
    /// the scope or with bad arguments is refused before the gate sees it.
    fn tool(
        &mut self,
        step: u32,
        name: &str,
        arguments: serde_json::Value,
        reply: &mut RoleReply,
    ) -> Option<GateOutcome> {
        let code = if !self.gate.policy().allows(self.task(), name) || !self.gate.tools().has(name) {
            Some(DenialCode::NotAllowed)
        } else if self.gate.tools().validate(name, &arguments).is_err() {
            Some(DenialCode::InvalidArguments)
        } else {
            None
        };
        if let Some(code) = code {
            crate::spans::refused("scope_check", crate::spans::Target::ToolCall, code.as_str(), name);
            self.trace.add_check(step, code, "call", name, self.gate.tool_name(name));
            reply.denied.push(Denial { role: self.role, tool: name.to_string(), code });
            return None;
        }
        let id = format!("{}-{}-c{}", self.run_id, self.role, reply.tools.len() + 1);
        let call = ToolCall::new(id, name.to_string(), arguments);
        let outcome = self.gate.run(&call, CallContext::new(self.task(), &self.run_id, &self.user));
        self.trace.add_gate_tool(step, outcome.code(), name, self.gate.tool_name(name), &call.arguments);
        reply.tools.push(name.to_string());
        if let GateOutcome::Refused { code, .. } = &outcome {
            reply.denied.push(Denial { role: self.role, tool: name.to_string(), code: (*code).into() });
        }
        Some(outcome)
    }

    /// One turn: the blocks the model reads, the request and its worst-case cost, the
    /// model call, what it cost, and the tool calls it asked for. A turn that ends without
    /// a message says why in [`RoleReply::stop`].
    async fn handle(&mut self, work: Work, cancel: &CancellationToken) -> RoleReply {
        let mut reply = RoleReply::default();
        if let Err(stop) = self.turn(&work, cancel, &mut reply).await {
            reply.stop = Some(stop);
        }
        reply
    }

    async fn turn(&mut self, work: &Work, cancel: &CancellationToken, reply: &mut RoleReply) -> Result<(), RoleStop> {
        if work.remaining.calls == 0 {
            return Err(RoleStop::Budget(MultiReason::CallLimit));
        }
        let user = self.user_text(work, cancel, reply)?;
        let request = self.request(user);
        let price = self.prices.price(&request.model).map_err(|e| RoleStop::Failed(e.to_string()))?;
        // what the model has in view as it writes its text (results of the calls it asks
        // for below come after it)
        let seen = self.gate.taint().label();
        let input_tokens = request.estimated_input_tokens();
        if price.cost(input_tokens, u64::from(request.max_tokens)) > work.remaining.cost {
            self.trace.add_known(
                work.round,
                TraceKind::Stop,
                "cost_budget",
                &["the worst case of the call is over budget"],
            );
            return Err(RoleStop::Budget(MultiReason::CostBudget));
        }
        let answer = self.ask(&request, input_tokens, work.remaining.time, cancel).await;
        let response = self.paid(answer, price, input_tokens, work.round, reply)?;
        // a `finish` call is how a native tool-calling model may hand over its message
        // (the text above); it is not a tool
        for RequestedCall { name, arguments, .. } in response.tool_calls.into_iter().filter(|c| c.name != FINISH_TOOL) {
            if cancel.is_cancelled() {
                break;
            }
            self.tool(work.round, &name, arguments, reply);
        }
        reply.text = response.text;
        reply.label = seen;
        Ok(())
    }

    /// The untrusted blocks of the turn: the goal (and the last verdict's notes) for the
    /// planner; the finding and the documents it cites, re-read through the reviewer's own
    /// gate, for the reviewer.
    fn user_text(
        &mut self,
        work: &Work,
        cancel: &CancellationToken,
        reply: &mut RoleReply,
    ) -> Result<String, RoleStop> {
        let mut user = String::with_capacity(512);
        match &work.what {
            Assignment::Plan { goal, notes, notes_label } => {
                push_block(&mut user, "goal", "user-input", &[], goal);
                if let Some(n) = notes {
                    self.gate.absorb(*notes_label, "coordinator:notes");
                    push_block(&mut user, "notes", "reviewer:verdict", &[], n);
                }
            }
            Assignment::Review(finding) => {
                let written = ShortText::<32>::concat(&["coordinator:", &finding.id]);
                let source = written.as_str();
                self.gate.absorb(finding.label, source);
                push_block(&mut user, "envelope", source, &[("kind", "finding")], &finding.body.to_text());
                if let Body::Finding(f) = &finding.body {
                    self.reread(&mut user, &f.sources, work.round, cancel, reply)?;
                }
            }
            Assignment::Research(_) => return Err(RoleStop::Failed(format!("the {} cannot research", self.role))),
        }
        Ok(user)
    }

    /// The reviewer re-reads what a finding cites, as its environment re-reads a source
    /// ([`crate::tools::Environment::reread`]; the help desk: a document, not a ticket) and
    /// as far as its own scope can, and adds each result as an observation block
    /// (`tool:TOOL:rN`).
    fn reread(
        &mut self,
        user: &mut String,
        sources: &[String],
        step: u32,
        cancel: &CancellationToken,
        reply: &mut RoleReply,
    ) -> Result<(), RoleStop> {
        for source in sources {
            let Some((tool, arguments)) = self.gate.environment().reread(source) else { continue };
            if cancel.is_cancelled() {
                return Err(RoleStop::Budget(MultiReason::Cancelled));
            }
            if !self.gate.policy().allows(self.task(), tool) {
                continue;
            }
            if let Some(outcome) = self.tool(step, tool, arguments, reply) {
                // `tool:lookup_document:r1`, its id the part after the prefix
                let mut itoa = itoa::Buffer::new();
                let written = ShortText::<48>::concat(&["tool:", tool, ":r", itoa.format(reply.tools.len())]);
                let source = written.as_str();
                let id = source.get("tool:".len() + tool.len() + 1..).unwrap_or_default();
                let (ok, text) = outcome.observation();
                push_block(user, "observation", source, &[("id", id), ("ok", bool_str(ok))], &text);
            }
        }
        Ok(())
    }

    /// The request: the trusted prompt, the untrusted blocks, the tools of the role's scope.
    fn request(&self, user: String) -> LlmRequest {
        let mut tools = Vec::new();
        self.specs(&mut tools);
        LlmRequest {
            model: self.client.model_name(),
            messages: vec![Message::system(self.prompt), Message::user(user)],
            tools,
            // a real model's own allowance (`--planner-max-tokens`, …) wins
            max_tokens: self.client.max_tokens().unwrap_or(MAX_OUTPUT_TOKENS),
        }
    }

    /// The model call, under its `chat` span, raced against the run's token; `None` when
    /// the token fired first. The answer is a message, not a proposal: a client that
    /// rewrites native tool calls into proposal text keeps the reply's own text here.
    async fn ask(
        &mut self,
        request: &LlmRequest,
        input_tokens: u64,
        time_left: std::time::Duration,
        cancel: &CancellationToken,
    ) -> Option<Result<LlmResponse, ModelError>> {
        let chat = crate::spans::chat(&request.model);
        // the token is read first: a cancelled role asks its model nothing more
        let answer = if cancel.is_cancelled() {
            None
        } else {
            // the run's time left is the call's deadline: the call, its retries and their
            // waits end there (`time_budget`)
            self.client.set_deadline(tokio::time::Instant::now().checked_add(time_left));
            let call = chat.in_scope(|| self.client.complete_message(request)).instrument(chat.clone());
            answer_or_cancelled(call, cancel).await
        };
        match &answer {
            None => crate::spans::failed(&chat, "cancelled"),
            Some(Err(ModelError::Failed { code, .. })) => crate::spans::failed(&chat, code),
            Some(Err(_)) => crate::spans::failed(&chat, "crashed"),
            Some(Ok(r)) => {
                let tokens = || r.tokens(|| (input_tokens, estimate_tokens(&r.text)));
                crate::spans::chat_answered(&chat, tokens, !r.tool_calls.is_empty());
            }
        }
        answer
    }

    /// Records the call in the trace and what it cost in `reply` (an answer the server
    /// gave is paid whatever became of it), and gives the response, or why there is none.
    fn paid(
        &mut self,
        answer: Option<Result<LlmResponse, ModelError>>,
        price: Price,
        input_tokens: u64,
        step: u32,
        reply: &mut RoleReply,
    ) -> Result<LlmResponse, RoleStop> {
        let pay = |reply: &mut RoleReply, (input, output): (u64, u64)| {
            reply.cost = price.cost(input, output);
            reply.paid = Summary { calls: 1, input_tokens: input, output_tokens: output, cost: reply.cost };
        };
        match answer {
            None => {
                self.trace.add_known(step, TraceKind::Model, "cancelled", &["model call abandoned"]);
                Err(RoleStop::Budget(MultiReason::Cancelled))
            }
            Some(Err(ModelError::Failed { code, message, answered })) => {
                self.trace.add(step, TraceKind::Model, code, &message);
                reply.calls = 1;
                if let Some(a) = answered.as_deref() {
                    pay(reply, a.tokens(input_tokens));
                }
                Err(if code == "time_budget" {
                    RoleStop::Budget(MultiReason::TimeBudget)
                } else {
                    let cause = format!("{code}: {}", crate::security::redact(&message));
                    RoleStop::Own { reason: StopReason::ModelError, cause: Some(cause) }
                })
            }
            Some(Err(crash)) => Err(RoleStop::Failed(crash.to_string())),
            Some(Ok(response)) => {
                reply.calls = 1;
                pay(reply, response.tokens(|| (input_tokens, estimate_tokens(&response.text))));
                self.trace.add(step, TraceKind::Model, "ok", &response.text);
                Ok(response)
            }
        }
    }
}

fn bool_str(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

/// The researcher: the single-agent loop with its own gate, run once per brief.
pub(crate) struct ResearchRole {
    /// The loop; its gate is the researcher's scoped gate, its cancel token the role's.
    pub agent: Agent,
    /// The run's id (one copy per run).
    pub run_id: Arc<str>,
    /// The loop's own step limit (the run's remaining calls may lower it).
    pub max_steps: u32,
    /// Every line of every loop run, in order.
    pub trace: Trace,
}

impl ResearchRole {
    /// A researcher over `agent`.
    pub(crate) fn new(agent: Agent, run_id: Arc<str>) -> Self {
        let mut trace = Trace::new(&run_id);
        trace.role = Some(Role::Researcher.as_str().into());
        let max_steps = agent.budget.max_steps;
        Self { agent, run_id, max_steps, trace }
    }

    async fn handle(&mut self, work: Work) -> RoleReply {
        let mut reply = RoleReply::default();
        // the brief's question, read where it is (the assignment holds the envelope)
        let question = match &work.what {
            Assignment::Research(env) => match &env.body {
                Body::Brief(b) => {
                    self.agent.gate.absorb(env.label, ShortText::<32>::concat(&["coordinator:", &env.id]).as_str());
                    b.question.as_str()
                }
                _ => "",
            },
            _ => "",
        };
        if question.is_empty() {
            reply.stop = Some(RoleStop::Failed("the researcher needs a brief".into()));
            return reply;
        }
        let capped = work.remaining.calls < self.max_steps;
        let budget = &mut self.agent.budget;
        budget.max_steps = self.max_steps.min(work.remaining.calls);
        budget.max_seconds = work.remaining.time;
        budget.max_cost = work.remaining.cost;
        let run = match self.agent.run(question, &self.run_id).await {
            Ok(run) => run,
            Err(e) => {
                reply.stop = Some(RoleStop::Failed(e.to_string()));
                return reply;
            }
        };
        let reason = run.reason();
        let crate::agent::Run { state, mut progress } = run;
        reply.calls = state.step();
        reply.paid = progress.ledger.summary();
        reply.cost = reply.paid.cost;
        reply.tools = std::mem::take(&mut progress.calls);
        reply.denied = refusals(&progress.trace, Role::Researcher);
        append(&mut self.trace.lines, std::mem::take(&mut progress.trace.lines));
        // the evidence of a finding is what the researcher cited as its finish's support:
        // observations of this run, each checked by the state rules (a successful read with
        // that id in this run's record); reads it did not cite back nothing it sends. The
        // answer and the cited ids move out of the final state.
        let (status, mut observations) = state.into_status_and_observations();
        if let crate::agent::Status::Done { answer, sources } = status {
            reply.text = answer;
            observations.retain(|o| sources.iter().any(|c| *c == o.id));
        }
        reply.observations = observations;
        reply.label = self.agent.gate.taint().label();
        match reason {
            StopReason::Done => {}
            StopReason::StepBudget if capped => reply.stop = Some(RoleStop::Budget(MultiReason::CallLimit)),
            StopReason::TimeBudget => reply.stop = Some(RoleStop::Budget(MultiReason::TimeBudget)),
            StopReason::CostBudget => reply.stop = Some(RoleStop::Budget(MultiReason::CostBudget)),
            StopReason::Cancelled => reply.stop = Some(RoleStop::Budget(MultiReason::Cancelled)),
            other => {
                let cause = match (other, self.agent.model_failure.take()) {
                    (StopReason::ModelError, Some((code, message))) => Some(format!("{code}: {message}")),
                    _ => None,
                };
                reply.stop = Some(RoleStop::Own { reason: other, cause });
            }
        }
        reply
    }
}

/// Appends `more` to `list`, taking `more` as it is (no copy) when `list` is still empty.
pub(crate) fn append<T>(list: &mut Vec<T>, mut more: Vec<T>) {
    if list.is_empty() {
        std::mem::swap(list, &mut more);
    } else {
        list.append(&mut more);
    }
}

/// The tool calls a loop's trace shows refused: by the loop's own check (`call <tool>`
/// lines) or by the gate.
pub(crate) fn refusals(trace: &Trace, role: Role) -> Vec<Denial> {
    trace
        .lines
        .iter()
        .filter_map(|l| {
            let code = DenialCode::from_code(&l.code)?;
            let tool = match (l.kind, code) {
                (
                    TraceKind::Check,
                    DenialCode::NotAllowed | DenialCode::InvalidArguments | DenialCode::RepeatedCall,
                ) => l.detail.strip_prefix("call ")?,
                (TraceKind::Tool, DenialCode::RepeatedCall) => return None,
                (TraceKind::Tool, _) => l.detail.as_str(),
                _ => return None,
            };
            Some(Denial { role, tool: tool.to_string(), code })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Env;
    use crate::label::Label;
    use crate::multi::MultiEnv;
    use crate::multi::behaviours::{FakePlanner, FakeReviewer, PlannerKind, ReviewerKind};
    use crate::multi::envelope::{Finding, Kind};
    use crate::world::World;
    use std::sync::Mutex;

    /// A fake that keeps a copy of every request it is asked.
    struct Recorder<C> {
        inner: C,
        seen: Arc<Mutex<Vec<LlmRequest>>>,
    }

    impl<C: LlmClient> LlmClient for Recorder<C> {
        fn model(&self) -> &str {
            self.inner.model()
        }

        fn complete<'a>(&'a mut self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
            self.seen.lock().unwrap().push(request.clone());
            self.inner.complete(request)
        }
    }

    use crate::model::LlmResponse;

    /// What one assignment to a fresh call role gave: its request, its reply's parts,
    /// its gate's audit and its trace.
    type Seen = (LlmRequest, String, Vec<String>, Vec<Denial>, Vec<AuditEvent>, Trace);

    async fn turn(role: Role, what: Assignment) -> Seen {
        let env = Env::bundled().unwrap();
        let multi = MultiEnv::new(&env).unwrap();
        let gate = ToolGate::new(multi.scopes.policy(role).cloned().unwrap(), World::new(env.world.clone()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let client: Box<dyn LlmClient> = if role == Role::Planner {
            Box::new(Recorder { inner: FakePlanner { kind: PlannerKind::Sensible }, seen: seen.clone() })
        } else {
            Box::new(Recorder { inner: FakeReviewer { kind: ReviewerKind::Sensible }, seen: seen.clone() })
        };
        let mut call = CallRole::new(role, client, gate, env.prices.clone(), Arc::from("kwame"), Arc::from("run-7"));
        let remaining = Remaining { calls: 10, cost: Decimal::from(100), time: std::time::Duration::from_secs(60) };
        let work = Work { what, remaining, round: 1, span: tracing::Span::none() };
        let reply = call.handle(work, &CancellationToken::new()).await;
        let request = seen.lock().unwrap().pop().unwrap();
        (request, reply.text, reply.tools, reply.denied, call.gate.take_audit(), std::mem::take(&mut call.trace))
    }

    fn review(claim: &str, sources: &[&str]) -> Assignment {
        let body = Body::Finding(Finding {
            claim: claim.to_string(),
            sources: sources.iter().map(|s| s.to_string()).collect(),
        });
        let envelope = Envelope {
            id: "m2".into(),
            sender: Role::Researcher,
            recipient: Role::Reviewer,
            kind: Kind::Finding,
            depth: 2,
            body,
            label: Label::TRUSTED,
        };
        Assignment::Review(Arc::new(envelope))
    }

    fn plan(goal: &str) -> Assignment {
        Assignment::Plan { goal: Arc::from(goal), notes: None, notes_label: Label::TRUSTED }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_turn_gives_the_same_request_call_and_lines_whatever_ran_before_it() {
        // each assignment first on its own, then again after other assignments with
        // longer, different texts, arguments and ids have run on the same thread: the
        // request the model sees, the reply, the gate's audit (call ids, fingerprints) and
        // the trace are the same, byte for byte (a turn carries nothing over)
        let assignments = || {
            vec![
                (Role::Reviewer, review("kc-returns-v3 is titled Returns and refunds (v3)", &["kc-returns-v3"])),
                (
                    Role::Reviewer,
                    review(
                        "T-601 status is open; a \"quoted\" <claim> & more, é",
                        &["T-601", "kc-warranty-v2", "kc-nope-v0", "kc-returns-v3"],
                    ),
                ),
                (Role::Planner, plan("Status of T-601 and our refund policy? <goal> \"x\" & y")),
                (Role::Reviewer, review("x", &["kc-battery-v1"])),
                (Role::Planner, plan("a")),
                (Role::Reviewer, review("nothing to re-read", &["T-601"])),
            ]
        };
        let mut fresh = Vec::new();
        for (role, what) in assignments() {
            fresh.push(turn(role, what).await);
        }
        for round in 0..2 {
            let mut order: Vec<usize> = (0..fresh.len()).collect();
            if round == 1 {
                order.reverse();
            }
            let all = assignments();
            let mut all: Vec<Option<(Role, Assignment)>> = all.into_iter().map(Some).collect();
            for i in order {
                let (role, what) = all[i].take().unwrap();
                let kept = turn(role, what).await;
                assert_eq!(kept, fresh[i], "assignment {i}, round {round}");
            }
        }
        // the look-ups did run (and one was refused by the world): the calls are compared
        assert!(fresh[1].4.len() >= 3, "{:?}", fresh[1].4);
        assert_eq!(fresh[1].2, ["lookup_document"; 3]);
    }
}
