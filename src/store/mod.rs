//! The durable store: one embedded SQLite file (default `rolegate.db`) holding signed
//! checkpoints, approval requests and their audit, the gate's audit, parked actions with
//! their stored results (the idempotency records) and the e-mails sent.
//!
//! Opening checks the file before anything is written: a file that is not a rolegate
//! store, or one cut short or damaged, is refused with a clear error and left untouched.
//! Every change of a command is one transaction. Rows are JSON read back with unknown
//! fields rejected; checkpoints, approval requests (the approval records) and parked
//! actions (the idempotency records) are signed and verified before they are used, so an
//! edit of the file cannot forge an approval.
//! [`Desk`] carries out the cross-process flows (park, decide, list) on top of it.

pub(crate) mod desk;

use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction, TransactionBehavior, params};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::gate::{AuditEvent, PendingAction};
use crate::human::{ApprovalRequest, AuditLine, SigningKey};
use crate::world::SentEmail;

pub use desk::{Desk, DeskAction, DeskError, RunSpec};

/// The default store file.
pub const DEFAULT_STORE: &str = "rolegate.db";
/// The format tag kept in the store's `meta` table.
pub(crate) const STORE_FORMAT: &str = "rolegate-store/1";

const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

const SCHEMA: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (run_id TEXT PRIMARY KEY, spec TEXT NOT NULL);
CREATE TABLE checkpoints (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, step INTEGER NOT NULL, status TEXT NOT NULL,
    sealed TEXT NOT NULL, PRIMARY KEY (run_id, seq));
CREATE TABLE requests (id TEXT PRIMARY KEY, run_id TEXT NOT NULL, status TEXT NOT NULL, json TEXT NOT NULL, sig TEXT NOT NULL);
CREATE TABLE approval_audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, json TEXT NOT NULL);
CREATE TABLE gate_audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, json TEXT NOT NULL);
CREATE TABLE pending (
    run_id TEXT NOT NULL, pending_id TEXT NOT NULL, status TEXT NOT NULL, json TEXT NOT NULL,
    sig TEXT NOT NULL, PRIMARY KEY (run_id, pending_id));
CREATE TABLE outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, idempotency_key TEXT NOT NULL UNIQUE,
    run_id TEXT NOT NULL, json TEXT NOT NULL);
";

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The file could not be opened or created.
    #[error("store {path}: cannot open: {detail}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// The file is not a rolegate store (another SQLite database, or not SQLite at all).
    #[error("store {path}: not a rolegate store ({detail}); it was left untouched")]
    NotAStore {
        /// The file.
        path: PathBuf,
        /// What was found.
        detail: String,
    },
    /// The file is cut short or damaged.
    #[error(
        "store {path}: the file is damaged or cut short ({detail}); it was left untouched, restore it from a backup"
    )]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What SQLite found.
        detail: String,
    },
    /// The file is not there. Only `Store::open` creates a store; the commands that decide
    /// or list use [`Store::open_existing`], so a moved or deleted store is not silently
    /// replaced by an empty one.
    #[error("store {path}: no such file; nothing was created (restore the file, or start a store with `rolegate run`)")]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// The file can be read but not written.
    #[error("store {path}: the file is read-only; nothing was decided or written (make it writable and try again)")]
    ReadOnly {
        /// The file.
        path: PathBuf,
    },
    /// A row that does not read back as what was written (edited by hand?).
    #[error("store: {what} does not read back: {detail}")]
    BadRow {
        /// Which row.
        what: String,
        /// Why.
        detail: String,
    },
    /// An SQL operation failed.
    #[error("store: {0}")]
    Sql(String),
    /// A file-system operation around the store failed.
    #[error("store: {0}")]
    Io(String),
}

impl StoreError {
    /// A file-system error around the store (e.g. creating its folder).
    pub fn from_io(e: std::io::Error) -> Self {
        Self::Io(e.to_string())
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Sql(e.to_string())
    }
}

/// One store file, open.
#[derive(Debug)]
pub struct Store {
    /// The connection; owned here, closed when the store is dropped.
    conn: Connection,
    /// The file.
    path: PathBuf,
    /// True when the file could only be opened for reading.
    read_only: bool,
}

/// Bytes of the SQLite file header read before the file is opened.
const HEADER_BYTES: usize = 100;

