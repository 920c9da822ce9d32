//! Models: the request and response types, the [`LlmClient`] and [`Decider`] traits,
//! fake models that misbehave on purpose, [`FixedPlan`], the slow wrapper, the
//! OpenAI-compatible HTTP client ([`http`], the only network I/O of the crate), `--model`
//! values ([`ModelSpec`]) and the trusted prompts ([`prompts`]).
//!
//! A model only ever returns text. Nothing a model says runs until the agent loop has
//! parsed and checked it and the gate has allowed it.

pub(crate) mod blocks;
pub(crate) mod fake;
pub(crate) mod ground_truth;
pub mod http;
pub mod prompts;
pub(crate) mod scripted;
pub(crate) mod spec;
mod text;

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::cost::ManualClock;
use crate::future::BoxFuture;
use crate::tools::ToolSpec;

pub use blocks::parse_blocks;
pub use fake::{FakeKind, FakeModel};
pub use ground_truth::GroundTruthFake;
pub use http::HttpClient;
pub use scripted::{ScriptedModel, research_script};
pub use spec::{ModelSpec, RoleModelSpecs};
pub use text::Text;

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    /// Trusted instructions written by the application.
    System,
    /// The untrusted blocks.
    User,
    /// The model.
    Assistant,
    /// A tool result sent back to the model (native tool calling).
    Tool,
}

/// One chat message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Author.
    pub role: MessageRole,
    /// Text (lent when it is a fixed text, as a role's system prompt is, or shared when
    /// every run of an environment sends the same one).
    pub content: Text,
    /// Tool calls an assistant message made (native tool calling).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<RequestedCall>,
    /// For a `tool` message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A trusted system message.
    pub fn system(content: impl Into<Text>) -> Self {
        Self { role: MessageRole::System, content: content.into(), tool_calls: Vec::new(), tool_call_id: None }
    }

    /// A user message (in this crate: untrusted blocks).
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: MessageRole::User,
            content: Text::from(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// An assistant message, with the tool calls it made.
    pub fn assistant(content: impl Into<String>, tool_calls: Vec<RequestedCall>) -> Self {
        Self { role: MessageRole::Assistant, content: Text::from(content.into()), tool_calls, tool_call_id: None }
    }

    /// A tool result answering call `id`.
    pub fn tool(id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: MessageRole::Tool,
            content: Text::from(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: Some(id.into()),
        }
    }
}

/// A tool call as a model requested it through native tool calling (one reply may hold
/// several). Like every model output it is a request, checked before anything runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestedCall {
    /// The id the model gave the call.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments (a JSON object when well-formed).
    pub arguments: serde_json::Value,
}

/// What the application asks a model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LlmRequest {
    /// Model name (the price table key); borrowed when the client's name is a fixed one
    /// (see [`LlmClient::model_name`]).
    pub model: Cow<'static, str>,
    /// System message first, then the untrusted blocks.
    pub messages: Vec<Message>,
    /// The tools this task allows (for clients with native tool calling).
    pub tools: Vec<ToolSpec>,
    /// The output allowance in tokens.
    pub max_tokens: u32,
}

impl LlmRequest {
    /// The text of the last user message (where the untrusted blocks are).
    pub fn user_text(&self) -> &str {
        self.messages.iter().rev().find(|m| m.role == MessageRole::User).map_or("", |m| &*m.content)
    }

    /// The estimated input tokens of this request.
    pub fn estimated_input_tokens(&self) -> u64 {
        self.messages.iter().map(|m| crate::cost::estimate_tokens(&m.content) + 4).sum()
    }
}

/// Token counts reported by a model server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens read.
    pub input_tokens: u64,
    /// Tokens written.
    pub output_tokens: u64,
}

/// What a model answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmResponse {
    /// The text (for the agent loop: a proposal in JSON).
    pub text: String,
    /// The model that answered (borrowed when it is a fixed name, as a fake's is, so a
    /// fake's reply allocates no name).
    pub model: Cow<'static, str>,
    /// Usage as the server reported it; `None` means "estimate from the text".
    pub usage: Option<Usage>,
    /// Tool calls of a native tool-calling reply (empty for plain text replies).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<RequestedCall>,
}

impl LlmResponse {
    /// A plain text reply with estimated usage.
    pub fn text(text: impl Into<String>, model: impl Into<Cow<'static, str>>) -> Self {
        Self { text: text.into(), model: model.into(), usage: None, tool_calls: Vec::new() }
    }

    /// Input and output tokens of this call: as the server reported them, or `estimate`
    /// when it reported none.
    pub fn tokens(&self, estimate: impl FnOnce() -> (u64, u64)) -> (u64, u64) {
        self.usage.map_or_else(estimate, |u| (u.input_tokens, u.output_tokens))
    }
}

