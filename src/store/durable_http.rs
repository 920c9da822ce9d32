//! Durable runs on a real model (`openai:NAME`): what a run's spec keeps so that
//! `rolegate resume` can build the same HTTP client again in another process
//! ([`HttpSpec`]), and building it ([`Rebuilt`]).
//!
//! The spec keeps the server's base URL, the tool mode, `tool_choice`, the output
//! allowance of each model (per role for the three roles), temperature, seed, the
//! per-attempt timeout, the retries, the connection limit, whether the run was priced at
//! zero, and whether an API key was sent, never the key itself: `ROLEGATE_API_KEY` is
//! read again when the run is carried on, and a run started with a key does not resume
//! without one ([`RebuildError::MissingApiKey`]). Every client of the run is given the
//! run's exchange log (`exchanges.rs`), so a call it made already is answered from the
//! store and a new answer is durable before it is used.

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

use crate::agent::Env;
use crate::model::http::config::ENV_API_KEY;
use crate::model::http::{ApiKey, ConnectionLimit, Endpoint, Exchanges, HttpConfig, Temperature, ToolChoice, ToolMode};
use crate::multi::{Behaviours, RoleSetup};

/// Why a durable run's model client cannot be built (again).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RebuildError {
    /// The run was started with an API key and `ROLEGATE_API_KEY` is not set now.
    #[error("missing_api_key: it was started with an API key; set ROLEGATE_API_KEY again to resume it")]
    MissingApiKey,
    /// A recorded setting does not build a client (say a base URL edited in the store).
    #[error("bad_setting: {0}")]
    BadSetting(String),
    /// `--cache` or `--replay`: a durable run keeps its exchanges in the store itself.
    #[error("recording: a durable run keeps its model exchanges in the store; leave out --cache and --replay")]
    Recording,
    /// The spec names an `openai:` model but keeps no settings for it.
    #[error("no_settings: the spec names {0} but keeps no server settings for it")]
    NoSettings(String),
}

/// One model of a durable run: its name at the server and its output allowance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleModel {
    /// The model name (as the server and the price table know it).
    pub name: String,
    /// `max_tokens` of each of its calls.
    pub max_tokens: u32,
}

impl RoleModel {
    /// The model of `config`.
    pub fn of(config: &HttpConfig) -> Self {
        Self { name: config.model.clone(), max_tokens: config.max_tokens }
    }
}

/// How to reach a durable run's real model(s) again, without the key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSpec {
    /// The server's base URL.
    pub base_url: String,
    /// True when the run sent an API key (`ROLEGATE_API_KEY` is then needed to resume).
    pub api_key: bool,
    /// `native` or `text`.
    pub tool_mode: String,
    /// `auto`, `required` or `none`.
    pub tool_choice: String,
    /// The per-attempt timeout, in milliseconds.
    pub timeout_ms: u64,
    /// Most retries after a 429 or 5xx.
    pub retries: u32,
    /// Most requests in flight.
    pub max_connections: usize,
    /// The sampling temperature sent, if any.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// The sampling seed sent, if any.
    #[serde(default)]
    pub seed: Option<u64>,
    /// The run's models are priced at zero (`--zero-price`).
    #[serde(default)]
    pub zero_price: bool,
    /// single, plan, PolicyPal: the model.
    #[serde(default)]
    pub model: Option<RoleModel>,
    /// multi: the planner's model (`None`: its fake behaviour).
    #[serde(default)]
    pub planner: Option<RoleModel>,
    /// multi: the researcher's model.
    #[serde(default)]
    pub researcher: Option<RoleModel>,
    /// multi: the reviewer's model.
    #[serde(default)]
    pub reviewer: Option<RoleModel>,
}

// never NaN: a temperature is checked when the spec is made and when it is rebuilt
impl Eq for HttpSpec {}

