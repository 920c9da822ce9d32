//! How `rolegate run --design multi` prints a three-role run: its envelope log (every
//! accepted envelope, every refusal, every refused tool call), its outcome, each role's
//! usage and the role that failed or stopped it (`rolegate::design::multi_lines`, which a
//! durable run keeps as its end too). The run itself goes through the design dispatch
//! (`design.rs`).

use rolegate::multi::MultiRun;

/// The log of a finished run, in the coordinator's order, then the outcome.
pub fn log(run: &MultiRun) -> Vec<String> {
    rolegate::design::multi_lines(run)
}
