//! Cost and time: the usage ledger, the price table (`rust_decimal`, never `f64`), the
//! token estimate and injected clocks.

mod clock;
mod ledger;
mod prices;

pub(crate) use clock::SharedClock;
pub use clock::{Clock, ManualClock, SystemClock, TokioClock};
pub use ledger::{Ledger, Summary, UsageRecord};
pub use prices::{MAX_PRICE_PER_1K, Price, PriceTable};

/// Errors of the cost module.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum CostError {
    /// A model with no entry in the price table.
    #[error("model {0:?} has no price in the price table (add it to data/prices.json)")]
    UnknownModel(String),
    /// The price table did not parse.
    #[error("price table: {0}")]
    BadPriceTable(String),
    /// A price below zero or above [`MAX_PRICE_PER_1K`].
    #[error("price table: {model}.{field} = {price} is out of range (0 to 1000000000 credits per 1k tokens)")]
    PriceOutOfRange {
        /// The model.
        model: String,
        /// `input_per_1k` or `output_per_1k`.
        field: &'static str,
        /// The price as written.
        price: String,
    },
}

/// Estimated tokens for a text: about four characters a token, at least one for any
/// non-empty text. The same estimate is used before a call (budgets) and by fakes.
pub fn estimate_tokens(text: &str) -> u64 {
    let chars = text.chars().count() as u64;
    chars.div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal::Decimal;
    use std::time::Duration;

    #[test]
    fn price_and_ledger_add_up_in_decimal() {
        let p = Price { input_per_1k: Decimal::new(8, 3), output_per_1k: Decimal::new(24, 3) };
        assert_eq!(p.cost(1000, 500), Decimal::new(20, 3));
        let mut l = Ledger::default();
        for i in [100, 200] {
            l.add(UsageRecord::priced("r", "m", p, i, 10));
        }
        let s = l.summary();
        assert_eq!((s.calls, s.input_tokens, s.output_tokens), (2, 300, 20));
        assert_eq!(s.cost, p.cost(300, 20));
    }

    #[test]
    fn reported_tokens_win_over_the_estimate() {
        use crate::model::{LlmResponse, Usage};
        let mut r = LlmResponse::text("hello", "m");
        assert_eq!(r.tokens(|| (7, 3)), (7, 3));
        r.usage = Some(Usage { input_tokens: 120, output_tokens: 40 });
        assert_eq!(r.tokens(|| unreachable!("the server reported usage")), (120, 40));
        let p = Price { input_per_1k: Decimal::new(8, 3), output_per_1k: Decimal::new(24, 3) };
        let rec = UsageRecord::priced("r1", "m", p, 120, 40);
        assert_eq!((rec.run_id.as_str(), &*rec.model, rec.cost), ("r1", "m", p.cost(120, 40)));
    }

    /// The usage record as it was declared before its model and run id were lent or held
    /// inline: `String` fields, unknown fields refused.
    #[derive(serde::Serialize, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Before {
        run_id: String,
        model: String,
        input_tokens: u64,
        output_tokens: u64,
        cost: Decimal,
    }

    #[test]
    fn a_usage_record_with_a_lent_model_name_serialises_as_before() {
        // the record's model became a `Cow`: its JSON is the one a `String` field wrote,
        // it reads back equal whether the name was lent or owned, and unknown fields are
        // still refused
        let p = Price { input_per_1k: Decimal::new(8, 3), output_per_1k: Decimal::new(24, 3) };
        let lent = UsageRecord::priced("r-\u{e9}\"1", "fake-planner", p, 120, 40);
        let owned = UsageRecord::priced("r-\u{e9}\"1", String::from("fake-planner"), p, 120, 40);
        assert!(matches!(lent.model, std::borrow::Cow::Borrowed(_)));
        assert!(matches!(owned.model, std::borrow::Cow::Owned(_)));
        let before = Before {
            run_id: "r-\u{e9}\"1".into(),
            model: "fake-planner".into(),
            input_tokens: 120,
            output_tokens: 40,
            cost: p.cost(120, 40),
        };
        let json = serde_json::to_string(&lent).unwrap();
        assert_eq!(json, serde_json::to_string(&before).unwrap());
        assert_eq!(serde_json::to_string(&owned).unwrap(), json);
        let back: UsageRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back, lent);
        let extra = json.replace(r#""cost""#, r#""extra":1,"cost""#);
        assert!(serde_json::from_str::<UsageRecord>(&extra).is_err());
    }

    #[test]
    fn a_usage_record_with_an_inline_run_id_reads_and_writes_as_the_string_did() {
        // the record's run id became a `CompactString` (no allocation for an id of up to
        // 24 bytes): the same JSON as the `String` field wrote for ids short and long,
        // the same value read back, and the same error text for every bad record
        let p = Price { input_per_1k: Decimal::new(8, 3), output_per_1k: Decimal::new(24, 3) };
        let mut ids: Vec<String> =
            ["", "r1", "bench-1999", "r-\u{e9}\"1\n\\", "\u{1F600}\u{0}\u{7f}", "run-\u{2028}-x"]
                .map(String::from)
                .into();
        for n in [23, 24, 25, 40, 200] {
            ids.push("a".repeat(n));
            ids.push("\u{e9}".repeat(n / 2));
        }
        for id in &ids {
            let rec = UsageRecord::priced(id, "fake-planner", p, 120, 40);
            assert_eq!(rec.run_id, id.as_str());
            let before = Before {
                run_id: id.clone(),
                model: "fake-planner".into(),
                input_tokens: 120,
                output_tokens: 40,
                cost: p.cost(120, 40),
            };
            let json = serde_json::to_string(&rec).unwrap();
            assert_eq!(json, serde_json::to_string(&before).unwrap(), "{id:?}");
            assert_eq!(serde_json::from_str::<UsageRecord>(&json).unwrap(), rec);
        }
        let good = r#"{"run_id":"r","model":"m","input_tokens":1,"output_tokens":2,"cost":"0.5"}"#;
        let bad = [
            good.replace(r#""r""#, "7"),
            good.replace(r#""r""#, "null"),
            good.replace(r#""r""#, r#"["r"]"#),
            good.replace(r#""r""#, r#""\ud800""#),
            good.replace(r#""run_id":"r","#, ""),
            good.replace(r#""run_id""#, r#""run""#),
            good.replace(r#""cost""#, r#""extra":1,"cost""#),
            good.replace(r#""r","#, r#""r","run_id":"s","#),
            good[..20].to_string(),
        ];
        for text in &bad {
            let now = serde_json::from_str::<UsageRecord>(text).map(|_| ()).map_err(|e| e.to_string());
            let then = serde_json::from_str::<Before>(text).map(|_| ()).map_err(|e| e.to_string());
            assert!(now.is_err(), "{text}");
            assert_eq!(now, then, "{text}");
        }
    }

    #[test]
    fn unknown_model_is_an_error_not_free() {
        let t = PriceTable::from_json(r#"{"models": {}}"#).unwrap();
        assert_eq!(t.price("gpt-x"), Err(CostError::UnknownModel("gpt-x".into())));
        assert!(PriceTable::from_json(r#"{"models": {}, "extra": 1}"#).is_err());
        let t = t.with_zero_price("local");
        assert_eq!(t.price("local"), Ok(Price::ZERO));
        let priced =
            PriceTable::from_json(r#"{"models": {"m": {"input_per_1k": "1", "output_per_1k": "2"}}}"#).unwrap();
        assert_eq!(priced.clone().with_zero_price("m"), priced, "a priced model keeps its price");
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new();
        let shared = c.shared();
        c.advance_secs(1.5);
        c.advance_secs(-3.0);
        assert_eq!(shared.now(), Duration::from_millis(1500));
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(estimate_tokens(""), 0);
    }
}
