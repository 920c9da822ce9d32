//! Rows set aside: a row that fails its signature or does not read back as the record it
//! stands for is quarantined, not fatal. The flows skip it (it never becomes state, never
//! counts, never runs) and name it; every other request, run and command keeps working.
//! Nothing is deleted: a person decides what to do with the row (`rolegate store check`
//! lists them all).

use crate::codes::codes;
use serde::{Deserialize, Serialize};
use std::fmt;

codes! {
    /// Why a row was set aside.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[non_exhaustive]
    pub enum RowCode {
        /// The row's signature does not match its contents (edited in the file).
        BadSignature = "bad_signature",
        /// The row does not read back as its record (malformed JSON, unknown fields, or a
        /// record filed under another row's id).
        BadSchema = "bad_schema",
        /// An outbox row that matches no signed parked action that ran: it never stands in
        /// for a real send.
        Unbound = "unbound",
    }
}

/// One row set aside, named by table and id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BadRow {
    /// The table (`requests`, `pending`, `checkpoints`, `runs`, `outbox`,
    /// `approval_audit`, `gate_audit`).
    pub table: &'static str,
    /// The row's id in that table (`req-2`, `run-1/pa-1`, `run-1#3`, `7`).
    pub id: String,
    /// Why.
    pub code: RowCode,
    /// Details for a person (never the row's contents).
    pub detail: String,
}

impl fmt::Display for BadRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: refused: {} ({})", self.table, self.id, self.code, self.detail)
    }
}

/// The rows of a table that read back, and those set aside.
#[derive(Clone, Debug, PartialEq)]
pub struct Rows<T> {
    /// The records that verified and read back, in the table's order.
    pub good: Vec<T>,
    /// The rows set aside.
    pub bad: Vec<BadRow>,
}

impl<T> Default for Rows<T> {
    fn default() -> Self {
        Self { good: Vec::new(), bad: Vec::new() }
    }
}

impl<T> Rows<T> {
    /// Sorts one row in: its record, or the reason it was set aside.
    pub(crate) fn push(&mut self, row: Result<T, BadRow>) {
        match row {
            Ok(r) => self.good.push(r),
            Err(b) => self.bad.push(b),
        }
    }
}
