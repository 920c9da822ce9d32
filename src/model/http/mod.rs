//! The OpenAI-compatible HTTP client, [`HttpClient`]: an [`LlmClient`] speaking chat
//! completions to vLLM, llama.cpp's server, Ollama or a hosted API. **This module is the
//! only place in rolegate that does network I/O.**
//!
//! - Tools: in [`ToolMode::Native`] the request's tools and a `finish` function are sent,
//!   with `tool_choice` ([`ToolChoice`], `auto` by default); a request without tools offers
//!   no function at all. A reply's tool calls become the proposal text the loop parses
//!   (see `wire` for the exact mapping); every design takes a `finish` call as its answer. [`ToolMode::Text`] is the fallback for servers without tool
//!   calling: the model answers the proposal JSON as text. A role's message
//!   ([`LlmClient::complete_message`]: a brief, a verdict) is the reply's own text, or a
//!   `finish` call's `answer`, never a tool call rewritten ([`Reading`]).
//! - `max_tokens` is the config's ([`HttpConfig::max_tokens`], [`LlmClient::max_tokens`]);
//!   `temperature` and `seed` are sent when set. A reply the server cut at `max_tokens`
//!   (`finish_reason: length`) is `truncated`, one it withheld (`content_filter`)
//!   `refused_by_server`, whatever text it holds.
//! - Usage from the answer goes into [`LlmResponse::usage`]; prices stay in
//!   `data/prices.json`, keyed by the model name.
//! - Concurrency: every client made from one [`Endpoint`] shares its [`ConnectionLimit`];
//!   a call holds a permit for each attempt only, and the attempt's timeout starts once it
//!   holds one, so a queue never times a call out; the run's deadline bounds the wait.
//! - Record and replay ([`Recording`], `record`): a recorded exchange answers without the
//!   server; a replay never contacts one.
//! - A durable run's exchange log ([`Exchanges`], `exchanges`): asked first; an exchange
//!   the run made already is answered from it, a new answer is durable in it before it is
//!   read (`exchange_not_durable` otherwise).
//! - Each attempt has a timeout; 429 and 5xx answers are retried a bounded number of
//!   times with a doubling backoff or the server's `Retry-After` (seconds form; the
//!   date form falls back to the backoff). The backoff sleeps through an injected
//!   [`Sleeper`].
//! - Cancellation: dropping the future abandons the request in flight and any backoff
//!   (the agent loop races every call against the run's token); a client given a token
//!   with [`HttpClient::with_cancel`] (or [`LlmClient::bind_cancel`], which a role actor
//!   calls with its child token) also stops by itself with `cancelled`.
//! - Every failure is a [`ModelError::Failed`] with an [`HttpCode`], never a panic. A
//!   failure of an answer the server gave (`truncated`, `refused_by_server`,
//!   `malformed_json`, …) carries what the call cost ([`ModelError::answered`]): the
//!   server did the work, so the callers count and price it.

pub(crate) mod config;
pub(crate) mod exchanges;
pub(crate) mod record;
pub(crate) mod wire;

use crate::codes::codes;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use super::{Answered, LlmClient, LlmRequest, LlmResponse, ModelError};
use crate::future::BoxFuture;
pub(crate) use config::ConfigError;
pub use config::{
    ApiKey, ConnectionLimit, ConnectionTimes, Endpoint, HttpConfig, HttpFlags, Jitter, RetryPolicy, Temperature,
};
pub use config::{DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_TOKENS, MAX_CONNECTIONS, MAX_MAX_TOKENS, ToolChoice, ToolMode};
pub use exchanges::{ExchangeAnswer, ExchangeLog, Exchanges};
pub use record::{RecordMode, Recording};
pub(crate) use wire::{FINISH_TOOL, Reading, proposal_of};