/// Why a file of `len` bytes whose header is `head` was cut short, if it was: a header
/// cut off, a size that is not a whole number of pages, or fewer pages than the header
/// says the database has. SQLite itself would read the missing part of a page as zeros.
fn cut_short(head: &[u8], len: u64) -> Option<String> {
    if head.len() < HEADER_BYTES {
        return Some(format!("only {len} bytes"));
    }
    let be16 = |i: usize| u64::from(u16::from_be_bytes([head[i], head[i + 1]]));
    let be32 = |i: usize| u64::from(u32::from_be_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]));
    let page = match be16(16) {
        1 => 65_536,
        n if n >= 512 && n.is_power_of_two() => n,
        n => return Some(format!("page size {n} in the header")),
    };
    if len % page != 0 {
        return Some(format!("{len} bytes is not a whole number of {page}-byte pages"));
    }
    // the page count in the header is valid when it was written with the change counter
    let pages = be32(28);
    if pages > 0 && be32(92) == be32(24) && len < pages.saturating_mul(page) {
        return Some(format!("{len} bytes, the header counts {} ({pages} pages)", pages.saturating_mul(page)));
    }
    None
}

fn damaged(path: &Path, detail: impl Into<String>) -> StoreError {
    StoreError::Damaged { path: path.to_path_buf(), detail: detail.into() }
}

fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn from_json<T: DeserializeOwned>(text: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::BadRow { what: what.to_string(), detail: e.to_string() })
}

impl Store {
    /// Opens `path`, creating a new store when the file does not exist or is empty.
    ///
    /// # Errors
    /// [`StoreError::NotAStore`] for a file of another kind, [`StoreError::Damaged`] for a
    /// file cut short or damaged (checked with SQLite's `quick_check` before anything is
    /// written), [`StoreError::Open`] when it cannot be opened.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let existing = len > 0;
        if existing {
            let mut head = Vec::with_capacity(HEADER_BYTES);
            let read = std::fs::File::open(path)
                .and_then(|f| std::io::Read::read_to_end(&mut std::io::Read::take(f, HEADER_BYTES as u64), &mut head));
            if let Err(e) = read {
                return Err(StoreError::Open { path: path.to_path_buf(), detail: e.to_string() });
            }
            if head.len() >= 16 && head[..16] != SQLITE_MAGIC[..] {
                return Err(StoreError::NotAStore { path: path.to_path_buf(), detail: "no SQLite header".into() });
            }
            if let Some(problem) = cut_short(&head, len) {
                return Err(damaged(path, problem));
            }
        }
        let open_err = |e: rusqlite::Error| StoreError::Open { path: path.to_path_buf(), detail: e.to_string() };
        let flags = if existing {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX
        };
        let conn = Connection::open_with_flags(path, flags).map_err(open_err)?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(open_err)?;
        // SQLite falls back to reading when the file cannot be written
        let read_only = conn.is_readonly(rusqlite::MAIN_DB).map_err(open_err)?;
        let store = Self { conn, path: path.to_path_buf(), read_only };
        if existing {
            store.check()?;
        } else {
            store.create()?;
        }
        Ok(store)
    }

    /// Opens `path`, which must be a store already: a missing file is
    /// [`StoreError::Missing`] and an empty one [`StoreError::Damaged`] (a store cut to
    /// nothing), where [`Store::open`] would start a new store in their place.
    ///
    /// # Errors
    /// As [`Store::open`], and those two.
    pub fn open_existing(path: &Path) -> Result<Self, StoreError> {
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StoreError::Missing { path: path.to_path_buf() }),
            Err(e) => Err(StoreError::Open { path: path.to_path_buf(), detail: e.to_string() }),
            Ok(m) if m.len() == 0 => Err(damaged(path, "the file is empty")),
            Ok(_) => Self::open(path),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Structure and format checks, read-only.
    fn check(&self) -> Result<(), StoreError> {
        let rows: Result<Vec<String>, rusqlite::Error> = self
            .conn
            .prepare("PRAGMA quick_check")
            .and_then(|mut st| st.query_map([], |r| r.get::<_, String>(0))?.collect());
        match rows {
            Ok(r) if r == ["ok"] => {}
            Ok(r) => return Err(damaged(&self.path, r.join("; "))),
            Err(e) => return Err(damaged(&self.path, e.to_string())),
        }
        let format: Option<String> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'format'", [], |r| r.get(0))
            .optional()
            .map_err(|e| StoreError::NotAStore { path: self.path.clone(), detail: e.to_string() })?;
        match format.as_deref() {
            Some(STORE_FORMAT) => {}
            other => {
                return Err(StoreError::NotAStore {
                    path: self.path.clone(),
                    detail: format!("format is {other:?}, expected {STORE_FORMAT:?}"),
                });
            }
        }
        if !self.read_only {
            self.conn.execute_batch("PRAGMA journal_mode = DELETE; PRAGMA synchronous = FULL;")?;
        }
        Ok(())
    }

    fn create(&self) -> Result<(), StoreError> {
        self.conn.execute_batch("PRAGMA journal_mode = DELETE; PRAGMA synchronous = FULL;")?;
        self.conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {SCHEMA} INSERT INTO meta (key, value) VALUES ('format', '{STORE_FORMAT}'); COMMIT;"
        ))?;
        Ok(())
    }

    /// Starts a write transaction that holds the store's write lock until it commits
    /// (another process deciding the same request waits, then sees the decision).
    ///
    /// # Errors
    /// [`StoreError::ReadOnly`] for a file that cannot be written (before anything is
    /// done); [`StoreError::Sql`] when the lock cannot be had.
    pub fn begin(&mut self) -> Result<Transaction<'_>, StoreError> {
        if self.read_only {
            return Err(StoreError::ReadOnly { path: self.path.clone() });
        }
        Ok(self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?)
    }

    /// The connection, for reads outside a transaction.
    pub fn conn(&self) -> &Connection {
        &self.conn
    }
}