impl HttpSpec {
    /// The settings of `endpoint` (no model yet).
    ///
    /// # Errors
    /// [`RebuildError::Recording`] for an endpoint that records or replays.
    pub fn of(endpoint: &Endpoint, zero_price: bool) -> Result<Self, RebuildError> {
        if endpoint.recording.is_some() {
            return Err(RebuildError::Recording);
        }
        Ok(Self {
            base_url: endpoint.base_url.to_string(),
            api_key: endpoint.api_key.is_some(),
            tool_mode: endpoint.tool_mode.as_str().to_string(),
            tool_choice: endpoint.tool_choice.as_str().to_string(),
            timeout_ms: u64::try_from(endpoint.timeout.as_millis()).unwrap_or(u64::MAX),
            retries: endpoint.retry.max_retries,
            max_connections: endpoint.connections.max(),
            temperature: endpoint.temperature.map(Temperature::get),
            seed: endpoint.seed,
            zero_price,
            model: None,
            planner: None,
            researcher: None,
            reviewer: None,
        })
    }

    /// The same settings for one model (single, plan, PolicyPal).
    pub fn with_model(mut self, config: &HttpConfig) -> Self {
        self.model = Some(RoleModel::of(config));
        self
    }

    /// The same settings for the roles of `setup` that run a real model.
    pub fn with_roles(mut self, setup: &RoleSetup) -> Self {
        self.planner = setup.planner.as_ref().map(RoleModel::of);
        self.researcher = setup.researcher.as_ref().map(RoleModel::of);
        self.reviewer = setup.reviewer.as_ref().map(RoleModel::of);
        self
    }

    /// The endpoint again, its key read through `env` (the binary passes the process's
    /// environment), every call going through `exchanges` when given (a resume: the run's
    /// exchange log; a decision continuing a parked run in a process without the journal's
    /// writer asks the server directly).
    ///
    /// # Errors
    /// [`RebuildError`].
    pub(crate) fn endpoint(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        exchanges: Option<Exchanges>,
    ) -> Result<Endpoint, RebuildError> {
        let bad = |e: &dyn std::fmt::Display| RebuildError::BadSetting(e.to_string());
        let mut ep = Endpoint::new(&self.base_url).map_err(|e| bad(&e))?;
        // the key goes only where the run sent one: a run started without a key never
        // gets one on resume, whatever the environment holds now (the endpoint itself is
        // the one the run recorded, in its signed spec)
        ep.api_key = if self.api_key { env(ENV_API_KEY).and_then(ApiKey::new) } else { None };
        if self.api_key && ep.api_key.is_none() {
            return Err(RebuildError::MissingApiKey);
        }
        ep.tool_mode = self.tool_mode.parse::<ToolMode>().map_err(|e| bad(&e))?;
        ep.tool_choice = self.tool_choice.parse::<ToolChoice>().map_err(|e| bad(&e))?;
        ep.timeout = Duration::from_millis(self.timeout_ms);
        if ep.timeout.is_zero() {
            return Err(bad(&"a timeout of 0"));
        }
        if self.retries > 10 {
            return Err(bad(&"more than 10 retries"));
        }
        ep.retry.max_retries = self.retries;
        ep.connections = ConnectionLimit::new(self.max_connections).map_err(|e| bad(&e))?;
        ep.temperature = self.temperature.map(Temperature::new).transpose().map_err(|e| bad(&e))?;
        ep.seed = self.seed;
        ep.exchanges = exchanges;
        Ok(ep)
    }
}

/// A durable run's real models, built again for this process.
pub(crate) struct Rebuilt {
    /// single, plan, PolicyPal: the model.
    pub(crate) model: Option<HttpConfig>,
    /// multi: the roles, each on its model or its fake behaviour.
    pub(crate) roles: RoleSetup,
    /// The environment the run is priced in (its models at zero with `--zero-price`).
    pub(crate) env: Env,
}

