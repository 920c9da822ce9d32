//! `FixedPlan`: the deterministic workflow. Step n of the plan is the only thing that can
//! happen at step n; afterwards it finishes citing the successful observations.

use serde_json::Value;

use super::fake::{call, finish};
use super::{BoxFuture, Decider, LlmRequest, LlmResponse, ModelError};
use crate::agent::AgentState;

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

    fn is_free(&self) -> bool {
        true
    }

    fn decide<'a>(
        &'a mut self,
        state: &'a AgentState,
        _request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        let step = usize::try_from(state.step()).unwrap_or(usize::MAX);
        let text = match step.checked_sub(1).and_then(|i| self.calls.get(i)) {
            Some((tool, args)) => call(tool, args.clone()),
            None => {
                let ok: Vec<String> = state.observations().iter().filter(|o| o.ok).map(|o| o.id.clone()).collect();
                let tail = ok[ok.len().saturating_sub(5)..].to_vec();
                finish(&format!("Plan finished after {} successful steps.", ok.len()), &tail)
            }
        };
        Box::pin(std::future::ready(Ok(LlmResponse::text(text, "fixed-plan"))))
    }
}
