//! A chat-completions server on loopback for the HTTP tests: it records every request and
//! answers from a script, then from a fallback. `Reply::Fake` answers as the fake model
//! the request names (`fake-<kind>`), with tool calls when the request offers tools and
//! proposal JSON as text otherwise, so any fake row can run through real HTTP.
//! `Reply::Roles` answers as the fake role whose trusted prompt opens the request (the
//! researcher's loop state is read back from the request's blocks), so any three-role row
//! can run through real HTTP too; any other request gets `Reply::Fake`'s answer.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use rolegate::agent::AgentState;
use rolegate::cost::estimate_tokens;
use rolegate::model::parse_blocks;
use rolegate::model::{FakeKind, FakeModel, LlmRequest, Message, prompts};
use rolegate::multi::Behaviours;
use rolegate::multi::{FakePlanner, FakeResearcher, FakeReviewer};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// 200 with this JSON body.
    Json(Value),
    /// 200 with this raw body.
    Raw(&'static str),
    /// An error status, with an optional `Retry-After` value.
    Status(u16, &'static str, Option<&'static str>),
    /// Never answers (the request hangs until the client gives up).
    Hang,
    /// Answers as the fake model named in the request.
    Fake,
    /// Answers as [`Reply::Fake`], with a usage block that differs on every request (the
    /// output tokens count the requests so far): a server that does not answer the same
    /// request the same way twice.
    FakeVarying,
    /// Answers as the fake role (with these behaviours) whose prompt the request carries.
    Roles(Behaviours),
}

/// A request as the server saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The path.
    pub path: String,
    /// The `Authorization` header.
    pub authorization: Option<String>,
    /// The JSON body.
    pub body: Value,
}

#[derive(Default)]
struct Inner {
    script: VecDeque<Reply>,
    fallback: Option<Reply>,
    seen: Vec<Seen>,
}

#[derive(Clone, Default)]
struct Shared {
    inner: Arc<Mutex<Inner>>,
    arrived: Arc<Notify>,
    /// A one-slot server: one request at a time, each taking this long.
    slot: Option<(Arc<tokio::sync::Mutex<()>>, std::time::Duration)>,
}

/// A running server; it stops with the test's runtime.
pub struct Server {
    /// `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
    shared: Shared,
}

impl Server {
    /// Starts a server answering `script` in order, then `fallback` (a 500 when none).
    pub async fn start(script: Vec<Reply>, fallback: Option<Reply>) -> Self {
        Self::start_with(Shared::default(), script, fallback).await
    }

    /// Starts a one-slot server, as a single-slot inference engine is: it works on one
    /// request at a time, each for `per_request` (real time), and queues the others.
    pub async fn start_one_slot(fallback: Reply, per_request: std::time::Duration) -> Self {
        let shared = Shared { slot: Some((Arc::default(), per_request)), ..Shared::default() };
        Self::start_with(shared, Vec::new(), Some(fallback)).await
    }

    async fn start_with(shared: Shared, script: Vec<Reply>, fallback: Option<Reply>) -> Self {
        {
            let mut inner = shared.inner.lock().unwrap();
            inner.script = script.into();
            inner.fallback = fallback;
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().fallback(handle).with_state(shared.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { base_url: format!("http://{addr}/v1"), shared }
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.inner.lock().unwrap().seen.clone()
    }

    /// Waits until at least `n` requests have arrived.
    pub async fn arrived(&self, n: usize) {
        loop {
            let notified = self.shared.arrived.notified();
            if self.shared.inner.lock().unwrap().seen.len() >= n {
                return;
            }
            notified.await;
        }
    }
}

/// A loopback base URL where nothing listens (a port that was just freed).
pub async fn refused_base_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}/v1")
}

async fn handle(State(shared): State<Shared>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let _slot = match &shared.slot {
        Some((slot, per_request)) => {
            let held = slot.clone().lock_owned().await;
            tokio::time::sleep(*per_request).await;
            Some(held)
        }
        None => None,
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let reply = {
        let mut inner = shared.inner.lock().unwrap();
        inner.seen.push(Seen {
            path: uri.path().to_string(),
            authorization: headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_string),
            body: body.clone(),
        });
        inner.script.pop_front().or_else(|| inner.fallback.clone())
    };
    shared.arrived.notify_waiters();
    match reply {
        None => (StatusCode::INTERNAL_SERVER_ERROR, "script exhausted").into_response(),
        Some(Reply::Json(v)) => ([("content-type", "application/json")], v.to_string()).into_response(),
        Some(Reply::Raw(text)) => ([("content-type", "application/json")], text).into_response(),
        Some(Reply::Status(code, text, retry_after)) => {
            let mut h = HeaderMap::new();
            if let Some(r) = retry_after {
                h.insert("retry-after", r.parse().unwrap());
            }
            (StatusCode::from_u16(code).unwrap(), h, text).into_response()
        }
        Some(Reply::Hang) => std::future::pending().await,
        Some(Reply::Fake) => ([("content-type", "application/json")], fake_answer(&body).to_string()).into_response(),
        Some(Reply::FakeVarying) => {
            let mut answer = fake_answer(&body);
            let n = shared.inner.lock().unwrap().seen.len() as u64;
            answer["usage"] = json!({"prompt_tokens": 100, "completion_tokens": n, "total_tokens": 100 + n});
            ([("content-type", "application/json")], answer.to_string()).into_response()
        }
        Some(Reply::Roles(b)) => {
            ([("content-type", "application/json")], role_answer(&body, b).to_string()).into_response()
        }
    }
}

