//! A durable run's model exchanges: the `exchanges` table, and the log an HTTP client of
//! a durable run asks before it asks the server ([`RunExchanges`], the store's
//! [`ExchangeLog`]).
//!
//! Each row is one answer a server gave the run: the run, the exchange key (SHA-256 of the
//! exact request body and the repetition, as `--cache` files are named), the occurrence of
//! that request in the run (0 for the first time it was sent), the repetition and the
//! answer body as read, signed with the store key under [`EXCHANGE_DOMAIN`]. A new answer
//! goes through the store's [`StepWriter`] (the same group commit as the run's steps) and
//! the client awaits the commit before it reads the answer, so a process that dies after
//! a call never pays for it again nor gets another answer to it.
//!
//! A resumed run loads every exchange of the run first, each verified: a row whose
//! signature does not match (an edited request key, occurrence or answer) refuses the
//! resume by name ([`DeskError::Quarantined`](super::DeskError::Quarantined), table
//! `exchanges`) before anything runs or becomes state. `store check` lists such rows too.

use rusqlite::{Connection, params};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::journal::StepWriter;
use super::{BadRow, RowCode, Rows, StoreError};
use crate::future::BoxFuture;
use crate::human::SigningKey;
use crate::model::http::{ExchangeAnswer, ExchangeLog};

/// The signing domain of the `exchanges` rows.
pub const EXCHANGE_DOMAIN: &str = "rolegate-exchange/1";

/// One row of the `exchanges` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExchangeRow {
    pub(crate) run_id: String,
    pub(crate) key: String,
    pub(crate) occurrence: u32,
    pub(crate) repetition: u32,
    pub(crate) answer: String,
    pub(crate) sig: String,
}

/// The text an `exchanges` row's signature covers.
fn signed_text(run_id: &str, key: &str, occurrence: u32, repetition: u32, answer: &str) -> String {
    format!("{run_id}\0{key}\0{occurrence}\0{repetition}\0{answer}")
}

impl ExchangeRow {
    /// The row of `run_id`'s exchange answer `a`, signed with `signer`.
    pub(crate) fn signed(signer: &SigningKey, run_id: &str, a: ExchangeAnswer) -> Self {
        let ExchangeAnswer { key, occurrence, repetition, answer } = a;
        let sig = signer.sign_as(EXCHANGE_DOMAIN, &signed_text(run_id, &key, occurrence, repetition, &answer));
        Self { run_id: run_id.to_string(), key, occurrence, repetition, answer, sig }
    }

    fn verifies(&self, signer: &SigningKey) -> bool {
        let text = signed_text(&self.run_id, &self.key, self.occurrence, self.repetition, &self.answer);
        signer.verify_as(EXCHANGE_DOMAIN, &text, &self.sig)
    }
}

/// Writes one exchange row (inside the writer's transaction).
///
/// # Errors
/// [`StoreError::Sql`], also for an exchange the run holds already (two resumes of one
/// run at once: the second's answer is never used).
pub(crate) fn push_exchange(c: &Connection, row: &ExchangeRow) -> Result<(), StoreError> {
    c.execute(
        "INSERT INTO exchanges (run_id, key, occurrence, repetition, answer, sig) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![row.run_id, row.key, row.occurrence, row.repetition, row.answer, row.sig],
    )?;
    Ok(())
}

/// How many model exchanges the store holds for `run_id`, as written (`store check` and a
/// resume verify each one; this is what `runs list` shows).
///
/// # Errors
/// [`StoreError::Sql`].
pub(crate) fn exchange_count(c: &Connection, run_id: &str) -> Result<i64, StoreError> {
    Ok(c.query_row("SELECT count(*) FROM exchanges WHERE run_id = ?1", params![run_id], |r| r.get(0))?)
}

