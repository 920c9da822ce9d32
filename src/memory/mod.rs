//! Session memory: a few short, source-tagged, expiring facts, kept apart from task state.
//!
//! [`SessionMemory::write`] applies the write rules in a fixed order; the first rule that
//! fails decides and nothing is stored. Loading a saved memory applies every rule again.

mod session;

pub use session::{MemoryError, Note, SessionMemory, WriteCode};
