//! What the loop asks for its next proposal: the [`Decider`] trait, [`ModelDecider`]
//! (a model client behind it) and [`FixedPlan`] (the deterministic workflow: step n of the
//! plan is the only thing that can happen at step n; afterwards it finishes citing the
//! successful observations).

use serde_json::Value;
use std::borrow::Cow;
use tokio_util::sync::CancellationToken;

use super::AgentState;
use crate::future::BoxFuture;
use crate::model::fake::{call, finish};
use crate::model::{LlmClient, LlmRequest, LlmResponse, ModelError};

/// What the agent loop asks for the next proposal.
pub trait Decider: Send {
    /// The model name written into requests.
    fn model(&self) -> &str;
    /// The model name as a request holds it: the default copies [`Decider::model`]; a
    /// decider whose name is a fixed string lends it instead.
    fn model_name(&self) -> Cow<'static, str> {
        Cow::Owned(self.model().to_owned())
    }
    /// True when calls cost nothing and are not recorded in the ledger (e.g. a fixed plan).
    fn is_free(&self) -> bool {
        false
    }
    /// Proposes the next step as text.
    fn decide<'a>(
        &'a mut self,
        state: &'a AgentState,
        request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ModelError>>;
    /// Ties the decider's model client to a cancellation token (see
    /// [`LlmClient::bind_cancel`]); the default does nothing.
    fn bind_cancel(&mut self, _token: &CancellationToken) {}
    /// Hands the decider's model client the run's deadline (see
    /// [`LlmClient::set_deadline`]); the default does nothing.
    fn set_deadline(&mut self, _deadline: Option<tokio::time::Instant>) {}
    /// The output allowance the decider's model client was configured with (see
    /// [`LlmClient::max_tokens`]); `None` (the default) leaves it to the run's budget.
    fn max_tokens(&self) -> Option<u32> {
        None
    }
}

/// A decider that asks a model client.
pub struct ModelDecider {
    /// The client; owned by this decider and dropped with it.
    pub client: Box<dyn LlmClient>,
}

impl ModelDecider {
    /// Wraps a client.
    pub fn new(client: impl LlmClient + 'static) -> Self {
        Self { client: Box::new(client) }
    }
}

impl std::fmt::Debug for ModelDecider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelDecider").field("model", &self.client.model()).finish()
    }
}

impl Decider for ModelDecider {
    fn model(&self) -> &str {
        self.client.model()
    }

    fn model_name(&self) -> Cow<'static, str> {
        self.client.model_name()
    }

    fn decide<'a>(
        &'a mut self,
        _state: &'a AgentState,
        request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        self.client.complete(request)
    }

    fn bind_cancel(&mut self, token: &CancellationToken) {
        self.client.bind_cancel(token);
    }

    fn set_deadline(&mut self, deadline: Option<tokio::time::Instant>) {
        self.client.set_deadline(deadline);
    }

    fn max_tokens(&self) -> Option<u32> {
        self.client.max_tokens()
    }
}

/// A plan of tool calls run in order, with no model behind it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FixedPlan {
    /// The calls, in order: tool name and arguments.
    pub calls: Vec<(String, Value)>,
}

impl FixedPlan {
    /// A plan.
    pub fn new(calls: Vec<(String, Value)>) -> Self {
        Self { calls }
    }
}

impl Decider for FixedPlan {
    fn model(&self) -> &str {
        "fixed-plan"
    }

    fn model_name(&self) -> Cow<'static, str> {
        Cow::Borrowed("fixed-plan")
    }

    fn is_free(&self) -> bool {
        true
    }

    fn decide<'a>(
        &'a mut self,
        state: &'a AgentState,
        _request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        let answer = self.step_of(state);
        Box::pin(std::future::ready(answer))
    }
}

impl FixedPlan {
    /// Step n of the plan, or the finish after it.
    fn step_of(&self, state: &AgentState) -> Result<LlmResponse, ModelError> {
        let step = usize::try_from(state.step()).unwrap_or(usize::MAX);
        let text = match step.checked_sub(1).and_then(|i| self.calls.get(i)) {
            Some((tool, args)) => call(tool, args.clone()),
            None => {
                let ok: Vec<String> = state.observations().iter().filter(|o| o.ok).map(|o| o.id.to_string()).collect();
                let tail = ok[ok.len().saturating_sub(5)..].to_vec();
                finish(&format!("Plan finished after {} successful steps.", ok.len()), &tail)
            }
        };
        Ok(LlmResponse::text(text, "fixed-plan"))
    }
}