/// Typed reads and writes; every function works on a connection or a transaction.
pub(crate) mod rows {
    use super::{
        ApprovalRequest, AuditEvent, AuditLine, Connection, OptionalExtension, PendingAction, SentEmail, SigningKey,
        StoreError, from_json, params, to_json,
    };

    /// The signing domain of stored approval requests.
    pub(crate) const REQUEST_DOMAIN: &str = "rolegate-request/1";
    /// The signing domain of stored parked actions.
    pub(crate) const PENDING_DOMAIN: &str = "rolegate-pending/1";

    fn verified<T: serde::de::DeserializeOwned>(
        key: &SigningKey,
        domain: &str,
        json: &str,
        sig: &str,
        what: &str,
    ) -> Result<T, StoreError> {
        if !key.verify_as(domain, json, sig) {
            return Err(StoreError::BadRow {
                what: what.to_string(),
                detail: "bad_signature: edited in the file".into(),
            });
        }
        from_json(json, what)
    }

    /// The next run id, `run-N`.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn next_run_id(c: &Connection) -> Result<String, StoreError> {
        let n: i64 = c.query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))?;
        Ok(format!("run-{}", n + 1))
    }

    /// Records a run and the spec it can be rebuilt from.
    ///
    /// # Errors
    /// [`StoreError::Sql`] (e.g. a run id used twice).
    pub(crate) fn insert_run(c: &Connection, run_id: &str, spec: &str) -> Result<(), StoreError> {
        c.execute("INSERT INTO runs (run_id, spec) VALUES (?1, ?2)", params![run_id, spec])?;
        Ok(())
    }

    /// The spec of a run.
    ///
    /// # Errors
    /// [`StoreError::BadRow`] when the run is not in the store.
    pub(crate) fn run_spec(c: &Connection, run_id: &str) -> Result<String, StoreError> {
        c.query_row("SELECT spec FROM runs WHERE run_id = ?1", params![run_id], |r| r.get(0))
            .optional()?
            .ok_or_else(|| StoreError::BadRow { what: format!("run {run_id}"), detail: "not in the store".into() })
    }

    /// Appends a sealed checkpoint of a run.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn push_checkpoint(
        c: &Connection,
        run_id: &str,
        step: u32,
        status: &str,
        sealed: &str,
    ) -> Result<(), StoreError> {
        c.execute(
            "INSERT INTO checkpoints (run_id, seq, step, status, sealed)
             VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM checkpoints WHERE run_id = ?1), ?2, ?3, ?4)",
            params![run_id, step, status, sealed],
        )?;
        Ok(())
    }

    /// The latest sealed checkpoint of a run (still to be verified).
    ///
    /// # Errors
    /// [`StoreError::BadRow`] when the run has none.
    pub(crate) fn latest_checkpoint(c: &Connection, run_id: &str) -> Result<String, StoreError> {
        c.query_row(
            "SELECT sealed FROM checkpoints WHERE run_id = ?1 ORDER BY seq DESC LIMIT 1",
            params![run_id],
            |r| r.get(0),
        )
        .optional()?
        .ok_or_else(|| StoreError::BadRow { what: format!("run {run_id}"), detail: "no checkpoint".into() })
    }

    /// Inserts or replaces a request.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn put_request(c: &Connection, r: &ApprovalRequest, key: &SigningKey) -> Result<(), StoreError> {
        let json = to_json(r);
        c.execute(
            "INSERT INTO requests (id, run_id, status, json, sig) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(id) DO UPDATE SET status = excluded.status, json = excluded.json, sig = excluded.sig",
            params![r.id, r.run_id, r.status.as_str(), json, key.sign_as(REQUEST_DOMAIN, &json)],
        )?;
        Ok(())
    }

    /// Every request, ordered by creation, each verified by its signature.
    ///
    /// # Errors
    /// [`StoreError::BadRow`] for a row that does not verify or read back.
    pub(crate) fn requests(c: &Connection, key: &SigningKey) -> Result<Vec<ApprovalRequest>, StoreError> {
        let mut st = c.prepare("SELECT id, json, sig FROM requests ORDER BY rowid")?;
        let raw: Vec<(String, String, String)> =
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<_, _>>()?;
        raw.iter().map(|(id, json, sig)| verified(key, REQUEST_DOMAIN, json, sig, &format!("request {id}"))).collect()
    }

    /// Appends approval audit lines.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn push_approval_audit(c: &Connection, lines: &[AuditLine]) -> Result<(), StoreError> {
        for l in lines {
            c.execute("INSERT INTO approval_audit (json) VALUES (?1)", params![to_json(l)])?;
        }
        Ok(())
    }

    /// The approval audit, in order.
    ///
    /// # Errors
    /// [`StoreError::BadRow`] for a row that does not read back.
    pub(crate) fn approval_audit(c: &Connection) -> Result<Vec<AuditLine>, StoreError> {
        let mut st = c.prepare("SELECT seq, json FROM approval_audit ORDER BY seq")?;
        let raw: Vec<(i64, String)> = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
        raw.iter().map(|(seq, json)| from_json(json, &format!("approval audit line {seq}"))).collect()
    }

    /// Appends gate audit events of a run.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn push_gate_audit(c: &Connection, events: &[AuditEvent]) -> Result<(), StoreError> {
        for e in events {
            c.execute("INSERT INTO gate_audit (run_id, json) VALUES (?1, ?2)", params![e.run_id, to_json(e)])?;
        }
        Ok(())
    }

    /// Inserts or replaces a parked action (with its status and stored result).
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn put_pending(c: &Connection, p: &PendingAction, key: &SigningKey) -> Result<(), StoreError> {
        let status = serde_json::to_value(p.status).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        let json = to_json(p);
        c.execute(
            "INSERT INTO pending (run_id, pending_id, status, json, sig) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(run_id, pending_id) DO UPDATE SET status = excluded.status, json = excluded.json, sig = excluded.sig",
            params![p.run_id, p.id, status, json, key.sign_as(PENDING_DOMAIN, &json)],
        )?;
        Ok(())
    }

    /// The parked actions of a run, each verified by its signature.
    ///
    /// # Errors
    /// [`StoreError::BadRow`] for a row that does not verify or read back.
    pub(crate) fn pending_of(c: &Connection, run_id: &str, key: &SigningKey) -> Result<Vec<PendingAction>, StoreError> {
        let mut st = c.prepare("SELECT pending_id, json, sig FROM pending WHERE run_id = ?1 ORDER BY rowid")?;
        let raw: Vec<(String, String, String)> =
            st.query_map(params![run_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<_, _>>()?;
        raw.iter()
            .map(|(id, json, sig)| verified(key, PENDING_DOMAIN, json, sig, &format!("pending action {run_id}/{id}")))
            .collect()
    }

    /// Records sent mail; a key already recorded is skipped (it was sent once).
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn push_sent(c: &Connection, run_id: &str, sent: &[SentEmail]) -> Result<(), StoreError> {
        for e in sent {
            c.execute(
                "INSERT INTO outbox (idempotency_key, run_id, json) VALUES (?1, ?2, ?3)
                 ON CONFLICT(idempotency_key) DO NOTHING",
                params![e.idempotency_key, run_id, to_json(e)],
            )?;
        }
        Ok(())
    }

    /// Every e-mail sent, in order.
    ///
    /// # Errors
    /// [`StoreError::BadRow`] for a row that does not read back.
    pub(crate) fn sent(c: &Connection) -> Result<Vec<SentEmail>, StoreError> {
        let mut st = c.prepare("SELECT seq, json FROM outbox ORDER BY seq")?;
        let raw: Vec<(i64, String)> = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
        raw.iter().map(|(seq, json)| from_json(json, &format!("outbox row {seq}"))).collect()
    }
}
