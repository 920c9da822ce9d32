//! Configuration of the HTTP client: where the server is ([`Endpoint`]), which model a
//! client asks ([`HttpConfig`]), and how flags and environment variables resolve into
//! them. The API key comes from the environment only and never appears in `Debug`
//! output, errors or traces.

use reqwest::Url;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use super::record::{RecordMode, Recording};

/// Environment variable holding the server's base URL (the `--base-url` flag wins).
pub(crate) const ENV_BASE_URL: &str = "ROLEGATE_BASE_URL";
/// Environment variable holding the API key (there is no flag for it, on purpose).
pub(crate) const ENV_API_KEY: &str = "ROLEGATE_API_KEY";
/// Environment variable choosing `native` or `text` tool calling (`--tool-mode` wins).
pub(crate) const ENV_TOOL_MODE: &str = "ROLEGATE_TOOL_MODE";
/// Environment variable with the per-call timeout in seconds (`--timeout-secs` wins).
pub(crate) const ENV_TIMEOUT_SECS: &str = "ROLEGATE_TIMEOUT_SECS";
/// Environment variable with the most retries after a 429 or 5xx (`--retries` wins).
pub(crate) const ENV_RETRIES: &str = "ROLEGATE_RETRIES";

/// Longest model name accepted (it is also the price table key).
pub(crate) const MAX_MODEL_NAME: usize = 200;

/// Errors in a model configuration: caught before any run starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A `--model` value that is neither `fake:<kind>` nor `openai:<name>`.
    #[error("unknown model {0:?}: use fake:<kind> or openai:<name>")]
    UnknownModel(String),
    /// A model name that is empty, too long or holds control characters.
    #[error("bad model name {0:?}: 1 to 200 characters, no control characters")]
    BadModelName(String),
    /// An HTTP model without a base URL.
    #[error(
        "an openai: model needs the server's base URL: --base-url or {ENV_BASE_URL}, e.g. http://127.0.0.1:8000/v1"
    )]
    MissingBaseUrl,
    /// A base URL that does not parse or is not usable.
    #[error("bad base URL: {0}")]
    BadBaseUrl(String),
    /// A setting (flag or environment variable) with a bad value.
    #[error("bad value for {name}: {message}")]
    BadSetting {
        /// The flag or variable.
        name: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// An API key. It is sent as a bearer token and shown nowhere: `Debug` prints a
/// placeholder and there is no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// A key; `None` for an empty or blank value. The key is registered with the
    /// redactor ([`crate::security::register_secret`]): from now on its exact value is
    /// replaced in every trace, report and error message, whatever its shape.
    pub fn new(key: impl Into<String>) -> Option<Self> {
        let key = key.into();
        if key.trim().is_empty() {
            return None;
        }
        crate::security::register_secret(key.trim());
        Some(Self(key.trim().to_string()))
    }

    /// The key itself, for the `Authorization` header only.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<hidden>)")
    }
}

/// How tools are offered to the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolMode {
    /// OpenAI function calling: the task's tools plus a `finish` function are sent as
    /// `tools`; a reply's `tool_calls` become the proposal. A plain text reply is still
    /// read as proposal JSON.
    #[default]
    Native,
    /// For servers without tool calling: no `tools` are sent; the model answers the
    /// proposal JSON as text (the system prompt lists the tools). One surrounding code
    /// fence is tolerated.
    Text,
}

impl ToolMode {
    /// `native` or `text`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Text => "text",
        }
    }
}

impl FromStr for ToolMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "native" => Ok(Self::Native),
            "text" => Ok(Self::Text),
            other => Err(format!("{other:?} is not a tool mode (native or text)")),
        }
    }
}

/// What the server is told about calling the offered functions: the `tool_choice` field,
/// sent whenever functions are offered (some servers, llama.cpp's among them, read a
/// missing value as `none` and drop the functions from the prompt).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model chooses between calling a function and answering in text.
    #[default]
    Auto,
    /// The model must call a function (the task's tools or `finish`).
    Required,
    /// The model must not call a function: it answers in text (the functions stay in the
    /// request so that the server still shows them to the model).
    None,
}