/// A chat-completions answer holding one assistant message.
pub fn answer(message: Value, usage: Option<(u64, u64)>) -> Value {
    let mut v = json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "served-model",
        "system_fingerprint": "fp_test",
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": "stop"}]
    });
    if let Some((i, o)) = usage {
        v["usage"] = json!({"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o});
    }
    v
}

/// An answer calling `name` with `arguments` (sent as a JSON string, as OpenAI does).
pub fn tool_call(name: &str, arguments: Value, usage: Option<(u64, u64)>) -> Reply {
    Reply::Json(answer(
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{name}"), "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}
        ]}),
        usage,
    ))
}

/// An answer with text content.
pub fn text(content: &str, usage: Option<(u64, u64)>) -> Reply {
    Reply::Json(answer(json!({"role": "assistant", "content": content}), usage))
}

/// The request as the crate would have built it (system and user messages).
pub fn request_of(body: &Value) -> LlmRequest {
    let messages = body["messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .map(|m| {
                    let content = m["content"].as_str().unwrap_or_default();
                    match m["role"].as_str() {
                        Some("system") => Message::system(content.to_string()),
                        _ => Message::user(content),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    LlmRequest {
        model: body["model"].as_str().unwrap_or_default().to_string().into(),
        messages,
        tools: Vec::new(),
        max_tokens: u32::try_from(body["max_tokens"].as_u64().unwrap_or(0)).unwrap(),
    }
}

fn fake_answer(body: &Value) -> Value {
    let request = request_of(body);
    let kind: FakeKind =
        request.model.strip_prefix("fake-").unwrap_or("sensible").parse().unwrap_or(FakeKind::Sensible);
    let proposal = FakeModel::new(kind).propose(&request);
    proposal_answer(body, &request, &proposal)
}

/// The answer carrying a loop proposal: a tool call in native mode, fenced text otherwise.
fn proposal_answer(body: &Value, request: &LlmRequest, proposal: &str) -> Value {
    // usage as the fake's own estimate, so the ledger matches the fake run exactly
    let usage = Some((request.estimated_input_tokens(), estimate_tokens(proposal)));
    let native = body.get("tools").is_some();
    let parsed: Option<Value> = serde_json::from_str(proposal).ok();
    let message = match (native, parsed) {
        (true, Some(p)) if p["action"] == "call" => json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": p["tool"], "arguments": p["arguments"].to_string()}}
        ]}),
        (true, Some(p)) if p["action"] == "finish" => json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "finish", "arguments": json!({"answer": p["answer"], "sources": p["sources"]}).to_string()}}
        ]}),
        // text mode: the proposal in a code fence, as many models write it
        (false, Some(_)) => json!({"role": "assistant", "content": format!("```json\n{proposal}\n```")}),
        // prose stays prose
        _ => json!({"role": "assistant", "content": proposal}),
    };
    answer(message, usage)
}

/// The answer of the fake role whose trusted prompt opens the request.
fn role_answer(body: &Value, b: Behaviours) -> Value {
    let request = request_of(body);
    let system = request.messages.first().map_or("", |m| &*m.content);
    let message = |text: &str, calls: Vec<Value>| {
        let mut m = json!({"role": "assistant", "content": text});
        if !calls.is_empty() {
            m["tool_calls"] = Value::Array(calls);
        }
        answer(m, Some((request.estimated_input_tokens(), estimate_tokens(text))))
    };
    if system.starts_with(prompts::PLANNER) {
        return message(&FakePlanner { kind: b.planner }.write(&request), Vec::new());
    }
    if system.starts_with(prompts::REVIEWER) {
        let (text, calls) = FakeReviewer { kind: b.reviewer }.review(&request);
        let calls = calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments.to_string()}}))
            .collect();
        return message(&text, calls);
    }
    if system.starts_with(prompts::RESEARCHER) {
        let proposal = FakeResearcher { kind: b.researcher }.propose(&state_of(&request));
        return proposal_answer(body, &request, &proposal);
    }
    fake_answer(body)
}

/// The researcher's loop state as its request shows it: the goal, then each observation
/// block in order (a refused proposal's block is the loop's `rejected` observation).
fn state_of(request: &LlmRequest) -> AgentState {
    let blocks = parse_blocks(request.user_text());
    let goal = blocks.iter().find(|b| b.tag == "goal").map_or("", |b| b.text.as_str());
    let mut state = AgentState::new("run-server", "kwame", "researcher", goal).unwrap();
    for b in blocks.iter().filter(|b| b.tag == "observation") {
        let tool =
            if b.source.starts_with("loop:rejected:") { "rejected" } else { b.source.split(':').nth(1).unwrap() };
        state = state.next_step().unwrap().observe(b.attr("ok") == Some("true"), tool, &b.text).unwrap().0;
    }
    state
}