/// The exchanges of a run (every run for `None`), each verified; a row that does not
/// verify is set aside.
///
/// # Errors
/// [`StoreError::Sql`].
pub(crate) fn exchanges_of(
    c: &Connection,
    run_id: Option<&str>,
    signer: &SigningKey,
) -> Result<Rows<ExchangeRow>, StoreError> {
    let mut st = c.prepare(
        "SELECT run_id, key, occurrence, repetition, answer, sig FROM exchanges
         WHERE ?1 IS NULL OR run_id = ?1 ORDER BY run_id, key, occurrence",
    )?;
    let raw: Vec<ExchangeRow> = st
        .query_map(params![run_id], |r| {
            Ok(ExchangeRow {
                run_id: r.get(0)?,
                key: r.get(1)?,
                occurrence: r.get(2)?,
                repetition: r.get(3)?,
                answer: r.get(4)?,
                sig: r.get(5)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    let mut out = Rows::default();
    for row in raw {
        if row.verifies(signer) {
            out.push(Ok(row));
        } else {
            let short: String = row.key.chars().take(12).collect();
            out.push(Err(BadRow {
                table: "exchanges",
                id: format!("{}/{short}#{}", row.run_id, row.occurrence),
                code: RowCode::BadSignature,
                detail: "the signature does not match: edited in the file".into(),
            }));
        }
    }
    Ok(out)
}

/// The exchange log of one durable run: the answers it holds already (verified when it
/// was loaded) and the writer new ones are committed through.
pub(crate) struct RunExchanges {
    run_id: String,
    writer: Arc<StepWriter>,
    recorded: HashMap<(String, u32), String>,
    /// How many times this process's run has sent each request so far.
    asked: Mutex<HashMap<String, u32>>,
}

impl RunExchanges {
    /// The log of `run_id` with every exchange the store holds for it.
    ///
    /// # Errors
    /// The first row set aside (its signature does not match), or [`StoreError`].
    pub(crate) fn load(
        c: &Connection,
        run_id: &str,
        writer: Arc<StepWriter>,
    ) -> Result<Self, Result<BadRow, StoreError>> {
        let rows = exchanges_of(c, Some(run_id), writer.key()).map_err(Err)?;
        if let Some(bad) = rows.bad.into_iter().next() {
            return Err(Ok(bad));
        }
        let recorded = rows.good.into_iter().map(|r| ((r.key, r.occurrence), r.answer)).collect();
        Ok(Self { run_id: run_id.to_string(), writer, recorded, asked: Mutex::default() })
    }
}

impl ExchangeLog for RunExchanges {
    fn recall(&self, key: &str) -> Result<(u32, Option<String>), String> {
        let mut asked = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
        let n = asked.entry(key.to_string()).or_insert(0);
        let occurrence = *n;
        *n = n.saturating_add(1);
        Ok((occurrence, self.recorded.get(&(key.to_string(), occurrence)).cloned()))
    }

    fn keep(&self, answer: ExchangeAnswer) -> BoxFuture<'static, Result<(), String>> {
        self.writer.keep_exchange(ExchangeRow::signed(self.writer.key(), &self.run_id, answer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_verifies_only_as_signed() {
        let k = SigningKey::new(b"exchanges unit test key, 32 byte").unwrap();
        let answer = ExchangeAnswer { key: "ab".into(), occurrence: 0, repetition: 0, answer: "{\"x\":1}".into() };
        let row = ExchangeRow::signed(&k, "run-1", answer);
        assert!(row.verifies(&k));
        for edited in [
            ExchangeRow { answer: "{\"x\":2}".into(), ..row.clone() },
            ExchangeRow { occurrence: 1, ..row.clone() },
            ExchangeRow { repetition: 1, ..row.clone() },
            ExchangeRow { key: "ac".into(), ..row.clone() },
            ExchangeRow { run_id: "run-2".into(), ..row.clone() },
        ] {
            assert!(!edited.verifies(&k), "{edited:?}");
        }
        let other = SigningKey::new(b"another key for the unit test 32").unwrap();
        assert!(!row.verifies(&other));
    }
}
