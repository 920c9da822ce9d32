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

    /// The cost of a call with these token counts. Checked arithmetic: a product or sum
    /// beyond `Decimal`'s range is [`Decimal::MAX`], a cost every budget refuses, never a
    /// panic. (A loaded table's prices are at most [`MAX_PRICE_PER_1K`], where any token
    /// counts fit.)
    pub fn cost(&self, input_tokens: u64, output_tokens: u64) -> Decimal {
        self.checked_cost(input_tokens, output_tokens).unwrap_or(Decimal::MAX)
    }

    /// The cost of a call, `None` when it does not fit a `Decimal`.
    pub fn checked_cost(&self, input_tokens: u64, output_tokens: u64) -> Option<Decimal> {
        // a thousandth is exact in a decimal: the products are summed, then the point moves
        let input = self.input_per_1k.checked_mul(Decimal::from(input_tokens))?;
        let output = self.output_per_1k.checked_mul(Decimal::from(output_tokens))?;
        Some(input.checked_add(output)?.checked_mul(Decimal::new(1, 3))?.normalize())
    }
}

/// The highest price per 1,000 tokens a table may hold: a billion credits. With it the
/// cost of any token counts (up to `u64::MAX` each) fits a `Decimal`.
pub const MAX_PRICE_PER_1K: Decimal = Decimal::from_parts(1_000_000_000, 0, 0, false, 0);

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
    /// Parses the JSON form; every price must be between 0 and [`MAX_PRICE_PER_1K`].
    ///
    /// # Errors
    /// [`CostError::BadPriceTable`] when the text is not a valid table (unknown fields
    /// included); [`CostError::PriceOutOfRange`] naming the model, the field and the
    /// price for a negative price (which would switch the cost budget off) or one too
    /// large to compute with.
    pub fn from_json(text: &str) -> Result<Self, CostError> {
        let table: Self = serde_json::from_str(text).map_err(|e| CostError::BadPriceTable(e.to_string()))?;
        for (model, p) in &table.models {
            for (field, value) in [("input_per_1k", p.input_per_1k), ("output_per_1k", p.output_per_1k)] {
                if value.is_sign_negative() && !value.is_zero() || value > MAX_PRICE_PER_1K {
                    return Err(CostError::PriceOutOfRange { model: model.clone(), field, price: value.to_string() });
                }
            }
        }
        Ok(table)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cost_is_the_price_per_thousand_tokens_and_an_overflow_is_the_most_a_budget_refuses() {
        let p = Price { input_per_1k: "0.008".parse().unwrap(), output_per_1k: "0.0240".parse().unwrap() };
        assert_eq!(p.cost(10, 1).to_string(), "0.000104");
        assert_eq!(p.cost(1000, 0).to_string(), "0.008");
        assert_eq!(p.cost(0, 0), Decimal::ZERO);
        let huge = Price { input_per_1k: Decimal::MAX, output_per_1k: Decimal::MAX };
        assert_eq!(huge.checked_cost(u64::MAX, u64::MAX), None);
        assert_eq!(huge.cost(u64::MAX, u64::MAX), Decimal::MAX);
    }

    /// The cost as it was worked before: each product divided by 1,000.
    fn divided(p: &Price, input: u64, output: u64) -> Option<Decimal> {
        let k = Decimal::from(1000);
        let input = p.input_per_1k.checked_mul(Decimal::from(input))?.checked_div(k)?;
        let output = p.output_per_1k.checked_mul(Decimal::from(output))?.checked_div(k)?;
        input.checked_add(output)
    }

    #[test]
    fn the_sum_moved_three_places_is_the_divided_cost_written_without_trailing_zeros() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let tokens = |r: u64| match r % 4 {
            0 => r % 2_000,
            1 => r % 1_000_000,
            2 => r >> (r % 64),
            _ => [0, 1, 999, 1_000, 1_001, u64::MAX][(r % 6) as usize],
        };
        for _ in 0..200_000 {
            // prices of at most 25 places and up to the table's limit: every quotient exact
            let price = |r: u64| Decimal::from_i128_with_scale(i128::from(r % 1_000_000_000_000), (r % 26) as u32);
            let p = Price { input_per_1k: price(next()), output_per_1k: price(next()) };
            if p.input_per_1k > MAX_PRICE_PER_1K || p.output_per_1k > MAX_PRICE_PER_1K {
                continue;
            }
            let (input, output) = (tokens(next()), tokens(next()));
            let (new, old) = (p.checked_cost(input, output), divided(&p, input, output));
            assert_eq!(new, old, "{p:?} {input} {output}");
            if let (Some(new), Some(old)) = (new, old) {
                assert_eq!(new.to_string(), old.normalize().to_string(), "{p:?} {input} {output}");
            }
        }
    }
}
