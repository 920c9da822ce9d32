//! Session memory: a few short, source-tagged, expiring facts, kept apart from task state.
//!
//! [`SessionMemory::write`] applies the write rules in a fixed order; the first rule that
//! fails decides and nothing is stored. Loading a saved memory applies every rule again.
//! [`GuardedMemory`] lets a model only point at an observation (`remember`); the
//! application builds the note. Every note carries the label of what it was built from
//! ([`label_of_source`]), saved with it; an agent handed its notes joins their labels into
//! its gate's context label.

mod guarded;
mod session;

pub(crate) use guarded::MemoryEffects;
pub use guarded::{GuardedMemory, RememberCode};
pub(crate) use session::MemoryError;
#[cfg(feature = "testkit")]
pub(crate) use session::Note;
pub use session::{SessionMemory, WriteCode, label_of_source};