/// A call the server answered whose answer could not be used (cut off at `max_tokens`,
/// withheld, unreadable): the server did the work, so the call is counted and priced as
/// any answered call is, whatever became of its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answered {
    /// The model that answered (as [`LlmResponse::model`]).
    pub model: Cow<'static, str>,
    /// Usage as the server reported it; `None` means "estimate".
    pub usage: Option<Usage>,
    /// The estimated output tokens of what the answer held, for a server that reported no
    /// usage.
    pub output_estimate: u64,
}

impl Answered {
    /// Input and output tokens of the call: as the server reported them, or
    /// `input_estimate` and [`Answered::output_estimate`] when it reported none (as
    /// [`LlmResponse::tokens`]).
    pub fn tokens(&self, input_estimate: u64) -> (u64, u64) {
        self.usage.map_or((input_estimate, self.output_estimate), |u| (u.input_tokens, u.output_tokens))
    }
}

/// Why a model call produced no response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The process running the decider died (used to test crash recovery).
    #[error("process died: {0}")]
    Crashed(String),
    /// The call failed with a named code (transport, server or protocol failure).
    #[error("{code}: {message}")]
    Failed {
        /// A stable code such as `timeout` or `server_error`.
        code: &'static str,
        /// Details.
        message: String,
        /// Set when the server answered and the answer was unusable (`truncated`,
        /// `refused_by_server`, `malformed_json`, …): what the call cost. Every caller
        /// that records the usage of an answer records this one too.
        answered: Option<Box<Answered>>,
    },
}

impl ModelError {
    /// A failure with a named code, where no answer came back.
    pub fn failed(code: &'static str, message: impl Into<String>) -> Self {
        Self::Failed { code, message: message.into(), answered: None }
    }

    /// What the server reported for a call it answered although the answer was unusable.
    pub fn answered(&self) -> Option<&Answered> {
        match self {
            Self::Failed { answered, .. } => answered.as_deref(),
            Self::Crashed(_) => None,
        }
    }
}

/// Anything that answers chat requests: fake models, scripted models, HTTP clients.
pub trait LlmClient: Send {
    /// The model name used for prices and traces.
    fn model(&self) -> &str;
    /// The model name as a request or usage record holds it: the default copies
    /// [`LlmClient::model`]; a client whose name is a fixed string lends it instead.
    fn model_name(&self) -> Cow<'static, str> {
        Cow::Owned(self.model().to_owned())
    }
    /// Answers one request; the response's text is a proposal for the agent loop.
    fn complete<'a>(&'a mut self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>>;
    /// Answers one request whose answer is a message for another role (a planner's brief,
    /// a reviewer's verdict), not a proposal: the response's text is the reply's own text.
    /// The default is [`LlmClient::complete`], which is the same thing for clients whose
    /// text is never rewritten (fakes, scripts); the HTTP client, which turns a native
    /// tool call into proposal text, keeps the reply's text instead.
    fn complete_message<'a>(&'a mut self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        self.complete(request)
    }
    /// Ties the client to a cancellation token (e.g. the token of the run a role works in):
    /// a client that can abandon its own work in flight stops when it fires. Callers still
    /// race every call against their token; the default does nothing more. The token is
    /// lent: a client that keeps it clones it (a clone takes the token's lock, so a client
    /// that does not keep it costs nothing).
    fn bind_cancel(&mut self, _token: &CancellationToken) {}
    /// Hands the client the run's deadline: a call, its retries and its waits end there
    /// (the HTTP client answers `time_budget`); `None` lifts it. The default ignores it (a
    /// fake answers at once).
    fn set_deadline(&mut self, _deadline: Option<tokio::time::Instant>) {}
    /// The output allowance this client was configured with (a real model's
    /// `--max-tokens`): the callers then ask for it and check their budgets against it.
    /// `None` (the default, a fake's) leaves the allowance to the caller's budget.
    fn max_tokens(&self) -> Option<u32> {
        None
    }
}

/// The answer of a model call, or `None` when `cancel` fires first.
///
/// The call is polled once with a waker that does nothing: an answer it has at once (a
/// fake's, a script's) is taken as it is, without racing the token. Any other call is
/// raced against the token as it is awaited, the token first (`biased`). Callers read the
/// token before they make the call, so a call made after a cancel is never made at all.
pub(crate) async fn answer_or_cancelled<F: Future + Unpin>(
    mut call: F,
    cancel: &CancellationToken,
) -> Option<F::Output> {
    // the context is not `Send`: it lives only for this one poll, not across an await
    let polled = std::pin::Pin::new(&mut call).poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
    if let std::task::Poll::Ready(answer) = polled {
        return Some(answer);
    }
    tokio::select! {
        biased;
        // the token is borrowed, not cloned: a clone takes the token's lock
        () = cancel.cancelled() => None,
        answer = call => Some(answer),
    }
}

