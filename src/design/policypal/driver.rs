//! The PolicyPal loop itself: budgets, the model call, the reply's calls (checks, soft
//! repeats, the search guard, the gate), the card, and the decisions on a card.

use serde_json::Value;
use std::collections::BTreeMap;

use super::{Card, GIVE_UP, NO_FURTHER_RESULTS, Pal, PalReply, PalRun};
use crate::agent::{AgentError, AgentState, Progress, Proposal, Run, StopReason, TraceKind, parse_proposal};
use crate::cost::{UsageRecord, estimate_tokens};
use crate::design::DesignError;
use crate::gate::CallContext;
use crate::gate::Observation;
use crate::gate::{Access, ApprovalToken, GateOutcome};
use crate::model::blocks::push_block;
use crate::model::http::{FINISH_TOOL, proposal_of};
use crate::model::{LlmRequest, LlmResponse, Message, ModelError, RequestedCall};
use crate::tools::{ToolCall, fingerprint};

/// Longest call id a model may give.
const MAX_CALL_ID: usize = 64;

/// The conversation and bookkeeping a run carries between turns.
struct Turns {
    messages: Vec<Message>,
    earlier: BTreeMap<String, String>,
}

/// What a reply without tool calls came to.
enum Finish {
    /// An accepted finish.
    Done(AgentState),
    /// Refused; the rejection is recorded and the loop goes on.
    Rejected(AgentState),
}

/// What a reply with tool calls came to.
enum Turn {
    /// Every call handled; true when at least one succeeded.
    Continue(AgentState, bool),
    /// A side effect was parked: the run waits on its card.
    Parked(Box<PalRun>),
}

/// How one call of a reply ended: its observation and whether it succeeded.
struct Handled {
    state: AgentState,
    obs: Observation,
}

fn block(obs: &Observation) -> String {
    let source = if obs.tool == "rejected" {
        format!("loop:rejected:{}", obs.id)
    } else {
        format!("tool:{}:{}", obs.tool, obs.id)
    };
    let mut out = String::new();
    push_block(
        &mut out,
        "observation",
        &source,
        &[("id", &obs.id), ("ok", if obs.ok { "true" } else { "false" })],
        &obs.text,
    );
    out
}

fn valid_ids(calls: &[RequestedCall]) -> bool {
    let mut seen = std::collections::BTreeSet::new();
    calls.iter().all(|c| !c.id.is_empty() && c.id.len() <= MAX_CALL_ID && seen.insert(c.id.as_str()))
}

impl Pal {
    /// Runs `goal` from the start.
    ///
    /// # Errors
    /// [`AgentError`] when the run cannot be carried out (bad goal or run id, an unpriced
    /// model, a crashed client). Every other ending is a [`PalRun`] with a named reason.
    pub async fn run(&mut self, goal: &str, run_id: &str) -> Result<PalRun, AgentError> {
        let who = (run_id, self.session.user_id.as_str(), self.task.as_str(), goal);
        let state = AgentState::with_limits(who, self.goal_chars, self.observation_chars)?;
        let progress = Progress::new(run_id);
        let mut user = String::new();
        push_block(&mut user, "goal", "user-input", &[], goal);
        let turns = Turns {
            messages: vec![Message::system(self.system_prompt.clone()), Message::user(user)],
            earlier: BTreeMap::new(),
        };
        if self.session.user_id.is_empty() {
            return self.give_up(state, progress, turns, StopReason::Unauthenticated);
        }
        if !self.session.tasks.contains(&self.task) {
            return self.give_up(state, progress, turns, StopReason::ForbiddenTask);
        }
        self.prices.price(self.client.model())?;
        self.drive(state, progress, turns).await
    }

