//! The injection test suite: rows run concurrently ([`run`]), the defense matrix
//! ([`matrix`]) and the line checkers ([`checkers`]).

mod bounded;
pub(crate) mod checkers;
pub(crate) mod context;
pub(crate) mod matrix;
pub(crate) mod run;
pub use checkers::{CheckKind, Checker, LineVerdict, MAX_LINE_BYTES};
pub use matrix::{
    Count, DefenseConfig, Matrix, MatrixSpec, RoleCompromise, bundled_benign_tasks, parse_benign_tasks, run_matrix,
};
pub use run::{RowResult, run_rows};
