//! The flags that choose and reach a model, shared by every command that runs one:
//! `--base-url`, `--tool-mode`, `--tool-choice`, `--timeout-secs`, `--retries`,
//! `--max-tokens`, `--temperature`, `--seed`, `--max-connections`, `--cache`, `--replay`,
//! `--prices`, `--zero-price`. The API key is read from `ROLEGATE_API_KEY` only; there is
//! no flag for it.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use rolegate::agent::Env;
use rolegate::cost::PriceTable;
use rolegate::model::ModelSpec;
use rolegate::model::http::{ConnectionLimit, Endpoint, HttpConfig, HttpFlags, ToolChoice, ToolMode};
use rolegate::multi::RoleSetup;

/// The process's one connection limit: every endpoint this process resolves shares it, so
/// `--max-connections` bounds the model requests in flight across the whole command.
static CONNECTIONS: OnceLock<ConnectionLimit> = OnceLock::new();

/// The process's model requests so far, each with its queue wait and time at the server
/// (`None` when no real model was set up).
pub(crate) fn connection_times() -> Option<rolegate::model::http::ConnectionTimes> {
    CONNECTIONS.get().map(ConnectionLimit::times)
}

/// Prints [`connection_times`] as one line after an experiment's tables: on stdout under
/// the aligned table, on stderr beside a machine format (which it would break).
pub(crate) fn print_connection_times(table: bool) {
    if let Some(t) = connection_times().filter(|t| t.attempts > 0) {
        if table {
            println!("{}", t.line());
        } else {
            eprintln!("rolegate: {}", t.line());
        }
    }
}

/// How to reach an `openai:` model, and what its calls cost.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ModelArgs {
    /// Base URL of the OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (else
    /// ROLEGATE_BASE_URL). The API key comes from ROLEGATE_API_KEY only.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// native: send tools and read tool calls; text: the model answers proposal JSON as
    /// text, for servers without tool calling (else ROLEGATE_TOOL_MODE, default native).
    #[arg(long, value_parser = parse_tool_mode, value_name = "native|text")]
    pub tool_mode: Option<ToolMode>,
    /// Limit of one HTTP attempt in seconds (else ROLEGATE_TIMEOUT_SECS, default 120).
    #[arg(long, value_name = "SECS")]
    pub timeout_secs: Option<f64>,
    /// Most retries after a 429 or 5xx answer (else ROLEGATE_RETRIES, default 2).
    #[arg(long, value_name = "N")]
    pub retries: Option<u32>,
    /// tool_choice sent whenever functions are offered (native mode): auto lets the model
    /// choose, required makes it call one, none makes it answer in text (default auto).
    #[arg(long, value_parser = parse_tool_choice, value_name = "auto|required|none")]
    pub tool_choice: Option<ToolChoice>,
    /// Output allowance of each model call in tokens (max_tokens), for every role
    /// (default 1024: room for the longest finding with margin). A reply cut at it ends
    /// the call as `truncated`.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature sent to the server, 0 to 2 (default: the server's).
    #[arg(long, value_name = "T")]
    pub temperature: Option<f64>,
    /// Sampling seed sent to the server (default: none).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Most model requests in flight at once in this process (default 8); time waiting
    /// for one never counts against a call's timeout.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Record every model exchange as a JSON file in DIR and reuse recorded ones instead
    /// of asking the server again.
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Answer every model call from the recording in DIR, without a server (no
    /// --base-url needed); a call it does not hold ends as `replay_miss`.
    #[arg(long, value_name = "DIR", conflicts_with = "cache")]
    pub replay: Option<PathBuf>,
    /// A price table to use instead of the bundled data/prices.json.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Price an openai: model that has no entry in the price table at zero (an explicit
    /// opt-in: otherwise an unpriced model is an error).
    #[arg(long)]
    pub zero_price: bool,
    /// The world and policy read at run time (default: the bundled ones).
    #[command(flatten)]
    pub data: super::data_args::DataArgs,
}

fn parse_tool_mode(s: &str) -> Result<ToolMode, String> {
    s.parse()
}

fn parse_tool_choice(s: &str) -> Result<ToolChoice, String> {
    s.parse()
}

impl ModelArgs {
    /// The endpoint, when one of `models` needs a server.
    ///
    /// # Errors
    /// A readable message for a missing or bad setting.
    pub fn endpoint(&self, models: &[&ModelSpec]) -> Result<Option<Endpoint>, String> {
        if !models.iter().any(|m| m.needs_endpoint()) {
            return Ok(None);
        }
        let flags = HttpFlags {
            base_url: self.base_url.clone(),
            tool_mode: self.tool_mode,
            timeout_secs: self.timeout_secs,
            max_retries: self.retries,
            tool_choice: self.tool_choice,
            temperature: self.temperature,
            seed: self.seed,
            max_tokens: self.max_tokens,
            max_connections: self.max_connections,
            cache: self.cache.clone(),
            replay: self.replay.clone(),
        };
        let mut endpoint = Endpoint::resolve(&flags, &|k| std::env::var(k).ok()).map_err(|e| e.to_string())?;
        endpoint.connections = CONNECTIONS.get_or_init(|| endpoint.connections.clone()).clone();
        Ok(Some(endpoint))
    }