    /// Confirms the run's card as `by`: runs exactly the card's arguments through the
    /// gate, records the result as that call's result, and continues the loop.
    ///
    /// # Errors
    /// [`DesignError::NoCard`] when the run waits on no card; [`DesignError::NotYourCard`]
    /// when `by` is not the run's user; [`DesignError::Gate`] when the gate refuses the
    /// decision (already cancelled); otherwise as [`Pal::run`].
    pub async fn confirm(&mut self, parked: PalRun, by: &str) -> Result<PalRun, DesignError> {
        let card = self.own_card(&parked, by)?;
        let shown = ToolCall::new(card.call_id.clone(), card.tool.clone(), card.arguments.clone());
        let token = ApprovalToken::for_card(parked.run.state.run_id(), &card.pending_id, &shown, by);
        let outcome = self.gate.execute_approved_async(&token).await?;
        let (ok, text) = outcome.observation();
        self.decided(parked, &card, "confirmed", Some(outcome.code().as_str()), ok, &text).await
    }

    /// Continues the run after its card was filed as an approval request and approved:
    /// `outcome` is what the approval queue's token ran (exactly the card's call, through
    /// this run's gate, once); it becomes that call's result and the loop continues. The
    /// model is not asked again in between.
    ///
    /// # Errors
    /// [`DesignError::NoCard`] when the run waits on no card; otherwise as [`Pal::run`].
    pub async fn approved(&mut self, parked: PalRun, by: &str, outcome: &GateOutcome) -> Result<PalRun, DesignError> {
        let card = parked.card().cloned().ok_or(DesignError::NoCard)?;
        if parked.run.state.pending_id() != Some(card.pending_id.as_str()) {
            return Err(DesignError::NoCard);
        }
        let (ok, text) = outcome.observation();
        tracing::debug!(target: "rolegate::design", approver = by, pending = %card.pending_id, "card approved");
        self.decided(parked, &card, "approved", Some(outcome.code().as_str()), ok, &text).await
    }

    /// Cancels the run's card as `by`: nothing runs, "cancelled by user" becomes that
    /// call's result, and the loop continues so the model can answer without it.
    ///
    /// # Errors
    /// As [`Pal::confirm`].
    pub async fn cancel_card(&mut self, parked: PalRun, by: &str) -> Result<PalRun, DesignError> {
        let card = self.own_card(&parked, by)?;
        self.gate.withdraw_parked(&card.pending_id, by)?;
        self.decided(parked, &card, "cancelled", None, false, "cancelled by user").await
    }

    fn own_card(&self, parked: &PalRun, by: &str) -> Result<Card, DesignError> {
        let card = parked.card().cloned().ok_or(DesignError::NoCard)?;
        if parked.run.state.pending_id() != Some(card.pending_id.as_str()) {
            return Err(DesignError::NoCard);
        }
        if by != self.session.user_id {
            return Err(DesignError::NotYourCard(by.to_string()));
        }
        Ok(card)
    }

    async fn decided(
        &mut self,
        parked: PalRun,
        card: &Card,
        decision: &'static str,
        tool_code: Option<&'static str>,
        ok: bool,
        text: &str,
    ) -> Result<PalRun, DesignError> {
        let PalRun { run: Run { state, mut progress }, mut messages, earlier, .. } = parked;
        let step = state.step();
        progress.trace.add(step, TraceKind::Human, decision, &format!("{} {}", card.pending_id, card.tool));
        if let Some(code) = tool_code {
            progress.trace.add(step, TraceKind::Tool, code, &card.tool);
        }
        let (state, obs) = state.resume()?.observe(ok, &card.tool, text)?;
        let mut earlier = earlier;
        let asked = messages.iter().flat_map(|m| m.tool_calls.iter()).find(|c| c.id == card.call_id);
        if let Some(c) = asked {
            earlier.insert(fingerprint(&c.name, &c.arguments), obs.id.to_string());
        }
        messages.push(Message::tool(card.call_id.clone(), block(&obs)));
        Ok(self.drive(state, progress, Turns { messages, earlier }).await?)
    }

