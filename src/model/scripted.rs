//! `ScriptedModel`: a model that follows a fixed script of proposals. Its position in the
//! script is read from the request (the number of observations so far), never from
//! internal state, so a new process resuming a run continues where the old one stopped.

use serde_json::json;

use super::fake::{View, call, finish};
use super::{LlmClient, LlmRequest, LlmResponse, ModelError};
use crate::future::BoxFuture;

/// A model that proposes `script[n]` when the request holds `n` observations, and
/// afterwards finishes citing every successful observation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptedModel {
    /// The proposals, as JSON text.
    pub script: Vec<String>,
    /// The model name (a price table key).
    pub name: String,
}

impl ScriptedModel {
    /// A scripted model priced as `fake-sensible`.
    pub fn new(script: Vec<String>) -> Self {
        Self { script, name: "fake-sensible".into() }
    }

    /// The proposal for `request`.
    pub fn propose(&self, request: &LlmRequest) -> String {
        let view = View::of(request);
        match self.script.get(view.observations.len()) {
            Some(text) => text.clone(),
            None => {
                let good = view.good();
                finish(&format!("Checked {} source(s).", good.len()), &good)
            }
        }
    }
}

impl LlmClient for ScriptedModel {
    fn model(&self) -> &str {
        &self.name
    }

    fn complete<'a>(&'a mut self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        Box::pin(std::future::ready(Ok(LlmResponse::text(self.propose(request), self.name.clone()))))
    }
}

/// The research script for "Reply to T-601 about returns.": read the ticket, look up the
/// returns policy, draft the e-mail to the ticket's owner (which a person must approve).
pub fn research_script() -> Vec<String> {
    vec![
        call("get_ticket", json!({"ticket_id": "T-601"})),
        call("lookup_document", json!({"doc_id": "kc-returns-v3"})),
        call(
            "send_email_draft",
            json!({
                "to": "kwame@example.com",
                "subject": "Your return",
                "body": "Draft based on o2",
                "idempotency_key": "model-chosen-1",
            }),
        ),
    ]
}
