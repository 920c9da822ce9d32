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
        let input = times_per_thousand(self.input_per_1k, input_tokens)?;
        let output = times_per_thousand(self.output_per_1k, output_tokens)?;
        input.checked_add(output)
    }
}

/// `price * tokens / 1000` as `per_thousand(price.checked_mul(tokens))` gives it. For a
/// non-negative price whose mantissa and scale are small (at most 19) and a product whose
/// millionfold fits in 64 bits, the product is the mantissas' product at the price's scale
/// (what `rust_decimal` multiplies to, with nothing to round), worked in `u64` without
/// building the `Decimal`s; any other takes the library's product.
fn times_per_thousand(price: Decimal, tokens: u64) -> Option<Decimal> {
    let scale = price.scale();
    let small = u64::try_from(price.mantissa()).ok().and_then(|m| m.checked_mul(tokens));
    match small {
        Some(0) => Some(Decimal::ZERO),
        Some(n) if scale <= 19 && n <= u64::MAX / MILLION => small_per_thousand(n, scale, false),
        _ => per_thousand(price.checked_mul(Decimal::from(tokens))?),
    }
}

/// A million: [`per_thousand`] scales an inexact quotient's mantissa by it.
const MILLION: u64 = 1_000_000;

/// `x / 1000` exactly as `Decimal::checked_div` gives it, value and scale (`0.000080` is
/// not `0.00008` when printed), without a long division in the common case.
///
/// `rust_decimal` divides the mantissa by 1000: when that leaves no remainder, the
/// quotient keeps the dividend's scale. Otherwise, for a small mantissa and a scale of at
/// most 19, it scales the quotient up by 10^9 in one step (so the result is the mantissa
/// times 10^6 at scale + 9) and then strips trailing zeros by 10^8 (only while the low 32
/// bits are zero), then once each by 10^4, 10^2 and 10. A mantissa whose millionfold fits
/// in 64 bits is worked here in `u64`; any other dividend takes the library's division.
/// `prices::tests::per_thousand_is_the_library_division` holds the two to the same answer.
fn per_thousand(x: Decimal) -> Option<Decimal> {
    if x.is_zero() {
        return Some(Decimal::ZERO);
    }
    let scale = x.scale();
    match u64::try_from(x.mantissa().unsigned_abs()).ok().filter(|m| *m <= u64::MAX / MILLION) {
        Some(m) if scale <= 19 => small_per_thousand(m, scale, x.is_sign_negative()),
        _ => x.checked_div(Decimal::from(1000)),
    }
}

/// [`per_thousand`] of the non-zero dividend with mantissa `m` (at most `u64::MAX /
/// MILLION`), scale `scale` (at most 19) and the sign given.
fn small_per_thousand(m: u64, scale: u32, negative: bool) -> Option<Decimal> {
    let (n, scale) = if m % 1000 == 0 { (m / 1000, scale) } else { unscale(m * MILLION, scale + 9) };
    let n = i128::from(n);
    Decimal::try_from_i128_with_scale(if negative { -n } else { n }, scale).ok()
}