    async fn drive(
        &mut self,
        mut state: AgentState,
        mut progress: Progress,
        mut turns: Turns,
    ) -> Result<PalRun, AgentError> {
        let run_id = state.run_id().to_string();
        let started = self.clock.now();
        let worked_before = progress.worked;
        loop {
            progress.worked = worked_before + self.clock.now().saturating_sub(started);
            if self.cancel.is_cancelled() {
                return self.give_up(state, progress, turns, StopReason::Cancelled);
            }
            if self.durable.is_on() {
                self.durable.agent_step(&state, &progress, &[]).await.map_err(AgentError::Checkpoint)?;
            }
            let request = self.request(&turns.messages);
            if let Some(reason) = self.over_budget(&state, &request, &progress) {
                return self.give_up(state, progress, turns, reason);
            }
            state = state.next_step()?;
            let step = state.step();
            // a cancel abandons a model call in flight, and a reply that arrives after a
            // cancel runs none of its calls
            let cancel = self.cancel.clone();
            // the time left is the call's deadline: the call, its retries and their waits
            // end there (`time_budget`)
            let left = self.budget.deadline.saturating_sub(progress.worked);
            self.client.set_deadline(tokio::time::Instant::now().checked_add(left));
            let answer = tokio::select! {
                biased;
                () = cancel.cancelled() => None,
                r = self.client.complete(&request) => Some(r),
            };
            let response = match answer {
                None => {
                    progress.trace.add(step, TraceKind::Model, "cancelled", "model call abandoned");
                    return self.give_up(state, progress, turns, StopReason::Cancelled);
                }
                Some(Ok(r)) if self.cancel.is_cancelled() => {
                    progress.ledger.add(self.usage(&request, &r, &run_id)?);
                    progress.trace.add(
                        step,
                        TraceKind::Model,
                        "cancelled",
                        "reply after the cancel: nothing in it runs",
                    );
                    return self.give_up(state, progress, turns, StopReason::Cancelled);
                }
                Some(Ok(r)) => r,
                Some(Err(ModelError::Failed { code, message, answered })) => {
                    // an answer the server gave is paid whatever became of it
                    if let Some(a) = answered.as_deref() {
                        let (input, output) = a.tokens(request.estimated_input_tokens());
                        progress.ledger.add(self.priced(&request, input, output, &run_id)?);
                    }
                    progress.trace.add(step, TraceKind::Model, code, &message);
                    let reason = if code == "time_budget" { StopReason::TimeBudget } else { StopReason::ModelError };
                    return self.give_up(state, progress, turns, reason);
                }
                Some(Err(crash)) => return Err(AgentError::Model(crash)),
            };
            progress.ledger.add(self.usage(&request, &response, &run_id)?);
            // a lone `finish` call is the answer, as a finish in text is
            let finish_call = match response.tool_calls.as_slice() {
                [only] if only.name == FINISH_TOOL => Some(only),
                _ => None,
            };
            let ok = if response.tool_calls.is_empty() || finish_call.is_some() {
                match self.finish(state, &mut progress, &mut turns, &response, finish_call)? {
                    Finish::Done(done) => {
                        progress.worked = worked_before + self.clock.now().saturating_sub(started);
                        return Ok(self.end(done, progress, turns));
                    }
                    Finish::Rejected(s) => {
                        state = s;
                        false
                    }
                }
            } else {
                match self.calls(state, &mut progress, &mut turns, &response).await? {
                    Turn::Continue(s, any_ok) => {
                        state = s;
                        any_ok
                    }
                    Turn::Parked(parked) => return Ok(*parked),
                }
            };
            progress.bad = if ok { 0 } else { progress.bad + 1 };
            if progress.bad >= self.budget.max_stuck {
                return self.give_up(state, progress, turns, StopReason::Stuck);
            }
        }
    }

