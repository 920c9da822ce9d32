//! The usage ledger: one record per model call, and the totals a budget reads.

use compact_str::CompactString;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

use super::Price;

/// One model call's usage and cost.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageRecord {
    /// The run that made the call (up to 24 bytes held inline: a run id of that length or
    /// less costs no allocation per record; its JSON is the string's).
    pub(crate) run_id: CompactString,
    /// The model that answered (borrowed when the request's name was, see
    /// `LlmRequest::model`).
    pub model: Cow<'static, str>,
    /// Tokens sent.
    pub input_tokens: u64,
    /// Tokens received.
    pub output_tokens: u64,
    /// Credits, from the price table.
    pub cost: Decimal,
}

impl UsageRecord {
    /// The run that made the call.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The record of one call of `model` in `run_id`, its cost taken from `price` for these
    /// very token counts.
    pub fn priced(
        run_id: &str,
        model: impl Into<Cow<'static, str>>,
        price: Price,
        input_tokens: u64,
        output_tokens: u64,
    ) -> Self {
        Self {
            run_id: CompactString::from(run_id),
            model: model.into(),
            input_tokens,
            output_tokens,
            cost: price.cost(input_tokens, output_tokens),
        }
    }
}

/// Totals over a ledger.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of model calls.
    pub calls: u64,
    /// Sum of input tokens.
    pub input_tokens: u64,
    /// Sum of output tokens.
    pub output_tokens: u64,
    /// Sum of costs.
    pub cost: Decimal,
}

/// The records of one run, in call order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ledger {
    /// One record per paid model call.
    pub records: Vec<UsageRecord>,
}

impl Ledger {
    /// Appends a record.
    pub fn add(&mut self, record: UsageRecord) {
        self.records.push(record);
    }

    /// The totals. Token counts come from model servers and may be absurd: they saturate
    /// at `u64::MAX` (which any token budget refuses) instead of overflowing; so does the
    /// cost, at `Decimal::MAX`.
    pub fn summary(&self) -> Summary {
        self.records.iter().fold(Summary::default(), |mut s, r| {
            s.calls += 1;
            s.input_tokens = s.input_tokens.saturating_add(r.input_tokens);
            s.output_tokens = s.output_tokens.saturating_add(r.output_tokens);
            s.cost = s.cost.saturating_add(r.cost);
            s
        })
    }

    /// Input tokens per call, in order.
    pub fn input_tokens(&self) -> Vec<u64> {
        self.records.iter().map(|r| r.input_tokens).collect()
    }
}
