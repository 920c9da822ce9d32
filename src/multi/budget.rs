//! `MultiBudget`: the limits of one multi-agent run, checked by the coordinator before
//! every hand-off, and the counters it checks them against.

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::MultiReason;

/// Limits of one multi-agent run. Defaults sit above a normal run (3 messages, 5 role
/// calls, 1 round), so they only stop abnormal ones.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MultiBudget {
    /// Most messages, accepted and rejected alike.
    pub max_messages: u32,
    /// Most rounds (planner → researcher → reviewer).
    pub max_rounds: u32,
    /// Most model calls over all roles.
    pub max_role_calls: u32,
    /// Most wall time on the run's clock.
    #[serde(with = "secs")]
    pub max_seconds: Duration,
    /// Most credits over all roles.
    pub max_cost: Decimal,
}

impl Default for MultiBudget {
    fn default() -> Self {
        Self {
            max_messages: 8,
            max_rounds: 2,
            max_role_calls: 12,
            max_seconds: Duration::from_secs(60),
            max_cost: Decimal::new(10, 2),
        }
    }
}

/// What a run has used so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    /// Messages received from roles, accepted or rejected.
    pub messages: u32,
    /// Rounds started.
    pub rounds: u32,
    /// Model calls made by every role.
    pub role_calls: u32,
    /// Credits spent by every role.
    pub cost: Decimal,
}

/// What the next hand-off is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handoff {
    /// Asking the planner at the start of a round.
    NewRound,
    /// Asking a role for its message within a round.
    Within,
}

impl MultiBudget {
    /// The reason the next hand-off may not happen, if any: `elapsed` is the run's wall
    /// time so far. A hand-off needs room for the message it will produce and for at
    /// least one model call; a new round needs a round left.
    pub fn before(&self, next: Handoff, used: &Usage, elapsed: Duration) -> Option<MultiReason> {
        if elapsed >= self.max_seconds {
            return Some(MultiReason::TimeBudget);
        }
        if used.cost >= self.max_cost {
            return Some(MultiReason::CostBudget);
        }
        if next == Handoff::NewRound && used.rounds >= self.max_rounds {
            return Some(MultiReason::RoundLimit);
        }
        if used.messages >= self.max_messages {
            return Some(MultiReason::MessageLimit);
        }
        if used.role_calls >= self.max_role_calls {
            return Some(MultiReason::CallLimit);
        }
        None
    }

    /// What is left for the role about to work: model calls, credits and wall time.
    pub fn remaining(&self, used: &Usage, elapsed: Duration) -> Remaining {
        Remaining {
            calls: self.max_role_calls.saturating_sub(used.role_calls),
            cost: self.max_cost.saturating_sub(used.cost).max(Decimal::ZERO),
            time: self.max_seconds.saturating_sub(elapsed),
        }
    }
}

/// The part of the run's budget a role may spend on one hand-off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remaining {
    /// Model calls.
    pub calls: u32,
    /// Credits.
    pub cost: Decimal,
    /// Wall time.
    pub time: Duration,
}

/// Serde for a `Duration` written as seconds (a finite, non-negative number).
mod secs {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};
    use std::time::Duration;

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        Duration::try_from_secs_f64(v).map_err(|_| D::Error::custom("seconds must be a finite, non-negative number"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_limit_that_applies_names_the_stop() {
        let b = MultiBudget { max_messages: 2, max_rounds: 1, max_role_calls: 4, ..MultiBudget::default() };
        let mut u = Usage::default();
        assert_eq!(b.before(Handoff::NewRound, &u, Duration::ZERO), None);
        u.rounds = 1;
        assert_eq!(b.before(Handoff::NewRound, &u, Duration::ZERO), Some(MultiReason::RoundLimit));
        assert_eq!(b.before(Handoff::Within, &u, Duration::ZERO), None);
        u.role_calls = 4;
        assert_eq!(b.before(Handoff::Within, &u, Duration::ZERO), Some(MultiReason::CallLimit));
        u.messages = 2;
        assert_eq!(b.before(Handoff::Within, &u, Duration::ZERO), Some(MultiReason::MessageLimit));
        u.cost = b.max_cost;
        assert_eq!(b.before(Handoff::Within, &u, Duration::ZERO), Some(MultiReason::CostBudget));
        assert_eq!(b.before(Handoff::Within, &u, b.max_seconds), Some(MultiReason::TimeBudget));
        let r = b.remaining(&Usage { role_calls: 1, ..Usage::default() }, Duration::from_secs(59));
        assert_eq!((r.calls, r.time), (3, Duration::from_secs(1)));
    }
}