/// A client wrapper that makes every call take simulated time on a [`ManualClock`], so a
/// time budget can be tested without waiting.
pub(crate) struct SlowClient<C> {
    /// The wrapped client.
    pub inner: C,
    /// The clock the delay is added to.
    pub clock: ManualClock,
    /// Simulated seconds per call.
    pub per_call: Duration,
}

impl<C: LlmClient> LlmClient for SlowClient<C> {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn model_name(&self) -> Cow<'static, str> {
        self.inner.model_name()
    }

    fn complete<'a>(&'a mut self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        self.clock.advance(self.per_call);
        self.inner.complete(request)
    }

    fn complete_message<'a>(&'a mut self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        self.clock.advance(self.per_call);
        self.inner.complete_message(request)
    }

    fn bind_cancel(&mut self, token: &CancellationToken) {
        self.inner.bind_cancel(token);
    }

    fn set_deadline(&mut self, deadline: Option<tokio::time::Instant>) {
        self.inner.set_deadline(deadline);
    }

    fn max_tokens(&self) -> Option<u32> {
        self.inner.max_tokens()
    }
}

impl<T: LlmClient + ?Sized> LlmClient for Box<T> {
    fn model(&self) -> &str {
        (**self).model()
    }

    fn model_name(&self) -> Cow<'static, str> {
        (**self).model_name()
    }

    fn complete<'a>(&'a mut self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        (**self).complete(request)
    }

    fn complete_message<'a>(&'a mut self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        (**self).complete_message(request)
    }

    fn bind_cancel(&mut self, token: &CancellationToken) {
        (**self).bind_cancel(token);
    }

    fn set_deadline(&mut self, deadline: Option<tokio::time::Instant>) {
        (**self).set_deadline(deadline);
    }

    fn max_tokens(&self) -> Option<u32> {
        (**self).max_tokens()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lent_message_text_serialises_and_reads_back_as_an_owned_one() {
        // a message's text became a `Cow` (a role's fixed system prompt is lent, not
        // copied): the JSON is the one a `String` field wrote, for every kind of text
        #[derive(Serialize)]
        struct Before<'a> {
            role: MessageRole,
            content: &'a str,
        }
        #[derive(Serialize)]
        struct BeforeReply<'a> {
            text: &'a str,
            model: String,
            usage: Option<Usage>,
        }
        for text in ["", "plain", "quote \" backslash \\ newline \n tab \t", "\u{e9}\u{1F600} \u{0} \u{2028}"] {
            let lent = Message::system(text);
            let owned = Message::system(text.to_string());
            assert!(lent.content.is_shared() && !owned.content.is_shared());
            let json = serde_json::to_string(&lent).unwrap();
            assert_eq!(json, serde_json::to_string(&Before { role: MessageRole::System, content: text }).unwrap());
            assert_eq!(serde_json::to_string(&owned).unwrap(), json);
            let back: Message = serde_json::from_str(&json).unwrap();
            assert_eq!(back, lent);
            let reply = LlmResponse::text(text, "fake-planner");
            assert!(matches!(reply.model, Cow::Borrowed("fake-planner")));
            let json = serde_json::to_string(&reply).unwrap();
            let before = BeforeReply { text, model: "fake-planner".to_string(), usage: None };
            assert_eq!(json, serde_json::to_string(&before).unwrap());
            assert_eq!(serde_json::from_str::<LlmResponse>(&json).unwrap(), reply);
        }
    }

    #[tokio::test]
    async fn an_answer_at_hand_is_taken_and_any_other_is_raced_against_the_token() {
        let cancelled = CancellationToken::new();
        cancelled.cancel();
        // at hand: taken as it is, the token not read (the caller read it before the call)
        assert_eq!(answer_or_cancelled(std::future::ready(7), &cancelled).await, Some(7));
        // not at hand: the token wins the race
        assert_eq!(answer_or_cancelled(std::future::pending::<u8>(), &cancelled).await, None);
        // not at hand and no cancel: awaited to its answer
        let mut first = true;
        let later = std::future::poll_fn(|cx| {
            if std::mem::take(&mut first) {
                cx.waker().wake_by_ref();
                return std::task::Poll::Pending;
            }
            std::task::Poll::Ready(8)
        });
        assert_eq!(answer_or_cancelled(later, &CancellationToken::new()).await, Some(8));
    }
}
