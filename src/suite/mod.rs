//! The injection test suite: rows run concurrently ([`run`]), the defense matrix
//! ([`matrix`]) and the line checkers ([`checkers`]).

pub mod checkers;
pub mod matrix;
pub mod run;