    /// A reply with no tool calls, or with a lone `finish` call (`call`), must be a
    /// supported finish.
    fn finish(
        &self,
        state: AgentState,
        progress: &mut Progress,
        turns: &mut Turns,
        response: &LlmResponse,
        call: Option<&RequestedCall>,
    ) -> Result<Finish, AgentError> {
        let step = state.step();
        let proposal = call.map_or_else(|| response.text.clone(), proposal_of);
        let code = match parse_proposal(&proposal) {
            Ok(Proposal::Finish { answer, sources }) => {
                let good: Vec<&str> = state.observations().iter().filter(|o| o.ok).map(|o| o.id.as_str()).collect();
                // an answer a person is shown holds no hidden character (see agent::finish)
                if !answer.trim().is_empty()
                    && !crate::security::has_hidden(&answer)
                    && !sources.is_empty()
                    && sources.iter().all(|s| good.contains(&s.as_str()))
                {
                    progress.trace.add(step, TraceKind::Model, "ok", &proposal);
                    progress.trace.add(step, TraceKind::Check, "ok", "finish");
                    return Ok(Finish::Done(state.finish(&answer, &sources)?));
                }
                "unsupported_finish"
            }
            Ok(Proposal::Call { .. }) => "not_native",
            Err(e) => e.as_str(),
        };
        progress.trace.add(step, TraceKind::Model, code, &proposal);
        let (state, obs) = state.observe(false, "rejected", &format!("rejected: {code}"))?;
        match call {
            // a refused `finish` call is answered as the call it was
            Some(c) => {
                turns.messages.push(Message::assistant(response.text.clone(), vec![c.clone()]));
                turns.messages.push(Message::tool(c.id.clone(), block(&obs)));
            }
            None => {
                turns.messages.push(Message::assistant(response.text.clone(), Vec::new()));
                turns.messages.push(Message::user(block(&obs)));
            }
        }
        Ok(Finish::Rejected(state))
    }

    /// Runs every call of a reply, or parks its side effect and stops with a card.
    async fn calls(
        &mut self,
        state: AgentState,
        progress: &mut Progress,
        turns: &mut Turns,
        response: &LlmResponse,
    ) -> Result<Turn, AgentError> {
        let step = state.step();
        let calls = &response.tool_calls;
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        let code = if calls.len() > self.budget.max_calls_per_reply {
            "too_many_calls"
        } else if !valid_ids(calls) {
            "bad_call_id"
        } else if calls.iter().any(|c| c.name == FINISH_TOOL) {
            // a finish rests on results it has seen: not on calls of the same reply
            "finish_with_calls"
        } else {
            "ok"
        };
        progress.trace.add(step, TraceKind::Model, code, &format!("{} call(s): {}", calls.len(), names.join(", ")));
        if code != "ok" {
            turns.messages.push(Message::assistant(response.text.clone(), Vec::new()));
            let (state, obs) = state.observe(false, "rejected", &format!("rejected: {code}"))?;
            turns.messages.push(Message::user(block(&obs)));
            return Ok(Turn::Continue(state, false));
        }
        turns.messages.push(Message::assistant(response.text.clone(), calls.clone()));
        let mut state = state;
        let mut any_ok = false;
        // A side effect is looked for first: when the gate parks it, nothing else runs.
        let effect = calls.iter().position(|c| self.is_effect(c) && self.precheck(c, turns).is_none());
        let mut skip = None;
        if let Some(i) = effect {
            let call = &calls[i];
            let outcome = self.send(call, &state, progress, i).await;
            if let GateOutcome::NeedsApproval { pending_id } = &outcome {
                let arguments = self.gate.pending().get(pending_id).map_or(Value::Null, |p| p.call.arguments.clone());
                for (j, other) in calls.iter().enumerate().filter(|(j, _)| *j != i) {
                    let text =
                        format!("not run: waiting for the user to confirm {}; ask again if still needed", call.name);
                    progress.trace.add(step, TraceKind::Check, "deferred", &other.name);
                    let (s, obs) = state.observe(false, &other.name, &text)?;
                    state = s;
                    turns.messages.push(Message::tool(calls[j].id.clone(), block(&obs)));
                }
                let card = Card {
                    pending_id: pending_id.clone(),
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    arguments,
                    text: response.text.clone(),
                };
                let parked = state.wait(pending_id)?;
                let run = self.end(
                    parked,
                    std::mem::take(progress),
                    Turns {
                        messages: std::mem::take(&mut turns.messages),
                        earlier: std::mem::take(&mut turns.earlier),
                    },
                );
                return Ok(Turn::Parked(Box::new(PalRun { reply: PalReply::Confirm(card), ..run })));
            }
            let h = self.observe_outcome(state, call, outcome, turns)?;
            state = h.state;
            any_ok |= h.obs.ok;
            skip = Some(i);
        }
        for (i, call) in calls.iter().enumerate() {
            if skip == Some(i) {
                continue;
            }
            let h = self.handle(state, call, progress, turns, i).await?;
            state = h.state;
            any_ok |= h.obs.ok;
        }
        Ok(Turn::Continue(state, any_ok))
    }

