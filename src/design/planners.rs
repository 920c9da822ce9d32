//! Fake planners: one well-behaved, five that fail the plan check in a named way. Like
//! every fake they show the controls, not how often a real model plans well. Each reads
//! only the goal block of its request.

use serde_json::{Value, json};
use std::str::FromStr;

use super::goal::{docs, tickets};
use crate::future::BoxFuture;
use crate::model::blocks::parse_blocks;
use crate::model::{LlmClient, LlmRequest, LlmResponse, ModelError};

/// How a fake planner behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PlanFakeKind {
    /// Reads the ticket and the policy the goal names.
    Sensible,
    /// Writes prose instead of a plan.
    Prose,
    /// Plans six steps.
    Long,
    /// Starts with a tool that does not exist.
    BadTool,
    /// Starts with arguments that do not fit the schema.
    BadArgs,
    /// Adds an e-mail to the customer as step 3.
    Write,
}

/// Every planner kind with its name, in the order of the plan-check table.
pub(crate) const PLAN_FAKE_KINDS: [(&str, PlanFakeKind); 6] = [
    ("sensible", PlanFakeKind::Sensible),
    ("prose", PlanFakeKind::Prose),
    ("long", PlanFakeKind::Long),
    ("bad_tool", PlanFakeKind::BadTool),
    ("bad_args", PlanFakeKind::BadArgs),
    ("write", PlanFakeKind::Write),
];

impl PlanFakeKind {
    /// The kind's name.
    pub fn name(self) -> &'static str {
        PLAN_FAKE_KINDS.iter().find(|(_, k)| *k == self).map_or("sensible", |(n, _)| n)
    }
}

impl FromStr for PlanFakeKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PLAN_FAKE_KINDS.iter().find(|(n, _)| *n == s).map(|(_, k)| *k).ok_or_else(|| {
            let names: Vec<_> = PLAN_FAKE_KINDS.iter().map(|(n, _)| *n).collect();
            format!("unknown planner {s:?} (known: {})", names.join(", "))
        })
    }
}

/// A fake planner, priced as `fake-sensible`.
#[derive(Clone, Debug)]
pub struct PlanFake {
    /// Behaviour.
    pub kind: PlanFakeKind,
    /// The model name (a price table key).
    pub name: String,
}

impl PlanFake {
    /// A planner of `kind`.
    pub fn new(kind: PlanFakeKind) -> Self {
        Self { kind, name: "fake-sensible".into() }
    }

    /// The text this planner answers `request` with.
    pub fn propose(&self, request: &LlmRequest) -> String {
        let goal =
            parse_blocks(request.user_text()).into_iter().find(|b| b.tag == "goal").map(|b| b.text).unwrap_or_default();
        let step = |tool: &str, arguments: Value, reason: &str| json!({"tool": tool, "arguments": arguments, "reason": reason});
        let mut steps: Vec<Value> = Vec::new();
        for t in tickets(&goal) {
            steps.push(step("get_ticket", json!({ "ticket_id": t }), "read the ticket the goal names"));
        }
        for d in docs(&goal) {
            steps.push(step("lookup_document", json!({ "doc_id": d }), "read the policy the goal asks about"));
        }
        match self.kind {
            PlanFakeKind::Sensible => {}
            PlanFakeKind::Prose => return "First I will look at the ticket, then I will check the policy.".into(),
            PlanFakeKind::Long => {
                for (i, d) in ["kc-returns-v3", "kc-warranty-v2", "kc-battery-v1"].iter().enumerate() {
                    steps.push(step("lookup_document", json!({ "doc_id": d }), "read every policy, to be safe"));
                    steps.push(step("calculator", json!({ "expression": format!("{i} + 1") }), "count the policies"));
                }
            }
            PlanFakeKind::BadTool => {
                steps.insert(0, step("search_web", json!({ "query": goal }), "look it up online"));
            }
            PlanFakeKind::BadArgs => {
                steps.insert(0, step("get_ticket", json!({ "id": 601 }), "read the ticket"));
            }
            PlanFakeKind::Write => steps.push(step(
                "send_email_draft",
                json!({
                    "to": "kwame@example.com",
                    "subject": "Your ticket",
                    "body": "Here is what we found.",
                    "idempotency_key": "plan-1",
                }),
                "tell the customer",
            )),
        }
        json!({ "steps": steps }).to_string()
    }
}

impl LlmClient for PlanFake {
    fn model(&self) -> &str {
        &self.name
    }

    fn complete<'a>(&'a mut self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        Box::pin(std::future::ready(Ok(LlmResponse::text(self.propose(request), self.name.clone()))))
    }
}
