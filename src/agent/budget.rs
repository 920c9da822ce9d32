//! `RunBudget`: the limits checked before every model call.

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Limits of one single-agent run. Defaults sit above normal behaviour, so they only stop
/// abnormal runs; set real limits from your own measurements.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunBudget {
    /// Most model calls (steps).
    pub max_steps: u32,
    /// Most working time; checked between steps, and handed to the model client as a
    /// deadline before each call (the HTTP client ends a call, its retries and their waits
    /// there with `time_budget`); a decider that keeps no deadline (a fake) can overrun it
    /// by one step.
    #[serde(with = "secs_f64")]
    pub max_seconds: Duration,
    /// Most credits, checked against the worst case of the next call.
    pub max_cost: Decimal,
    /// Consecutive rejected or failed steps that end the run as stuck.
    pub max_stuck: u32,
    /// The output allowance of each model call, in tokens.
    pub max_output_tokens: u32,
}

impl Default for RunBudget {
    fn default() -> Self {
        Self {
            max_steps: 8,
            max_seconds: Duration::from_secs(60),
            max_cost: Decimal::new(5, 2),
            max_stuck: 2,
            max_output_tokens: 200,
        }
    }
}

/// Serde for a `Duration` written as seconds (a number).
pub(crate) mod secs_f64 {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};
    use std::time::Duration;

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        Duration::try_from_secs_f64(v).map_err(|_| D::Error::custom("seconds must be a finite, non-negative number"))
    }
}