    fn is_effect(&self, call: &RequestedCall) -> bool {
        self.gate.policy().allows(&self.task, &call.name)
            && self.gate.tools().has(&call.name)
            && self.gate.policy().access_of(&call.name) == Access::Write
    }

    /// The loop's own checks, in order: allowlist, schema, exact repeat, search guard.
    /// `Some((code, text))` when the call must not reach the gate.
    fn precheck(&self, call: &RequestedCall, turns: &Turns) -> Option<(&'static str, String)> {
        if !self.gate.policy().allows(&self.task, &call.name) || !self.gate.tools().has(&call.name) {
            return Some(("not_allowed", format!("error not_allowed: {} is not available in this task", call.name)));
        }
        if let Err(e) = self.gate.tools().validate(&call.name, &call.arguments) {
            return Some(("invalid_arguments", format!("error invalid_arguments: {e}")));
        }
        if let Some(oid) = turns.earlier.get(&fingerprint(&call.name, &call.arguments)) {
            return Some((
                "repeated_call",
                format!("error repeated_call: this exact call already ran; use its earlier result {oid}"),
            ));
        }
        None
    }

    fn guard_hit(&self, call: &RequestedCall, progress: &Progress) -> bool {
        self.search_guard.as_ref().is_some_and(|g| {
            g.tools.contains(&call.name)
                && progress.calls.iter().filter(|c| g.tools.contains(c.as_str())).count() >= g.max_searches as usize
        })
    }

    async fn handle(
        &mut self,
        state: AgentState,
        call: &RequestedCall,
        progress: &mut Progress,
        turns: &mut Turns,
        index: usize,
    ) -> Result<Handled, AgentError> {
        let step = state.step();
        let refusal = self
            .precheck(call, turns)
            .or_else(|| self.guard_hit(call, progress).then(|| ("no_further_results", NO_FURTHER_RESULTS.to_string())));
        if let Some((code, text)) = refusal {
            progress.trace.add(step, TraceKind::Check, code, &call.name);
            let (state, obs) = state.observe(false, &call.name, &text)?;
            turns.messages.push(Message::tool(call.id.clone(), block(&obs)));
            return Ok(Handled { state, obs });
        }
        let outcome = self.send(call, &state, progress, index).await;
        self.observe_outcome(state, call, outcome, turns)
    }

    /// Sends a checked call to the gate and records it; a tool that answers later (an MCP
    /// server's) is awaited under the gate's per-call timeout.
    async fn send(
        &mut self,
        call: &RequestedCall,
        state: &AgentState,
        progress: &mut Progress,
        index: usize,
    ) -> GateOutcome {
        let step = state.step();
        progress.trace.add(step, TraceKind::Check, "ok", &call.name);
        let tool_call = ToolCall::new(
            format!("{}-c{step}-{}", state.run_id(), index + 1),
            call.name.clone(),
            call.arguments.clone(),
        );
        progress.seen.insert(tool_call.fingerprint());
        progress.calls.push(call.name.clone());
        let cx = CallContext::new(&self.task, state.run_id(), &self.session.user_id);
        let outcome = self.gate.run_async(&tool_call, cx).await;
        progress.trace.add_gate_tool(
            step,
            outcome.code(),
            &call.name,
            self.gate.tool_name(&call.name),
            &call.arguments,
        );
        outcome
    }

