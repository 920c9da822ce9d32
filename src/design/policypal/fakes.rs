//! Fake PolicyPal models on native tool calling. `parallel` asks for every independent
//! read in one reply; `sequential` asks for one read per reply (the same reads, more
//! turns); `flail` rewords one search again and again, once repeating itself exactly, and
//! only stops when the search guard tells it there is nothing more. Each reads only its
//! request: the goal block, its own earlier calls and the results.

use serde_json::{Value, json};
use std::str::FromStr;

use super::NO_FURTHER_RESULTS;
use crate::design::goal::{address, clauses, docs, tickets, wants_email};
use crate::future::BoxFuture;
use crate::model::blocks::{Block, parse_blocks};
use crate::model::{LlmClient, LlmRequest, LlmResponse, MessageRole, ModelError, RequestedCall};

/// How a fake PolicyPal model behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PalKind {
    /// Every independent read in one reply, then the e-mail if asked, then the answer.
    Parallel,
    /// The same reads, one per reply.
    Sequential,
    /// Rewords one search until told there are no further results.
    Flail,
}

/// Every kind with its name, in a fixed order (`sensible` is accepted for `parallel`).
pub(super) const PAL_KINDS: [(&str, PalKind); 3] =
    [("parallel", PalKind::Parallel), ("sequential", PalKind::Sequential), ("flail", PalKind::Flail)];

impl PalKind {
    /// The kind's name.
    pub fn name(self) -> &'static str {
        PAL_KINDS.iter().find(|(_, k)| *k == self).map_or("parallel", |(n, _)| n)
    }
}

impl FromStr for PalKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "sensible" {
            return Ok(Self::Parallel);
        }
        PAL_KINDS.iter().find(|(n, _)| *n == s).map(|(_, k)| *k).ok_or_else(|| {
            let names: Vec<_> = PAL_KINDS.iter().map(|(n, _)| *n).collect();
            format!("unknown PolicyPal model {s:?} (known: sensible, {})", names.join(", "))
        })
    }
}

/// A fake PolicyPal model, priced as `fake-sensible`.
#[derive(Clone, Debug)]
pub struct PalFake {
    /// Behaviour.
    pub kind: PalKind,
    /// The model name (a price table key).
    pub name: String,
}

/// What the fake sees in its request.
struct View {
    goal: String,
    asked: Vec<RequestedCall>,
    results: Vec<Block>,
}

impl View {
    fn of(request: &LlmRequest) -> Self {
        let mut goal = String::new();
        let mut asked = Vec::new();
        let mut results = Vec::new();
        for m in &request.messages {
            match m.role {
                MessageRole::User if goal.is_empty() => {
                    goal = parse_blocks(&m.content)
                        .into_iter()
                        .find(|b| b.tag == "goal")
                        .map(|b| b.text)
                        .unwrap_or_default();
                }
                MessageRole::Assistant => asked.extend(m.tool_calls.iter().cloned()),
                MessageRole::Tool => {
                    results.extend(parse_blocks(&m.content).into_iter().filter(|b| b.tag == "observation"))
                }
                _ => {}
            }
        }
        Self { goal, asked, results }
    }

    fn was_asked(&self, tool: &str, args: &Value) -> bool {
        self.asked.iter().any(|c| c.name == tool && &c.arguments == args)
    }

    fn ok(&self) -> impl Iterator<Item = &Block> {
        self.results.iter().filter(|b| b.attr("ok") == Some("true"))
    }

    fn tool_of(b: &Block) -> &str {
        b.source.split(':').nth(1).unwrap_or_default()
    }

    /// What the results say, one short sentence each.
    fn summary(&self) -> String {
        let mut parts = Vec::new();
        for b in &self.results {
            let v: Value = serde_json::from_str(&b.text).unwrap_or(Value::Null);
            let field = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
            let ok = b.attr("ok") == Some("true");
            match (Self::tool_of(b), ok) {
                ("get_ticket", true) => parts.push(format!("{} is {}.", field("id"), field("status"))),
                ("lookup_document", true) => parts.push(format!("{} applies.", field("id"))),
                ("search_documents", true) => {
                    let hits = v.get("results").and_then(Value::as_array).map_or(0, Vec::len);
                    if hits == 0 {
                        parts.push(format!("No policy covers \"{}\".", field("query")));
                    } else {
                        parts.push(format!("{hits} policy hit(s) for \"{}\".", field("query")));
                    }
                }
                ("send_email_draft", true) => parts.push("The e-mail was sent.".into()),
                ("send_email_draft", false) if b.text.contains("cancelled by user") => {
                    parts.push("The e-mail was not sent: you cancelled it.".into());
                }
                _ => {}
            }
        }
        if parts.is_empty() { "I found nothing to go on.".into() } else { parts.join(" ") }
    }

