//! Evaluation: the environment runs are built in, the scenario tables (single-agent and
//! multi-agent), trace grading, the go/no-go list and the benchmark; and the injection
//! test suite: the attack catalog, rows that plant payloads, the compromised fakes, the
//! defense matrix, the checkers, JUnit output and the HTML report.

pub mod attacks;
pub mod bench;
pub mod checkers;
pub mod checklist;
pub mod compromised;
mod env;
pub mod grade;
pub mod invariants;
pub mod junit;
pub mod markup;
pub mod matrix;
pub mod multi_scenarios;
pub mod report;
pub mod rows;
pub mod scenarios;
pub mod single_vs_multi;
pub mod suite;

pub use checklist::{Attestation, Attested, AutoCheck, Verdict, automatic, go_no_go};
pub use env::{BUNDLED_PRICES, DeciderSpec, Env, EnvError, Lab, LabConfig};
pub use grade::{Grade, TraceSpec, grade};