/// The trailing zeros `rust_decimal`'s division strips from an inexact quotient, in its
/// order and under its conditions.
fn unscale(mut n: u64, mut scale: u32) -> (u64, u32) {
    while n & 0xFFFF_FFFF == 0 && scale >= 8 && n % 100_000_000 == 0 {
        n /= 100_000_000;
        scale -= 8;
    }
    for (pow, mask, digits) in [(10_000, 0xF, 4), (100, 0x3, 2), (10, 0x1, 1)] {
        if n & mask == 0 && scale >= digits && n % pow == 0 {
            n /= pow;
            scale -= digits;
        }
    }
    (n, scale)
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

    /// The cost as it was computed before [`per_thousand`]: a division per product.
    fn divided_cost(p: &Price, input_tokens: u64, output_tokens: u64) -> Option<Decimal> {
        let k = Decimal::from(1000);
        let input = p.input_per_1k.checked_mul(Decimal::from(input_tokens))?.checked_div(k)?;
        let output = p.output_per_1k.checked_mul(Decimal::from(output_tokens))?.checked_div(k)?;
        input.checked_add(output)
    }

    /// Mantissas around every boundary the fast path has (powers of ten, multiples of
    /// 1000, trailing zeros of every length, 32, 64 and 96 bits), and pseudo-random ones.
    fn mantissas() -> Vec<u128> {
        let mut out: Vec<u128> = vec![1, 2, 5, 7, 8, 9, 24, 80, 125, 999, 1001, 1999, 4096, 65_536];
        for k in 0..=28u32 {
            let p = 10u128.pow(k);
            out.extend([p, p - 1, p + 1, 3 * p, 7 * p, 25 * p, 125 * p, 1000 * p + 1]);
        }
        let edge = u128::from(u64::MAX / 1_000_000);
        out.extend([edge - 1, edge, edge + 1, edge / 1000 * 1000, (edge + 1000) / 1000 * 1000]);
        for bits in [31u32, 32, 33, 63, 64, 65, 90, 95, 96] {
            let b = (1u128 << bits) - 1;
            out.extend([b, b - 1, b / 10 * 10, b / 1000 * 1000, b / 100_000_000 * 100_000_000]);
        }
        // multiples of 2^32 (the condition of the first strip) times powers of ten
        for k in 0..12u32 {
            out.push((1u128 << 32) * 10u128.pow(k));
            out.push((1u128 << 40) * 5u128.pow(k));
        }
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..3000 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let digits = seed % 20;
            let v = u128::from(seed >> 8) % 10u128.pow(u32::try_from(digits).unwrap_or(19));
            // some with trailing zeros
            out.push(v * 10u128.pow(u32::try_from(seed % 9).unwrap_or(0)));
        }
        out.retain(|m| *m < 1u128 << 96);
        out
    }

    #[test]
    fn per_thousand_is_the_library_division() {
        let k = Decimal::from(1000);
        let mut checked = 0;
        for m in mantissas() {
            for scale in 0..=28 {
                for negative in [false, true] {
                    let n = i128::try_from(m).unwrap();
                    let x = Decimal::from_i128_with_scale(if negative { -n } else { n }, scale);
                    let fast = per_thousand(x);
                    let slow = x.checked_div(k);
                    assert_eq!(fast, slow, "{x}");
                    if let (Some(f), Some(s)) = (fast, slow) {
                        assert_eq!(
                            (f.scale(), f.mantissa(), f.to_string()),
                            (s.scale(), s.mantissa(), s.to_string()),
                            "{x}"
                        );
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked > 100_000, "{checked}");
    }

    #[test]
    fn a_cost_is_the_divided_cost_on_a_grid_of_prices_and_token_counts() {
        let prices: Vec<Decimal> = [
            "0",
            "0.000",
            "0.008",
            "0.0080",
            "0.024",
            "0.00015",
            "0.0006",
            "0.5",
            "1",
            "2.50",
            "3",
            "10",
            "15.000",
            "0.0000001",
            "0.123456789",
            "1000000000",
            "999999999.999999999",
            "0.0000000000000000000000000001",
        ]
        .iter()
        .map(|p| p.parse().unwrap())
        .collect();
        let tokens: Vec<u64> = [0, 1, 2, 3, 4, 7, 10, 99, 100, 120, 125, 250, 999, 1000, 1001, 4096, 12_345, 1_000_000]
            .into_iter()
            .chain([u64::from(u32::MAX), u64::MAX / 1000, u64::MAX - 1, u64::MAX])
            .collect();
        for input_per_1k in &prices {
            for output_per_1k in &prices {
                let p = Price { input_per_1k: *input_per_1k, output_per_1k: *output_per_1k };
                for i in &tokens {
                    for o in &tokens {
                        let (fast, slow) = (p.checked_cost(*i, *o), divided_cost(&p, *i, *o));
                        assert_eq!(fast.map(|d| d.to_string()), slow.map(|d| d.to_string()), "{p:?} {i} {o}");
                        assert_eq!(fast.map(|d| d.scale()), slow.map(|d| d.scale()), "{p:?} {i} {o}");
                    }
                }
            }
        }
        let p = Price { input_per_1k: "0.008".parse().unwrap(), output_per_1k: "0.0240".parse().unwrap() };
        assert_eq!(p.cost(10, 1).to_string(), "0.000104");
        assert_eq!(p.cost(1000, 0).to_string(), "0.008");
    }
}