    /// The environment a stored run records and runs in: the data of the flags and the
    /// `--prices` table (a real model priced at zero is recorded in its own settings).
    ///
    /// # Errors
    /// A readable message for an unreadable file.
    pub fn stored_env(&self) -> Result<Env, String> {
        let mut env = self.data.env()?;
        if let Some(path) = &self.prices {
            let text = super::input::read_text(path, super::input::MAX_INPUT_BYTES)?;
            let prices = PriceTable::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            env.prices = std::sync::Arc::new(prices);
        }
        Ok(env)
    }

    /// The bundled environment with this price table; every `openai:` model of `models`
    /// must have a price, or `--zero-price` must be given.
    ///
    /// # Errors
    /// A readable message for an unreadable table or an unpriced model.
    pub fn env(&self, models: &[&ModelSpec]) -> Result<Env, String> {
        let mut env = self.data.env()?;
        let mut prices = match &self.prices {
            Some(path) => {
                let text = super::input::read_text(path, super::input::MAX_INPUT_BYTES)?;
                PriceTable::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))?
            }
            None => (*env.prices).clone(),
        };
        for m in models.iter().filter(|m| m.needs_endpoint()) {
            let key = m.price_key();
            if self.zero_price {
                prices = prices.with_zero_price(&key);
            } else if let Err(e) = prices.price(&key) {
                return Err(format!("{e}, or pass --prices FILE, or --zero-price to run it at no cost"));
            }
        }
        env.prices = Arc::new(prices);
        Ok(env)
    }
}

/// One model per role, for commands that run the three-role design: each defaults to
/// `--model`. Flatten it next to [`ModelArgs`] and resolve with
/// [`RoleModelSpecs::with_overrides`](rolegate::model::RoleModelSpecs::with_overrides).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RoleModelArgs {
    /// The planner's model (default: --model).
    #[arg(long, value_name = "MODEL")]
    pub planner_model: Option<String>,
    /// The researcher's model (default: --model).
    #[arg(long, value_name = "MODEL")]
    pub researcher_model: Option<String>,
    /// The reviewer's model (default: --model).
    #[arg(long, value_name = "MODEL")]
    pub reviewer_model: Option<String>,
    /// The planner's output allowance in tokens (default: --max-tokens).
    #[arg(long, value_name = "N")]
    pub planner_max_tokens: Option<u32>,
    /// The researcher's output allowance in tokens (default: --max-tokens).
    #[arg(long, value_name = "N")]
    pub researcher_max_tokens: Option<u32>,
    /// The reviewer's output allowance in tokens (default: --max-tokens).
    #[arg(long, value_name = "N")]
    pub reviewer_max_tokens: Option<u32>,
}

impl RoleModelArgs {
    /// The models of the three roles, `model` where a role names none.
    ///
    /// # Errors
    /// A readable message for a value that does not parse.
    pub fn resolve(&self, model: &ModelSpec) -> Result<rolegate::model::RoleModelSpecs, String> {
        rolegate::model::RoleModelSpecs::with_overrides(
            model,
            self.planner_model.as_deref(),
            self.researcher_model.as_deref(),
            self.reviewer_model.as_deref(),
        )
        .map_err(|e| e.to_string())
    }

    /// `setup` with each role's own output allowance; a role's flag needs that role on a
    /// real model.
    ///
    /// # Errors
    /// A readable message for a bad value or a flag for a role on a fake.
    pub fn with_max_tokens(&self, mut setup: RoleSetup) -> Result<RoleSetup, String> {
        let roles: [(&str, Option<u32>, &mut Option<HttpConfig>); 3] = [
            ("planner", self.planner_max_tokens, &mut setup.planner),
            ("researcher", self.researcher_max_tokens, &mut setup.researcher),
            ("reviewer", self.reviewer_max_tokens, &mut setup.reviewer),
        ];
        for (role, n, cfg) in roles {
            match (n, cfg) {
                (None, _) => {}
                (Some(_), None) => {
                    return Err(format!("--{role}-max-tokens: the {role} runs no openai: model"));
                }
                (Some(n), Some(c)) => *c = c.with_max_tokens(n).map_err(|e| format!("--{role}-max-tokens: {e}"))?,
            }
        }
        Ok(setup)
    }
}
