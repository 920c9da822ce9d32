//! The flags that choose and reach a model, shared by every command that runs one:
//! `--base-url`, `--tool-mode`, `--timeout-secs`, `--retries`, `--prices`, `--zero-price`.
//! The API key is read from `ROLEGATE_API_KEY` only; there is no flag for it.

use std::path::PathBuf;
use std::sync::Arc;

use rolegate::agent::Env;
use rolegate::cost::PriceTable;
use rolegate::model::ModelSpec;
use rolegate::model::http::{Endpoint, HttpFlags, ToolMode};

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
        };
        Endpoint::resolve(&flags, &|k| std::env::var(k).ok()).map(Some).map_err(|e| e.to_string())
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
}