codes! {
    /// Why an HTTP model call failed: the code written into the trace.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[non_exhaustive]
    pub enum HttpCode {
        /// Nothing listens at the base URL.
        ConnectionRefused = "connection_refused",
        /// Any other failure to connect (name lookup, TLS handshake, …).
        ConnectFailed = "connect_failed",
        /// An attempt took longer than the per-call timeout.
        Timeout = "timeout",
        /// 429, still after the allowed retries (or the server asked to wait too long).
        RateLimited = "rate_limited",
        /// 5xx, still after the allowed retries.
        ServerError = "server_error",
        /// 401 or 403: the key is missing or wrong.
        Unauthorized = "unauthorized",
        /// 404: wrong base URL or unknown model.
        NotFound = "not_found",
        /// Another 4xx.
        ClientError = "client_error",
        /// A status that is neither success nor an error (a redirect, which is not followed).
        UnexpectedStatus = "unexpected_status",
        /// The connection broke while sending or reading.
        Transport = "transport",
        /// The answer was longer than the configured limit.
        ResponseTooLarge = "response_too_large",
        /// The answer is not the chat-completions JSON (no `choices[0].message`, not JSON).
        MalformedJson = "malformed_json",
        /// A reply with neither text nor a tool call.
        EmptyReply = "empty_reply",
        /// A tool call whose arguments are not a JSON object.
        InvalidToolArguments = "invalid_tool_arguments",
        /// A tool named like the finishing function (native mode).
        ReservedToolName = "reserved_tool_name",
        /// The HTTP client could not be built.
        ClientInit = "client_init",
        /// The client's own cancellation token fired.
        Cancelled = "cancelled",
        /// The run's deadline came during the call, its retries, a wait between them or the
        /// wait for a connection (the run stops with `time_budget`).
        TimeBudget = "time_budget",
        /// The server stopped the reply at the output allowance (`finish_reason: length`):
        /// raise `--max-tokens`.
        Truncated = "truncated",
        /// The server refused to answer (`finish_reason: content_filter`).
        RefusedByServer = "refused_by_server",
        /// `--replay`: the recording holds no answer to this exact request.
        ReplayMiss = "replay_miss",
        /// A recorded exchange that is not strict JSON of its format, or whose key does not
        /// match its name or its request.
        BadRecording = "bad_recording",
        /// `--cache`: an answer could not be written to the recording.
        RecordingFailed = "recording_failed",
        /// A durable run: an answer could not be made durable in the store (or the run's
        /// exchange log could not answer), so it was not used.
        ExchangeNotDurable = "exchange_not_durable",
    }
}

/// A failed call: its code and a detail for the trace (never the key).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub(crate) struct HttpFailure {
    pub code: HttpCode,
    /// Details.
    pub message: String,
    /// What the call cost when the server answered and the answer was unusable.
    pub answered: Option<Box<Answered>>,
}

impl HttpFailure {
    /// A failure.
    pub(crate) fn new(code: HttpCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), answered: None }
    }
}

impl From<HttpFailure> for ModelError {
    fn from(f: HttpFailure) -> Self {
        ModelError::Failed { code: f.code.as_str(), message: f.message, answered: f.answered }
    }
}

/// Waits between retries. Injected so that tests never sleep for real.
pub trait Sleeper: Send + Sync + fmt::Debug {
    /// A future that completes after `duration`.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;
}

/// The real sleeper: `tokio::time::sleep` (paused tokio time in tests controls it).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TokioSleeper;

impl Sleeper for TokioSleeper {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// Most characters of an error body quoted in a failure message.
const BODY_QUOTE_CHARS: usize = 200;

/// An [`LlmClient`] over OpenAI-compatible chat completions.
pub struct HttpClient {
    /// Model and endpoint.
    config: HttpConfig,
    /// The connection pool, built on the first call and kept for the client's life.
    client: Option<reqwest::Client>,
    /// Waits between retries.
    sleeper: Arc<dyn Sleeper>,
    /// Stops the client by itself when fired (besides the caller dropping the future).
    cancel: Option<CancellationToken>,
    /// The run's deadline: no attempt, retry or wait goes past it ([`LlmClient::set_deadline`]).
    deadline: Option<tokio::time::Instant>,
    /// The jitter generator's state (splitmix64), seeded from the retry policy.
    rng: u64,
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient").field("config", &self.config).finish_non_exhaustive()
    }
}