    fn observe_outcome(
        &self,
        state: AgentState,
        call: &RequestedCall,
        outcome: GateOutcome,
        turns: &mut Turns,
    ) -> Result<Handled, AgentError> {
        let (ok, text) = outcome.observation();
        let fact = outcome.fact(self.gate.environment(), &call.name);
        let (state, obs) = state.observe_with_fact(ok, &call.name, &text, fact)?;
        turns.earlier.insert(fingerprint(&call.name, &call.arguments), obs.id.to_string());
        turns.messages.push(Message::tool(call.id.clone(), block(&obs)));
        Ok(Handled { state, obs })
    }

    fn over_budget(&self, state: &AgentState, request: &LlmRequest, progress: &Progress) -> Option<StopReason> {
        let b = &self.budget;
        if state.step() >= b.max_steps {
            return Some(StopReason::StepBudget);
        }
        if progress.worked >= b.deadline {
            return Some(StopReason::TimeBudget);
        }
        let s = progress.ledger.summary();
        // saturating: a server may claim any usage, and an absurd claim must stop the run
        let worst = s
            .input_tokens
            .saturating_add(s.output_tokens)
            .saturating_add(request.estimated_input_tokens())
            .saturating_add(u64::from(request.max_tokens));
        if worst > b.max_tokens {
            // the token budget is this design's cost budget
            return Some(StopReason::CostBudget);
        }
        None
    }

    fn usage(&self, request: &LlmRequest, response: &LlmResponse, run_id: &str) -> Result<UsageRecord, AgentError> {
        let (input, output) = response.tokens(|| {
            let calls = serde_json::to_string(&response.tool_calls).unwrap_or_default();
            (request.estimated_input_tokens(), estimate_tokens(&response.text) + estimate_tokens(&calls))
        });
        self.priced(request, input, output, run_id)
    }

    /// The usage record of a call of `request` that used `input` and `output` tokens.
    fn priced(&self, request: &LlmRequest, input: u64, output: u64, run_id: &str) -> Result<UsageRecord, AgentError> {
        let price = self.prices.price(&request.model)?;
        Ok(UsageRecord::priced(run_id, request.model.clone(), price, input, output))
    }

    /// The next request: the whole conversation so far, and the task's tools natively.
    pub fn request(&self, messages: &[Message]) -> LlmRequest {
        let tools = self.gate.policy().tools_for(&self.task).filter_map(|t| self.gate.tools().spec(t)).collect();
        LlmRequest {
            model: self.client.model_name(),
            messages: messages.to_vec(),
            tools,
            // a real model's own allowance wins; the token budget checks the call against it
            max_tokens: self.client.max_tokens().unwrap_or(self.budget.max_output_tokens),
        }
    }

    fn give_up(
        &self,
        state: AgentState,
        progress: Progress,
        turns: Turns,
        reason: StopReason,
    ) -> Result<PalRun, AgentError> {
        let stopped = state.stop(reason)?;
        let run = self.end(stopped, progress, turns);
        Ok(PalRun { reply: PalReply::GaveUp { message: GIVE_UP.to_string(), reason }, ..run })
    }

    fn end(&self, state: AgentState, mut progress: Progress, turns: Turns) -> PalRun {
        let code = state.reason().map_or("running", StopReason::as_str);
        progress.trace.add(state.step(), TraceKind::Stop, code, &format!("status={}", state.status().name()));
        progress.tool_counts = self.gate.counts_of(state.run_id());
        let reply = match (state.answer(), state.reason()) {
            (Some(a), _) => PalReply::Answer { text: a.to_string(), sources: state.sources().to_vec() },
            (None, r) => PalReply::GaveUp { message: GIVE_UP.to_string(), reason: r.unwrap_or(StopReason::Cancelled) },
        };
        PalRun { run: Run { state, progress }, messages: turns.messages, reply, earlier: turns.earlier }
    }
}