impl ToolChoice {
    /// `auto`, `required` or `none`: the value sent.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Required => "required",
            Self::None => "none",
        }
    }
}

impl FromStr for ToolChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "auto" => Ok(Self::Auto),
            "required" => Ok(Self::Required),
            "none" => Ok(Self::None),
            other => Err(format!("{other:?} is not a tool choice (auto, required or none)")),
        }
    }
}

/// A sampling temperature: a finite number from 0 to 2 (the OpenAI range).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Temperature(f64);

// never NaN: the constructor refuses it
impl Eq for Temperature {}

impl Temperature {
    /// A temperature.
    ///
    /// # Errors
    /// [`ConfigError::BadSetting`] for a value that is not finite or outside 0 to 2.
    pub fn new(value: f64) -> Result<Self, ConfigError> {
        if value.is_finite() && (0.0..=2.0).contains(&value) {
            Ok(Self(value))
        } else {
            Err(ConfigError::BadSetting { name: "--temperature", message: "a number from 0 to 2".into() })
        }
    }

    /// The value sent.
    pub fn get(self) -> f64 {
        self.0
    }
}

/// The most model requests in flight at once, shared by every client built from one
/// [`Endpoint`] (clones share the permits). A call waits for a permit before each attempt
/// and gives it back when the attempt ends (a backoff holds none); the attempt's timeout
/// starts once the permit is held, so time in the queue never counts against it, while
/// the run's deadline bounds the wait too.
///
/// It also keeps, for every attempt, how long it waited for its permit and how long it held
/// it ([`ConnectionLimit::times`]): queue wait and model latency reported apart.
#[derive(Clone)]
pub struct ConnectionLimit {
    max: usize,
    permits: Arc<tokio::sync::Semaphore>,
    times: Arc<std::sync::Mutex<ConnectionTimes>>,
}

/// Most attempts whose times a [`ConnectionLimit`] keeps (the later ones are counted only).
const MAX_TIMED: usize = 1 << 20;

/// The queue wait and the time held of every attempt made under one [`ConnectionLimit`],
/// in the order the permits were given back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectionTimes {
    /// Attempts that held a permit.
    pub attempts: u64,
    /// How long each waited for its permit.
    pub waits: Vec<std::time::Duration>,
    /// How long each held it (the request to the server and its answer).
    pub held: Vec<std::time::Duration>,
}

impl ConnectionTimes {
    /// The `q`-quantile (0 to 1) of `times`, by the nearest rank; zero for none.
    pub fn quantile(times: &[std::time::Duration], q: f64) -> std::time::Duration {
        let mut sorted = times.to_vec();
        sorted.sort_unstable();
        if sorted.is_empty() {
            return std::time::Duration::ZERO;
        }
        // nearest rank: the smallest value with at least q of the values at or below it
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
        let rank = ((q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize).max(1);
        sorted[rank.min(sorted.len()) - 1]
    }

    /// One line: attempts, queue wait p50/p95/total, model latency p50/p95.
    pub fn line(&self) -> String {
        let s = |d: std::time::Duration| format!("{:.2} s", d.as_secs_f64());
        let total: std::time::Duration = self.waits.iter().sum();
        format!(
            "model requests {} | queue wait p50 {} p95 {} total {} | model latency p50 {} p95 {}",
            self.attempts,
            s(Self::quantile(&self.waits, 0.5)),
            s(Self::quantile(&self.waits, 0.95)),
            s(total),
            s(Self::quantile(&self.held, 0.5)),
            s(Self::quantile(&self.held, 0.95)),
        )
    }
}

/// A permit of a [`ConnectionLimit`]: given back, with the time it was held noted, when
/// dropped.
pub(crate) struct Held {
    _permit: tokio::sync::OwnedSemaphorePermit,
    since: tokio::time::Instant,
    waited: std::time::Duration,
    times: Arc<std::sync::Mutex<ConnectionTimes>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        // a poisoned lock only loses figures, never a permit
        if let Ok(mut t) = self.times.lock() {
            t.attempts += 1;
            if t.waits.len() < MAX_TIMED {
                t.waits.push(self.waited);
                t.held.push(self.since.elapsed());
            }
        }
    }
}

