//! Evaluation: the environment runs are built in, and the scenario tables (single-agent
//! and multi-agent).

pub mod bench;
mod env;
pub mod multi_scenarios;
pub mod scenarios;
pub mod single_vs_multi;

pub use env::{BUNDLED_PRICES, DeciderSpec, Env, EnvError, Lab, LabConfig};