impl Rebuilt {
    /// The models of `spec` at `endpoint`, priced in `env`.
    ///
    /// # Errors
    /// [`RebuildError::BadSetting`] for a model name or allowance that is refused.
    pub(crate) fn new(
        spec: &HttpSpec,
        endpoint: &Endpoint,
        behaviours: Behaviours,
        env: &Env,
    ) -> Result<Self, RebuildError> {
        let config = |m: &Option<RoleModel>| -> Result<Option<HttpConfig>, RebuildError> {
            let Some(m) = m else { return Ok(None) };
            let bad = |e: &dyn std::fmt::Display| RebuildError::BadSetting(e.to_string());
            let c = endpoint.config(&m.name).map_err(|e| bad(&e))?;
            Ok(Some(c.with_max_tokens(m.max_tokens).map_err(|e| bad(&e))?))
        };
        let roles = RoleSetup {
            behaviours,
            planner: config(&spec.planner)?,
            researcher: config(&spec.researcher)?,
            reviewer: config(&spec.reviewer)?,
        };
        let model = config(&spec.model)?;
        let mut env = env.clone();
        if spec.zero_price {
            let mut prices = (*env.prices).clone();
            for m in [&spec.model, &spec.planner, &spec.researcher, &spec.reviewer].into_iter().flatten() {
                prices = prices.with_zero_price(&m.name);
            }
            env.prices = Arc::new(prices);
        }
        Ok(Self { model, roles, env })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_keeps_every_setting_but_the_key_and_builds_the_same_endpoint() {
        let mut ep = Endpoint::new("http://127.0.0.1:9/v1").unwrap();
        ep.api_key = ApiKey::new("sk-durable-unit-test");
        ep.tool_mode = ToolMode::Text;
        ep.tool_choice = ToolChoice::Required;
        ep.timeout = Duration::from_millis(1500);
        ep.retry.max_retries = 3;
        ep.temperature = Some(Temperature::new(0.25).unwrap());
        ep.seed = Some(7);
        let spec = HttpSpec::of(&ep, false).unwrap().with_model(&ep.config("m").unwrap().with_max_tokens(64).unwrap());
        let json = serde_json::to_string(&spec).unwrap();
        assert!(!json.contains("sk-durable"), "the key is never kept: {json}");
        let back: HttpSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back, spec);
        struct Never;
        impl crate::model::http::ExchangeLog for Never {
            fn recall(&self, _: &str) -> Result<(u32, Option<String>), String> {
                Err("unused".into())
            }
            fn keep(
                &self,
                _: crate::model::http::ExchangeAnswer,
            ) -> crate::future::BoxFuture<'static, Result<(), String>> {
                Box::pin(std::future::ready(Err("unused".into())))
            }
        }
        let log = Exchanges::to(Arc::new(Never));
        let again = spec.endpoint(&|_| Some("sk-durable-unit-test".to_string()), Some(log.clone())).unwrap();
        assert_eq!(
            (again.base_url.clone(), again.tool_mode, again.tool_choice, again.timeout, again.retry.max_retries),
            (ep.base_url.clone(), ep.tool_mode, ep.tool_choice, ep.timeout, ep.retry.max_retries)
        );
        assert_eq!(
            (again.temperature, again.seed, again.api_key.clone()),
            (ep.temperature, ep.seed, ep.api_key.clone())
        );
        assert_eq!(spec.endpoint(&|_| None, Some(log.clone())).unwrap_err(), RebuildError::MissingApiKey);
        let edited = HttpSpec { base_url: "ftp://x/".into(), ..spec.clone() };
        assert!(matches!(edited.endpoint(&|_| Some("k".to_string()), Some(log)), Err(RebuildError::BadSetting(_))));
        ep.recording = Some(
            crate::model::http::Recording::new(std::env::temp_dir(), crate::model::http::RecordMode::Cache).unwrap(),
        );
        assert_eq!(HttpSpec::of(&ep, false).unwrap_err(), RebuildError::Recording);
        assert!(serde_json::from_str::<HttpSpec>(&json.replacen('{', "{\"api_key_value\":\"x\",", 1)).is_err());
    }
}