impl ConnectionLimit {
    /// A limit of `max` requests in flight.
    ///
    /// # Errors
    /// [`ConfigError::BadSetting`] for 0 or more than [`MAX_CONNECTIONS`].
    pub fn new(max: usize) -> Result<Self, ConfigError> {
        if !(1..=MAX_CONNECTIONS).contains(&max) {
            return Err(ConfigError::BadSetting {
                name: "--max-connections",
                message: format!("from 1 to {MAX_CONNECTIONS}"),
            });
        }
        Ok(Self { max, permits: Arc::new(tokio::sync::Semaphore::new(max)), times: Arc::default() })
    }

    /// The limit.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.max - self.permits.available_permits()
    }

    /// Waits for a permit (held until the returned guard drops).
    pub(crate) async fn acquire(&self) -> Option<Held> {
        let asked = tokio::time::Instant::now();
        // the semaphore is never closed, so this is `Some`
        let permit = self.permits.clone().acquire_owned().await.ok()?;
        let since = tokio::time::Instant::now();
        Some(Held { _permit: permit, since, waited: since - asked, times: self.times.clone() })
    }

    /// The queue wait and time held of every attempt made so far under this limit.
    pub fn times(&self) -> ConnectionTimes {
        self.times.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

impl PartialEq for ConnectionLimit {
    fn eq(&self, other: &Self) -> bool {
        self.max == other.max
    }
}

impl Eq for ConnectionLimit {}

impl fmt::Debug for ConnectionLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ConnectionLimit({})", self.max)
    }
}

/// How much chance is added to the waits between retries, so that many clients failing
/// together do not retry in lockstep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Jitter {
    /// The waits as computed (tests that assert exact waits).
    Off,
    /// Jitter from a generator seeded with this value: the same seed, the same waits.
    Seeded(u64),
    /// Jitter from a generator seeded once per client from the process's random state.
    #[default]
    Random,
}

/// Retries after a 429 or a 5xx answer. With [`Jitter`] (on by default): a backoff
/// becomes a wait between its half and its whole, a `Retry-After` a wait between what
/// the server asked and a tenth more; never less than the server asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Most retries after the first attempt (0: no retry).
    pub max_retries: u32,
    /// The first backoff; each further retry doubles it.
    pub base_delay: Duration,
    /// The longest backoff.
    pub max_delay: Duration,
    /// The longest `Retry-After` honoured; a server asking for more ends the call with
    /// its code at once instead of waiting.
    pub max_retry_after: Duration,
    /// Chance added to the waits.
    pub jitter: Jitter,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 2,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
            jitter: Jitter::default(),
        }
    }
}

impl RetryPolicy {
    /// The backoff before retry number `retry` (0-based): `base_delay * 2^retry`, at most
    /// `max_delay`.
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX);
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }

    /// `wait` with jitter: `chance` in `[0, 1)` moves a backoff between its half and its
    /// whole, and a server's `Retry-After` between itself and a tenth more.
    pub fn jittered(&self, wait: Duration, server_asked: bool, chance: f64) -> Duration {
        if self.jitter == Jitter::Off {
            return wait;
        }
        let chance = chance.clamp(0.0, 1.0);
        if server_asked { wait + wait.mul_f64(chance / 10.0) } else { wait / 2 + (wait / 2).mul_f64(chance) }
    }
}

