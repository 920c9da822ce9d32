//! The human side: risk classes (which actions need a person).

pub mod risk;

pub use risk::{EFFECTS, Effect, Level, Risk, classify, policy_problems};