impl HttpClient {
    /// A client; nothing is connected until the first call.
    pub fn new(config: HttpConfig) -> Self {
        let rng = match config.endpoint.retry.jitter {
            Jitter::Off => 0,
            Jitter::Seeded(seed) => seed,
            Jitter::Random => {
                use std::hash::{BuildHasher, Hasher};
                std::collections::hash_map::RandomState::new().build_hasher().finish()
            }
        };
        Self { config, client: None, sleeper: Arc::new(TokioSleeper), cancel: None, deadline: None, rng }
    }

    /// The next number of the jitter generator, in `[0, 1)` (splitmix64).
    fn chance(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // the top 53 bits as a fraction
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The same client waiting between retries with `sleeper`.
    pub fn with_sleeper(mut self, sleeper: Arc<dyn Sleeper>) -> Self {
        self.sleeper = sleeper;
        self
    }

    /// The same client stopping with `cancelled` when `token` fires (e.g. a role's child
    /// token), even when the caller does not race the call against it.
    pub fn with_cancel(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &HttpConfig {
        &self.config
    }

    fn pool(&mut self) -> Result<reqwest::Client, HttpFailure> {
        if let Some(c) = &self.client {
            return Ok(c.clone());
        }
        let ep = &self.config.endpoint;
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("rolegate/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(ep.timeout)
            .redirect(reqwest::redirect::Policy::none());
        if ep.is_loopback() {
            // a local server is never reached through a proxy from the environment
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|e| HttpFailure::new(HttpCode::ClientInit, error_chain(&e)))?;
        self.client = Some(client.clone());
        Ok(client)
    }

    /// One call with its retries; `reading` says what the answer's text is.
    async fn call(&mut self, request: &LlmRequest, reading: Reading) -> Result<LlmResponse, HttpFailure> {
        let ep = self.config.endpoint.clone();
        let body = wire::request_body(&self.config.model, &ep, request)?;
        // a durable run: an exchange it made already is answered from its log; a new
        // answer is durable in the log before it is read
        let durable = match &ep.exchanges {
            Some(log) => {
                let key = record::key_of(&body, self.config.repetition)?;
                let not_durable = |why: String| HttpFailure::new(HttpCode::ExchangeNotDurable, why);
                match log.log().recall(&key).map_err(not_durable)? {
                    (_, Some(answer)) => return wire::read_reply_as(answer.as_bytes(), &self.config.model, reading),
                    (occurrence, None) => Some((log.clone(), key, occurrence)),
                }
            }
            None => None,
        };
        // a recorded exchange answers without the server; a replay never asks it
        let recorded = match &ep.recording {
            Some(rec) => {
                let key = record::key_of(&body, self.config.repetition)?;
                // one ask of an exchange at a time: an identical ask waits for the first
                // and is then answered from what it recorded (bounded by the deadline)
                let flight = match (rec.mode(), self.deadline) {
                    (RecordMode::Replay, _) => None,
                    (RecordMode::Cache, Some(d)) => match tokio::time::timeout_at(d, rec.flight(&key)).await {
                        Ok(guard) => Some(guard),
                        Err(_) => {
                            let why = "the run's time budget ends while an identical request is in flight";
                            return Err(HttpFailure::new(HttpCode::TimeBudget, why.to_string()));
                        }
                    },
                    (RecordMode::Cache, None) => Some(rec.flight(&key).await),
                };
                match rec.load(&key)? {
                    Some(answer) => {
                        let answer = kept(durable.as_ref(), self.config.repetition, answer).await?;
                        return wire::read_reply_as(&answer, &self.config.model, reading);
                    }
                    None if rec.mode() == RecordMode::Replay => {
                        return Err(HttpFailure::new(
                            HttpCode::ReplayMiss,
                            // the key stays out of the message: the trace's redactor would
                            // take its runs of digits for phone numbers
                            format!("no recorded answer to this exact request in {}", rec.dir().display()),
                        ));
                    }
                    None => Some((rec, key, flight)),
                }
            }
            None => None,
        };
        let pool = self.pool()?;
        let url = ep.chat_url();
        let mut retries = 0u32;
        let deadline = self.deadline;
        loop {
            let (permit, limit) = connection(&ep, deadline).await?;
            let cut = limit < ep.timeout;
            let outcome = attempt(&pool, &ep, &url, &body, limit).await;
            drop(permit);
            let (failure, retry_after) = match outcome {
                Attempt::Fail(f) if cut && f.code == HttpCode::Timeout => {
                    return Err(past_deadline("during the call"));
                }
                Attempt::Answer(bytes) => {
                    // the recording's answer is the one used: ours, or the one another
                    // process kept first
                    let bytes = match &recorded {
                        Some((rec, key, _flight)) => rec.store(key, self.config.repetition, &body, bytes)?,
                        None => bytes,
                    };
                    let bytes = kept(durable.as_ref(), self.config.repetition, bytes).await?;
                    return wire::read_reply_as(&bytes, &self.config.model, reading);
                }
                Attempt::Fail(f) => return Err(f),
                Attempt::Retry { failure, retry_after } => (failure, retry_after),
            };
            let wait = self.retry_wait(&ep, &failure, retry_after, retries)?;
            tracing::debug!(
                model = %self.config.model,
                code = failure.code.as_str(),
                retry = retries + 1,
                wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                "model call retried"
            );
            self.sleeper.sleep(wait).await;
            retries += 1;
        }
    }
}

impl HttpClient {
    /// How long to wait before retry number `retries + 1` after `failure`: the server's
    /// `Retry-After` (refused when longer than allowed) or the backoff, jittered; refused
    /// when the wait would pass the run's deadline or no retry is left.
    fn retry_wait(
        &mut self,
        ep: &Endpoint,
        failure: &HttpFailure,
        retry_after: Option<Duration>,
        retries: u32,
    ) -> Result<Duration, HttpFailure> {
        if retries >= ep.retry.max_retries {
            return Err(HttpFailure::new(failure.code, format!("{} (after {retries} retries)", failure.message)));
        }
        let wait = match retry_after {
            Some(wait) if wait > ep.retry.max_retry_after => {
                return Err(HttpFailure::new(
                    failure.code,
                    format!(
                        "{} (Retry-After {}s is longer than the {}s allowed)",
                        failure.message,
                        wait.as_secs(),
                        ep.retry.max_retry_after.as_secs()
                    ),
                ));
            }
            Some(wait) => {
                let chance = self.chance();
                ep.retry.jittered(wait, true, chance)
            }
            None => {
                let chance = self.chance();
                ep.retry.jittered(ep.retry.backoff(retries), false, chance)
            }
        };
        if let Some(d) = self.deadline
            && tokio::time::Instant::now() + wait >= d
        {
            return Err(HttpFailure::new(
                HttpCode::TimeBudget,
                format!(
                    "{} (a wait of {:.1}s before retrying passes the run's time budget)",
                    failure.message,
                    wait.as_secs_f64()
                ),
            ));
        }
        Ok(wait)
    }
}

/// A failure for a call that ran out of the run's time budget `what` (`before the call`).
fn past_deadline(what: &str) -> HttpFailure {
    HttpFailure::new(HttpCode::TimeBudget, format!("the run's time budget ends {what}"))
}

/// A connection permit and the attempt's timeout. The wait for the permit is bounded by
/// the run's deadline, never by the attempt's timeout, which starts once the permit is
/// held and is cut to what is left before the deadline.
async fn connection(
    ep: &Endpoint,
    deadline: Option<tokio::time::Instant>,
) -> Result<(Option<config::Held>, Duration), HttpFailure> {
    let permit = match deadline {
        Some(d) => match tokio::time::timeout_at(d, ep.connections.acquire()).await {
            Ok(p) => p,
            Err(_) => return Err(past_deadline("while waiting for a connection")),
        },
        None => ep.connections.acquire().await,
    };
    let mut limit = ep.timeout;
    if let Some(d) = deadline {
        let left = d.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err(past_deadline("before the call"));
        }
        limit = limit.min(left);
    }
    Ok((permit, limit))
}

impl LlmClient for HttpClient {
    fn model(&self) -> &str {
        &self.config.model
    }

    fn complete<'a>(&'a mut self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        Box::pin(self.cancellable(request, Reading::Proposal))
    }

    fn complete_message<'a>(&'a mut self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        Box::pin(self.cancellable(request, Reading::Message))
    }