/// Where the server is and how to talk to it; shared by every role and design of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The base URL, ending in `/` (e.g. `http://127.0.0.1:8000/v1/`); requests go to
    /// `chat/completions` under it.
    pub base_url: Url,
    /// The API key, if the server wants one.
    pub api_key: Option<ApiKey>,
    /// Native tool calling or proposal JSON as text.
    pub tool_mode: ToolMode,
    /// The limit of one attempt (connect, send, whole answer).
    pub timeout: Duration,
    /// Retries after 429 and 5xx.
    pub retry: RetryPolicy,
    /// The largest answer body read, in bytes.
    pub max_response_bytes: usize,
    /// `tool_choice`, sent whenever functions are offered.
    pub tool_choice: ToolChoice,
    /// `temperature`, sent when set (else the server's default).
    pub temperature: Option<Temperature>,
    /// `seed`, sent when set (servers that support it sample reproducibly).
    pub seed: Option<u64>,
    /// The output allowance of each call in tokens (`max_tokens`), for every
    /// [`HttpConfig`] made from this endpoint; a role may set its own.
    pub max_tokens: u32,
    /// The most requests in flight, shared by every client made from this endpoint.
    pub connections: ConnectionLimit,
    /// Record answers to a directory, or replay them from one without a server.
    pub recording: Option<Recording>,
    /// A durable run's exchange log: asked before the recording and the server, and
    /// every new answer is made durable in it before it is used.
    pub exchanges: Option<super::exchanges::Exchanges>,
}

/// The default per-attempt timeout.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The default largest answer body.
pub(crate) const DEFAULT_MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
/// The default output allowance of a real model's call: room for the longest finding (a
/// 600-character claim, its sources and the JSON around them, about 250 tokens) four
/// times over, for tokenizers that split more finely and models that think aloud first.
pub const DEFAULT_MAX_TOKENS: u32 = 1024;
/// The largest `--max-tokens` accepted.
pub const MAX_MAX_TOKENS: u32 = 131_072;
/// The default number of model requests in flight at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 8;
/// The largest `--max-connections` accepted.
pub const MAX_CONNECTIONS: usize = 1024;
/// The base URL of an endpoint that only replays a recording (it is never contacted).
const REPLAY_BASE_URL: &str = "http://replay.invalid/v1/";

