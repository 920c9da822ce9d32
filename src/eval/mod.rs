//! Evaluation: the environment runs are built in, and the scenario tables.

mod env;
pub mod scenarios;

pub use env::{BUNDLED_PRICES, DeciderSpec, Env, EnvError, Lab, LabConfig};