    fn bind_cancel(&mut self, token: &CancellationToken) {
        self.cancel = Some(token.clone());
    }

    fn set_deadline(&mut self, deadline: Option<tokio::time::Instant>) {
        self.deadline = deadline;
    }

    fn max_tokens(&self) -> Option<u32> {
        Some(self.config.max_tokens)
    }
}

impl HttpClient {
    /// One call, abandoned when the client's own token fires.
    async fn cancellable(&mut self, request: &LlmRequest, reading: Reading) -> Result<LlmResponse, ModelError> {
        let result = match self.cancel.clone() {
            Some(token) => tokio::select! {
                biased;
                () = token.cancelled() => Err(HttpFailure::new(HttpCode::Cancelled, "model call abandoned")),
                r = self.call(request, reading) => r,
            },
            None => self.call(request, reading).await,
        };
        result.map_err(ModelError::from)
    }
}

/// Makes `answer` durable in a durable run's exchange log (when the call has one) and
/// returns the bytes to read: the very bytes kept, so a resumed run reads what this one
/// read.
async fn kept(
    durable: Option<&(Exchanges, String, u32)>,
    repetition: u32,
    answer: Vec<u8>,
) -> Result<Vec<u8>, HttpFailure> {
    let Some((log, key, occurrence)) = durable else { return Ok(answer) };
    let text = String::from_utf8_lossy(&answer).into_owned();
    let kept = ExchangeAnswer { key: key.clone(), occurrence: *occurrence, repetition, answer: text.clone() };
    log.log().keep(kept).await.map_err(|why| HttpFailure::new(HttpCode::ExchangeNotDurable, why))?;
    Ok(text.into_bytes())
}

