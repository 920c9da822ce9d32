//! The price table: credits per 1,000 input and output tokens per model, from `data/prices.json`.

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::CostError;

/// What one model costs, in credits per 1,000 tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Credits per 1,000 input tokens.
    pub input_per_1k: Decimal,
    /// Credits per 1,000 output tokens.
    pub output_per_1k: Decimal,
}

impl Price {
    /// The price of nothing: used only when a caller says so explicitly.
    pub const ZERO: Price = Price { input_per_1k: Decimal::ZERO, output_per_1k: Decimal::ZERO };

    /// The cost of a call with these token counts.
    pub fn cost(&self, input_tokens: u64, output_tokens: u64) -> Decimal {
        let k = Decimal::from(1000);
        self.input_per_1k * Decimal::from(input_tokens) / k + self.output_per_1k * Decimal::from(output_tokens) / k
    }
}

/// The whole table, as stored in `data/prices.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceTable {
    /// A human note on the unit.
    #[serde(default)]
    pub unit: String,
    /// Price per model name.
    pub models: BTreeMap<String, Price>,
}

impl PriceTable {
    /// Parses the JSON form.
    ///
    /// # Errors
    /// [`CostError::BadPriceTable`] when the text is not a valid table (unknown fields
    /// included).
    pub fn from_json(text: &str) -> Result<Self, CostError> {
        serde_json::from_str(text).map_err(|e| CostError::BadPriceTable(e.to_string()))
    }

    /// The price of `model`.
    ///
    /// # Errors
    /// [`CostError::UnknownModel`] when the model has no price: an unknown model is an
    /// error, never silently free.
    pub fn price(&self, model: &str) -> Result<Price, CostError> {
        self.models.get(model).copied().ok_or_else(|| CostError::UnknownModel(model.to_string()))
    }

    /// This table with a zero price for `model` when it has none: the explicit opt-in
    /// (`--zero-price`) for a local model nobody pays for. A priced model keeps its price.
    pub fn with_zero_price(mut self, model: &str) -> Self {
        self.models.entry(model.to_string()).or_insert(Price::ZERO);
        self
    }
}
