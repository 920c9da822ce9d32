//! Evaluation: the environment runs are built in, the scenario tables, trace grading and
//! the go/no-go list.

pub mod checklist;
mod env;
pub mod grade;
pub mod invariants;
pub mod scenarios;

pub use checklist::{Attestation, Attested, AutoCheck, Verdict, automatic, go_no_go};
pub use env::{BUNDLED_PRICES, DeciderSpec, Env, EnvError, Lab, LabConfig};
pub use grade::{Grade, TraceSpec, grade};