enum Attempt {
    Answer(Vec<u8>),
    Retry { failure: HttpFailure, retry_after: Option<Duration> },
    Fail(HttpFailure),
}

async fn attempt(pool: &reqwest::Client, ep: &Endpoint, url: &reqwest::Url, body: &[u8], limit: Duration) -> Attempt {
    let work = async {
        let mut req = pool
            .post(url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json")
            .body(body.to_vec());
        if let Some(key) = &ep.api_key {
            // reqwest marks the header sensitive, so it is never printed either
            req = req.bearer_auth(key.expose());
        }
        let mut resp = req.send().await.map_err(transport_failure)?;
        let status = resp.status();
        let retry_after = resp.headers().get(RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(retry_after_secs);
        let bytes = read_limited(&mut resp, ep.max_response_bytes).await?;
        Ok::<_, HttpFailure>((status, retry_after, bytes))
    };
    match tokio::time::timeout(limit, work).await {
        Err(_) => Attempt::Fail(HttpFailure::new(
            HttpCode::Timeout,
            format!("no complete answer within {:.1}s", limit.as_secs_f64()),
        )),
        Ok(Err(f)) => Attempt::Fail(f),
        Ok(Ok((status, retry_after, bytes))) => classify(status, retry_after, bytes),
    }
}

fn classify(status: StatusCode, retry_after: Option<Duration>, bytes: Vec<u8>) -> Attempt {
    if status.is_success() {
        return Attempt::Answer(bytes);
    }
    let message = format!("HTTP {}: {}", status.as_u16(), quote(&bytes));
    let failure = |code| HttpFailure::new(code, message.clone());
    match status.as_u16() {
        429 => Attempt::Retry { failure: failure(HttpCode::RateLimited), retry_after },
        500..=599 => Attempt::Retry { failure: failure(HttpCode::ServerError), retry_after },
        401 | 403 => Attempt::Fail(failure(HttpCode::Unauthorized)),
        404 => Attempt::Fail(failure(HttpCode::NotFound)),
        400..=499 => Attempt::Fail(failure(HttpCode::ClientError)),
        _ => Attempt::Fail(failure(HttpCode::UnexpectedStatus)),
    }
}

/// The start of an error body, on one line, redacted: a server may echo the key it was
/// sent (`{"error": "bad key …"}`), which is then hidden before the message exists.
fn quote(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::security::redact(&one_line).chars().take(BODY_QUOTE_CHARS).collect()
}

async fn read_limited(resp: &mut reqwest::Response, max: usize) -> Result<Vec<u8>, HttpFailure> {
    let too_large = || HttpFailure::new(HttpCode::ResponseTooLarge, format!("answer longer than {max} bytes"));
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let mut out = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(transport_failure)? {
        if out.len() + chunk.len() > max {
            return Err(too_large());
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Reads the seconds form of `Retry-After`; the HTTP-date form gives `None` (the
/// client then uses its own backoff, so it never needs the wall clock).
pub(crate) fn retry_after_secs(value: &str) -> Option<Duration> {
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

fn transport_failure(e: reqwest::Error) -> HttpFailure {
    // the URL is the configured base URL: known, and long enough to hide the cause
    let e = e.without_url();
    let code = if e.is_timeout() {
        HttpCode::Timeout
    } else if e.is_connect() {
        if refused(&e) { HttpCode::ConnectionRefused } else { HttpCode::ConnectFailed }
    } else {
        HttpCode::Transport
    };
    HttpFailure::new(code, error_chain(&e))
}

fn refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        cur = err.source();
    }
    false
}

/// An error and its causes, the most specific first (the trace clips details, so the
/// cause that names the problem comes before the generic "error sending request").
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(err) = cur {
        let s = err.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = err.source();
    }
    parts.reverse();
    parts.join(" <- ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_snake_case_and_match_serde() {
        for code in HttpCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            assert!(code.as_str().bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        }
        let e: ModelError = HttpFailure::new(HttpCode::Timeout, "slow").into();
        assert_eq!(e, ModelError::failed("timeout", "slow"));
    }

    #[test]
    fn retry_after_reads_seconds_only() {
        assert_eq!(retry_after_secs(" 2 "), Some(Duration::from_secs(2)));
        assert_eq!(retry_after_secs("0"), Some(Duration::ZERO));
        assert_eq!(retry_after_secs("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(retry_after_secs("-1"), None);
    }

    #[test]
    fn statuses_are_classified() {
        let code = |s: u16| match classify(StatusCode::from_u16(s).unwrap(), None, b"{\"error\":\"x\"}".to_vec()) {
            Attempt::Answer(_) => "answer",
            Attempt::Retry { failure, .. } | Attempt::Fail(failure) => failure.code.as_str(),
        };
        let got: Vec<_> = [200, 429, 500, 503, 401, 403, 404, 400, 422, 302].iter().map(|s| code(*s)).collect();
        assert_eq!(
            got,
            [
                "answer",
                "rate_limited",
                "server_error",
                "server_error",
                "unauthorized",
                "unauthorized",
                "not_found",
                "client_error",
                "client_error",
                "unexpected_status"
            ]
        );
        assert!(matches!(classify(StatusCode::BAD_REQUEST, None, vec![]), Attempt::Fail(_)));
        assert_eq!(quote("a\n  b\tc".as_bytes()), "a b c");
    }
}