impl Endpoint {
    /// An endpoint with default settings and no key.
    ///
    /// # Errors
    /// [`ConfigError::BadBaseUrl`] for a URL that does not parse, is not `http` or
    /// `https`, carries a user name or password (keys belong in [`ENV_API_KEY`]), a query
    /// or a fragment.
    pub fn new(base_url: &str) -> Result<Self, ConfigError> {
        Ok(Self {
            base_url: parse_base_url(base_url)?,
            api_key: None,
            tool_mode: ToolMode::default(),
            timeout: DEFAULT_TIMEOUT,
            retry: RetryPolicy::default(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            tool_choice: ToolChoice::default(),
            temperature: None,
            seed: None,
            max_tokens: DEFAULT_MAX_TOKENS,
            connections: ConnectionLimit::new(DEFAULT_MAX_CONNECTIONS)?,
            recording: None,
            exchanges: None,
        })
    }

    /// Resolves an endpoint from flags (which win) and the environment, read through
    /// `env` (the binary passes `std::env::var`; tests pass a map).
    ///
    /// # Errors
    /// [`ConfigError::MissingBaseUrl`] when neither gives a base URL; [`ConfigError`]
    /// variants for values that do not parse.
    pub fn resolve(flags: &HttpFlags, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        if flags.cache.is_some() && flags.replay.is_some() {
            return Err(ConfigError::BadSetting {
                name: "--replay",
                message: "--cache records and replays with a server, --replay without one: give one of them".into(),
            });
        }
        // a replay never contacts a server, so it needs no base URL
        let url = match (flags.base_url.clone().or_else(|| env(ENV_BASE_URL)), &flags.replay) {
            (Some(url), _) => url,
            (None, Some(_)) => REPLAY_BASE_URL.to_string(),
            (None, None) => return Err(ConfigError::MissingBaseUrl),
        };
        let mut endpoint = Self::new(&url)?;
        endpoint.tool_choice = flags.tool_choice.unwrap_or_default();
        endpoint.temperature = flags.temperature.map(Temperature::new).transpose()?;
        endpoint.seed = flags.seed;
        if let Some(n) = flags.max_tokens {
            endpoint.max_tokens = check_max_tokens("--max-tokens", n)?;
        }
        if let Some(n) = flags.max_connections {
            endpoint.connections = ConnectionLimit::new(n)?;
        }
        endpoint.recording = match (&flags.cache, &flags.replay) {
            (Some(dir), _) => Some(Recording::new(dir.clone(), RecordMode::Cache)?),
            (None, Some(dir)) => Some(Recording::new(dir.clone(), RecordMode::Replay)?),
            (None, None) => None,
        };
        endpoint.api_key = env(ENV_API_KEY).and_then(ApiKey::new);
        endpoint.tool_mode = match (flags.tool_mode, env(ENV_TOOL_MODE)) {
            (Some(m), _) => m,
            (None, Some(v)) => v.parse().map_err(|message| ConfigError::BadSetting { name: ENV_TOOL_MODE, message })?,
            (None, None) => ToolMode::default(),
        };
        let timeout = match flags.timeout_secs {
            Some(s) => Some(("--timeout-secs", s)),
            None => match env(ENV_TIMEOUT_SECS) {
                Some(v) => Some((
                    ENV_TIMEOUT_SECS,
                    v.trim()
                        .parse::<f64>()
                        .map_err(|e| ConfigError::BadSetting { name: ENV_TIMEOUT_SECS, message: e.to_string() })?,
                )),
                None => None,
            },
        };
        if let Some((name, secs)) = timeout {
            endpoint.timeout = Duration::try_from_secs_f64(secs).ok().filter(|d| !d.is_zero()).ok_or_else(|| {
                ConfigError::BadSetting { name, message: "must be a positive number of seconds".into() }
            })?;
        }
        endpoint.retry.max_retries = match (flags.max_retries, env(ENV_RETRIES)) {
            (Some(n), _) => n,
            (None, Some(v)) => v.trim().parse().map_err(|e: std::num::ParseIntError| ConfigError::BadSetting {
                name: ENV_RETRIES,
                message: e.to_string(),
            })?,
            (None, None) => endpoint.retry.max_retries,
        };
        if endpoint.retry.max_retries > 10 {
            return Err(ConfigError::BadSetting { name: "retries", message: "at most 10".into() });
        }
        Ok(endpoint)
    }

    /// The configuration of a client asking `model` at this endpoint.
    ///
    /// # Errors
    /// [`ConfigError::BadModelName`].
    pub fn config(&self, model: &str) -> Result<HttpConfig, ConfigError> {
        check_model_name(model)?;
        Ok(HttpConfig { model: model.to_string(), endpoint: self.clone(), max_tokens: self.max_tokens, repetition: 0 })
    }

    /// The chat-completions URL.
    pub fn chat_url(&self) -> Url {
        // `base_url` ends in `/` and `chat/completions` is a relative path: joining cannot
        // fail, but fall back to the base rather than panic.
        self.base_url.join("chat/completions").unwrap_or_else(|_| self.base_url.clone())
    }

    /// True when the server is on this machine (loopback), where no proxy is used.
    pub fn is_loopback(&self) -> bool {
        let Some(host) = self.base_url.host_str() else { return false };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

/// What one HTTP client needs: the model it asks (the name sent to the server and the
/// price table key) and the endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpConfig {
    /// The model name, as the server knows it and as `data/prices.json` prices it.
    pub model: String,
    /// The server.
    pub endpoint: Endpoint,
    /// The output allowance of each call, in tokens (`max_tokens`); the designs check
    /// their budgets against it before each call.
    pub max_tokens: u32,
    /// The repetition this client's calls belong to: part of a recorded exchange's key, so
    /// that repeated runs of one cell are recorded apart (0 unless the caller sets it).
    pub repetition: u32,
}

impl HttpConfig {
    /// The same endpoint asking another model (e.g. one model per role).
    ///
    /// # Errors
    /// [`ConfigError::BadModelName`].
    pub fn with_model(&self, model: &str) -> Result<Self, ConfigError> {
        Ok(Self { max_tokens: self.max_tokens, repetition: self.repetition, ..self.endpoint.config(model)? })
    }

    /// The same configuration with another output allowance.
    ///
    /// # Errors
    /// [`ConfigError::BadSetting`] for 0 or more than [`MAX_MAX_TOKENS`].
    pub fn with_max_tokens(&self, max_tokens: u32) -> Result<Self, ConfigError> {
        Ok(Self { max_tokens: check_max_tokens("--max-tokens", max_tokens)?, ..self.clone() })
    }
}

/// Checks an output allowance: 1 to [`MAX_MAX_TOKENS`].
pub(crate) fn check_max_tokens(name: &'static str, n: u32) -> Result<u32, ConfigError> {
    if (1..=MAX_MAX_TOKENS).contains(&n) {
        Ok(n)
    } else {
        Err(ConfigError::BadSetting { name, message: format!("from 1 to {MAX_MAX_TOKENS} tokens") })
    }
}

/// Settings given as command-line flags; each wins over its environment variable.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HttpFlags {
    /// `--base-url`.
    pub base_url: Option<String>,
    /// `--tool-mode`.
    pub tool_mode: Option<ToolMode>,
    /// `--timeout-secs`.
    pub timeout_secs: Option<f64>,
    /// `--retries`.
    pub max_retries: Option<u32>,
    /// `--tool-choice`.
    pub tool_choice: Option<ToolChoice>,
    /// `--temperature`.
    pub temperature: Option<f64>,
    /// `--seed`.
    pub seed: Option<u64>,
    /// `--max-tokens`.
    pub max_tokens: Option<u32>,
    /// `--max-connections`.
    pub max_connections: Option<usize>,
    /// `--cache DIR`.
    pub cache: Option<PathBuf>,
    /// `--replay DIR`.
    pub replay: Option<PathBuf>,
}

/// Checks a model name: 1 to 200 characters, no control characters.
pub(crate) fn check_model_name(model: &str) -> Result<(), ConfigError> {
    if model.is_empty() || model.chars().count() > MAX_MODEL_NAME || model.chars().any(char::is_control) {
        return Err(ConfigError::BadModelName(model.chars().take(40).collect()));
    }
    Ok(())
}

pub(crate) fn parse_base_url(text: &str) -> Result<Url, ConfigError> {
    let mut url = Url::parse(text.trim()).map_err(|e| ConfigError::BadBaseUrl(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ConfigError::BadBaseUrl(format!("scheme {:?}: use http or https", url.scheme())));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ConfigError::BadBaseUrl(format!("no credentials in the URL: put the key in {ENV_API_KEY}")));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(ConfigError::BadBaseUrl("no query or fragment".into()));
    }
    if url.host().is_none() {
        return Err(ConfigError::BadBaseUrl("no host".into()));
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn base_urls_are_normalised_and_credentials_refused() {
        let e = Endpoint::new("http://127.0.0.1:8000/v1").unwrap();
        assert_eq!(e.chat_url().as_str(), "http://127.0.0.1:8000/v1/chat/completions");
        assert!(e.is_loopback());
        let e = Endpoint::new("https://api.example.org/v1/").unwrap();
        assert_eq!(e.chat_url().as_str(), "https://api.example.org/v1/chat/completions");
        assert!(!e.is_loopback());
        for bad in ["ftp://x/v1", "not a url", "http://user:secret@host/v1", "http://host/v1?key=1", "unix:/tmp/s"] {
            let err = Endpoint::new(bad).unwrap_err();
            assert!(matches!(err, ConfigError::BadBaseUrl(_)), "{bad}: {err}");
            assert!(!err.to_string().contains("secret"));
        }
    }

    #[test]
    fn flags_win_over_the_environment_and_the_key_comes_only_from_it() {
        let env = env_of(&[
            (ENV_BASE_URL, "http://localhost:11434/v1"),
            (ENV_API_KEY, "sk-test-123"),
            (ENV_TOOL_MODE, "text"),
            (ENV_TIMEOUT_SECS, "30"),
            (ENV_RETRIES, "1"),
        ]);
        let e = Endpoint::resolve(&HttpFlags::default(), &env).unwrap();
        assert_eq!(e.base_url.as_str(), "http://localhost:11434/v1/");
        assert_eq!(e.tool_mode, ToolMode::Text);
        assert_eq!(e.timeout, Duration::from_secs(30));
        assert_eq!(e.retry.max_retries, 1);
        assert_eq!(e.api_key.as_ref().map(ApiKey::expose), Some("sk-test-123"));
        assert!(!format!("{e:?}").contains("sk-test"), "the key never shows in Debug");
        let flags = HttpFlags {
            base_url: Some("http://127.0.0.1:8080/v1".into()),
            tool_mode: Some(ToolMode::Native),
            timeout_secs: Some(5.0),
            max_retries: Some(0),
            ..HttpFlags::default()
        };
        let e = Endpoint::resolve(&flags, &env).unwrap();
        assert_eq!(e.base_url.as_str(), "http://127.0.0.1:8080/v1/");
        assert_eq!((e.tool_mode, e.timeout, e.retry.max_retries), (ToolMode::Native, Duration::from_secs(5), 0));
        assert_eq!(Endpoint::resolve(&HttpFlags::default(), &env_of(&[])), Err(ConfigError::MissingBaseUrl));
        let e = Endpoint::resolve(&HttpFlags::default(), &env_of(&[(ENV_BASE_URL, "http://h/v1"), (ENV_API_KEY, " ")]))
            .unwrap();
        assert_eq!(e.api_key, None, "a blank key is no key");
    }

    #[test]
    fn bad_settings_are_named() {
        let base = (ENV_BASE_URL, "http://h/v1");
        for (pairs, name) in [
            (vec![base, (ENV_TOOL_MODE, "smoke")], ENV_TOOL_MODE),
            (vec![base, (ENV_TIMEOUT_SECS, "soon")], ENV_TIMEOUT_SECS),
            (vec![base, (ENV_TIMEOUT_SECS, "0")], ENV_TIMEOUT_SECS),
            (vec![base, (ENV_TIMEOUT_SECS, "-1")], ENV_TIMEOUT_SECS),
            (vec![base, (ENV_RETRIES, "many")], ENV_RETRIES),
            (vec![base, (ENV_RETRIES, "11")], "retries"),
        ] {
            match Endpoint::resolve(&HttpFlags::default(), &env_of(&pairs)) {
                Err(ConfigError::BadSetting { name: n, .. }) => assert_eq!(n, name),
                other => panic!("{pairs:?}: {other:?}"),
            }
        }
        let e = Endpoint::new("http://h/v1").unwrap();
        assert!(e.config("qwen2.5:7b").is_ok());
        for bad in ["", "a\nb", &"m".repeat(201)] {
            assert!(matches!(e.config(bad), Err(ConfigError::BadModelName(_))));
        }
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let p = RetryPolicy::default();
        let got: Vec<u64> = (0..7).map(|i| p.backoff(i).as_millis() as u64).collect();
        assert_eq!(got, [500, 1000, 2000, 4000, 8000, 8000, 8000]);
        assert_eq!(p.backoff(u32::MAX), Duration::from_secs(8));
    }
}