    fn finish(&self, answer: &str) -> String {
        let sources: Vec<&str> = self.ok().filter_map(|b| b.attr("id")).collect();
        json!({"action": "finish", "answer": answer, "sources": sources}).to_string()
    }
}

/// The reads a goal needs: its tickets and named policies, or, when it names neither, one
/// search per clause.
fn reads(goal: &str) -> Vec<(&'static str, Value)> {
    let mut out: Vec<(&'static str, Value)> = Vec::new();
    for t in tickets(goal) {
        out.push(("get_ticket", json!({ "ticket_id": t })));
    }
    for d in docs(goal) {
        out.push(("lookup_document", json!({ "doc_id": d })));
    }
    if out.is_empty() {
        for c in clauses(goal) {
            out.push(("search_documents", json!({ "query": c })));
        }
    }
    out
}

/// The `n`-th rewording of a flailing search; the third repeats the second exactly.
fn flail_query(base: &str, n: usize) -> String {
    const SUFFIXES: [&str; 8] = ["", " rules", " rules", " guidance", " handbook", " details", " faq", " exceptions"];
    match SUFFIXES.get(n) {
        Some(s) => format!("{base}{s}"),
        None => format!("{base} part {n}"),
    }
}

impl PalFake {
    /// A fake of `kind`.
    pub fn new(kind: PalKind) -> Self {
        Self { kind, name: "fake-sensible".into() }
    }

    /// The reply this fake gives `request`.
    pub fn respond(&self, request: &LlmRequest) -> LlmResponse {
        let view = View::of(request);
        let next_id = view.asked.len();
        let reply = |calls: Vec<(&str, Value)>| {
            let tool_calls = calls
                .into_iter()
                .enumerate()
                .map(|(i, (name, arguments))| RequestedCall {
                    id: format!("call_{}", next_id + i + 1),
                    name: name.to_string(),
                    arguments,
                })
                .collect();
            LlmResponse { text: String::new(), model: self.name.clone().into(), usage: None, tool_calls }
        };
        let text = |t: String| LlmResponse::text(t, self.name.clone());
        match self.kind {
            PalKind::Parallel | PalKind::Sequential => {
                let pending: Vec<_> = reads(&view.goal).into_iter().filter(|(t, a)| !view.was_asked(t, a)).collect();
                if !pending.is_empty() {
                    let take = if self.kind == PalKind::Parallel { pending.len() } else { 1 };
                    return reply(pending.into_iter().take(take).collect());
                }
                if wants_email(&view.goal) && !view.asked.iter().any(|c| c.name == "send_email_draft") {
                    let to = address(&view.goal).unwrap_or_default();
                    let mail = json!({
                        "to": to,
                        "subject": "Your request",
                        "body": view.summary(),
                        "idempotency_key": "pal-1",
                    });
                    return reply(vec![("send_email_draft", mail)]);
                }
                text(view.finish(&view.summary()))
            }
            PalKind::Flail => {
                let told = view
                    .results
                    .iter()
                    .any(|b| b.text.starts_with(NO_FURTHER_RESULTS.split('.').next().unwrap_or_default()));
                if told {
                    return text(view.finish("The policies do not cover this."));
                }
                let base = clauses(&view.goal).into_iter().next().unwrap_or_else(|| view.goal.clone());
                let n = view.asked.iter().filter(|c| c.name == "search_documents").count();
                reply(vec![("search_documents", json!({ "query": flail_query(&base, n) }))])
            }
        }
    }
}

impl LlmClient for PalFake {
    fn model(&self) -> &str {
        &self.name
    }

    fn complete<'a>(&'a mut self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        Box::pin(std::future::ready(Ok(self.respond(request))))
    }
}
