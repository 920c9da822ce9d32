//! The durable store: one embedded SQLite file (default `rolegate.db`) holding signed
//! checkpoints, approval requests and their audit, the gate's audit, parked actions with
//! their stored results (the idempotency records) and the e-mails sent.
//!
//! Only SQLite reads the file: opening asks SQLite (under its own locks) whether the file
//! is a rolegate store, runs its `quick_check`, and creates the schema when the file is
//! new, in one `BEGIN IMMEDIATE` transaction with `CREATE TABLE IF NOT EXISTS`, so any
//! number of processes may open a missing store at once. The file is in WAL mode with a
//! busy timeout: readers never wait for a writer and never see half a commit; a crash
//! mid-commit is recovered by SQLite itself on the next open. "Damaged, restore from a
//! backup" is said only when SQLite reports the file corrupt, with what it found.
//! Run and request ids come from the database's own sequences (`AUTOINCREMENT`), so a
//! deleted row never makes an id come round again.
//!
//! Every change of a command is one transaction. Rows are JSON read back with unknown
//! fields rejected, and every row read back as fact is signed with the store key and
//! verified before it is used: runs (their spec names the endpoint a resume talks to),
//! checkpoints, approval requests, parked actions, the outbox, approvers, both audits, the
//! journal's steps and a durable run's exchanges. A column that repeats part of a signed
//! record must agree with it. An edit of the file forges nothing: the row is set aside and
//! `store check` names it.
//! [`Desk`] carries out the cross-process flows (park, decide, list) on top of it.

pub(crate) mod check;
pub(crate) mod desk;
pub(crate) mod durable;
pub(crate) mod durable_http;
pub(crate) mod exchanges;
pub(crate) mod journal;
pub(crate) mod lease;
pub(crate) mod run_data;

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, Transaction, TransactionBehavior, params};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::gate::{AuditEvent, PendingAction};
use crate::human::{ApprovalRequest, Approver, AuditLine, SignedDecision, SigningKey};
use crate::world::SentEmail;

pub(crate) use check::{BadRow, RowCode, Rows};
pub use desk::{Desk, DeskAction, DeskError, POLICYPAL_MODEL, RunSpec, SinkCheck};
pub use durable::{Durability, DurableRun, DurableSpec, END_STEP, EndRecord, RunRow};
pub use durable_http::{HttpSpec, RebuildError, RoleModel};
pub use exchanges::EXCHANGE_DOMAIN;
pub use journal::{STEP_DOMAIN, StepRecord, StepWriter, WriterStats};
pub use rows::{APPROVAL_AUDIT_DOMAIN, GATE_AUDIT_DOMAIN, OUTBOX_DOMAIN, PENDING_DOMAIN, REQUEST_DOMAIN, RUN_DOMAIN};
pub use run_data::{InputsDiffer, RunData, input_digests};

/// The default store file.
pub const DEFAULT_STORE: &str = "rolegate.db";
/// The format tag kept in the store's `meta` table. `/2`: ids from `AUTOINCREMENT`
/// sequences, WAL mode.
pub(crate) const STORE_FORMAT: &str = "rolegate-store/2";
/// The environment variable of the crash test hook (tests only): when it names a crash
/// point (see [`crash_point`]), the process aborts there, inside the open
/// transaction, as a power cut or a `kill -9` would stop it; while it is set the page cache
/// is tiny, so a transaction's pages spill into the WAL before its commit (a crash then
/// leaves uncommitted frames). Never set it in a deployment.
pub(crate) const CRASH_AT_ENV: &str = "ROLEGATE_TEST_CRASH_AT";

/// How long a command waits for another process's write lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// Every table of a store, created if missing (so a store that lacks a table added later
/// gets it on its next open).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE, spec TEXT NOT NULL,
    sig TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS checkpoints (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, step INTEGER NOT NULL, status TEXT NOT NULL,
    sealed TEXT NOT NULL, PRIMARY KEY (run_id, seq));
CREATE TABLE IF NOT EXISTS requests (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, run_id TEXT NOT NULL,
    status TEXT NOT NULL, json TEXT NOT NULL, sig TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS approval_audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, json TEXT NOT NULL, sig TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS gate_audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, json TEXT NOT NULL,
    sig TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS pending (
    run_id TEXT NOT NULL, pending_id TEXT NOT NULL, status TEXT NOT NULL, json TEXT NOT NULL,
    sig TEXT NOT NULL, PRIMARY KEY (run_id, pending_id));
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, idempotency_key TEXT NOT NULL,
    run_id TEXT NOT NULL, json TEXT NOT NULL, sig TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS outbox_key ON outbox (idempotency_key);
CREATE TABLE IF NOT EXISTS approvers (name TEXT PRIMARY KEY, json TEXT NOT NULL, sig TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS decisions (request_id TEXT PRIMARY KEY, json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS steps (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, step INTEGER NOT NULL,
    body TEXT NOT NULL, sig TEXT NOT NULL, PRIMARY KEY (run_id, seq));
CREATE TABLE IF NOT EXISTS leases (
    run_id TEXT PRIMARY KEY, pid INTEGER NOT NULL, host TEXT NOT NULL, since TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS exchanges (
    run_id TEXT NOT NULL, key TEXT NOT NULL, occurrence INTEGER NOT NULL, repetition INTEGER NOT NULL,
    answer TEXT NOT NULL, sig TEXT NOT NULL, PRIMARY KEY (run_id, key, occurrence));
";

/// The tables [`SCHEMA`] creates, to tell a store that has them all from one that needs
/// the schema transaction.
/// `steps` (the durable journal of the designs) came after the issue-13 stores, which
/// get it on their next open; the format tag stays `/2`.
/// `exchanges` (a durable run's model exchanges) came after `steps`, the same way.
const TABLES: &[&str] = &[
    "meta",
    "runs",
    "checkpoints",
    "requests",
    "approval_audit",
    "gate_audit",
    "pending",
    "outbox",
    "steps",
    "exchanges",
    "leases",
];

/// The tables whose rows gained a signature (`sig`) after stores of this format were
/// first written: a store without the column gets it on its next writable open, its old
/// rows with an empty signature, which `store check` names and every flow sets aside
/// (nothing unsigned is read back as fact).
const SIGNED_LATER: &[&str] = &["runs", "approval_audit", "gate_audit"];

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A value could not be written as JSON; nothing was stored.
    #[error("store: a row could not be encoded: {0}")]
    Encode(String),
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
    /// SQLite reports the file damaged (`SQLITE_CORRUPT`), when it is opened.
    #[error(
        "store {path}: SQLite reports the file damaged ({detail}); it was left untouched, restore it from a backup"
    )]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What SQLite found, and which tables it concerns.
        detail: String,
    },
    /// SQLite reports the file damaged (`SQLITE_CORRUPT`) in the middle of a command: the
    /// command's transaction was rolled back.
    #[error("store: SQLite reports the file damaged ({0}); this command wrote nothing, restore the file from a backup")]
    Corrupt(String),
    /// The file is not there. Only `Store::open` creates a store; the commands that decide
    /// or list use [`Store::open_existing`], so a moved or deleted store is not silently
    /// replaced by an empty one.
    #[error("store {path}: no such file; nothing was created (restore the file, or start a store with `rolegate run`)")]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// The file is there but empty (0 bytes): no store was ever written to it, or it was
    /// cut to nothing. Like a missing file it is not replaced by a new store.
    #[error(
        "store {path}: the file is empty (0 bytes); nothing was read or created (restore the file, or start a store with `rolegate run`)"
    )]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The file can be read but not written.
    #[error("store {path}: the file is read-only; nothing was decided or written (make it writable and try again)")]
    ReadOnly {
        /// The file.
        path: PathBuf,
    },
    /// The signing key is not the one the store was started with (a new shell, another
    /// machine's key): every signed row would read as edited, so nothing is read.
    #[error(
        "store: signed with a different key: the store's key id is {store}, this key's is {this}; use the key the store was started with (nothing was read or changed)"
    )]
    OtherKey {
        /// The key id recorded in the store.
        store: String,
        /// The key id of the key given.
        this: String,
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

/// SQLite's primary result code of an error, if it came from SQLite.
fn sqlite_code(e: &rusqlite::Error) -> Option<ErrorCode> {
    match e {
        rusqlite::Error::SqliteFailure(f, _) => Some(f.code),
        _ => None,
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        match sqlite_code(&e) {
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => Self::Corrupt(e.to_string()),
            _ => Self::Sql(e.to_string()),
        }
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

/// The JSON text of a row; a value that cannot be written is an error that stops the
/// write (no empty text is ever stored or signed in its place).
fn to_json<T: Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Encode(e.to_string()))
}

/// What SQLite says the open file holds.
enum Shape {
    /// No table at all: a new file, ours to set up.
    Blank,
    /// A rolegate store of this format; true when every table is there.
    Ours(bool),
    /// Anything else, with what was found.
    Foreign(String),
}

/// Reads the file's shape through SQLite (call inside a transaction).
fn shape(c: &Connection) -> Result<Shape, rusqlite::Error> {
    let mut st = c.prepare("SELECT name FROM sqlite_schema WHERE type = 'table'")?;
    let tables: Vec<String> = st.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
    if tables.is_empty() {
        return Ok(Shape::Blank);
    }
    if !tables.iter().any(|t| t == "meta") {
        return Ok(Shape::Foreign("no meta table".into()));
    }
    let format: Option<String> =
        c.query_row("SELECT value FROM meta WHERE key = 'format'", [], |r| r.get(0)).optional()?;
    let complete = TABLES.iter().all(|t| tables.iter().any(|have| have == t))
        && SIGNED_LATER.iter().map(|t| has_column(c, t, "sig")).collect::<Result<Vec<_>, _>>()?.into_iter().all(|b| b);
    Ok(match format.as_deref() {
        Some(STORE_FORMAT) => Shape::Ours(complete),
        other => Shape::Foreign(format!("format is {other:?}, expected {STORE_FORMAT:?}")),
    })
}

/// True when `table` has `column` (false for a missing table).
fn has_column(c: &Connection, table: &str, column: &str) -> Result<bool, rusqlite::Error> {
    let mut st = c.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let names: Vec<String> = st.query_map(params![table], |r| r.get(0))?.collect::<Result<_, _>>()?;
    Ok(names.iter().any(|n| n == column))
}

impl Store {
    /// Opens `path`, creating a new store when the file does not exist or is empty.
    ///
    /// # Errors
    /// [`StoreError::NotAStore`] for a file of another kind, [`StoreError::Damaged`] when
    /// SQLite reports it corrupt (its `quick_check` runs before anything is written),
    /// [`StoreError::Open`] when it cannot be opened.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with(path, true)
    }

    /// Opens `path`, which must be a store already: a missing file is
    /// [`StoreError::Missing`] and an empty one [`StoreError::Empty`], where
    /// [`Store::open`] would start a new store in their place.
    ///
    /// # Errors
    /// As [`Store::open`], and those two.
    pub fn open_existing(path: &Path) -> Result<Self, StoreError> {
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StoreError::Missing { path: path.to_path_buf() }),
            Err(e) => Err(StoreError::Open { path: path.to_path_buf(), detail: e.to_string() }),
            Ok(m) if m.len() == 0 => Err(StoreError::Empty { path: path.to_path_buf() }),
            Ok(_) => Self::open_with(path, false),
        }
    }

    fn open_with(path: &Path, create: bool) -> Result<Self, StoreError> {
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let mut conn = Connection::open_with_flags(path, flags).map_err(|e| Self::refusal(path, &e))?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| Self::refusal(path, &e))?;
        // SQLite falls back to reading when the file cannot be written
        let read_only = conn.is_readonly(rusqlite::MAIN_DB).map_err(|e| Self::refusal(path, &e))?;
        if read_only {
            conn = Self::readable(conn, path)?;
        }
        let mut store = Self { conn, path: path.to_path_buf(), read_only };
        store.check_and_create()?;
        Ok(store)
    }

    /// A read-only connection that can read: a WAL file needs its `-shm` and `-wal`
    /// beside it, which a user who may not write the folder cannot create once the last
    /// writer removed them. With no `-wal` file there is nothing but the main file to
    /// read, so it is opened `immutable` (read-only, without those files); a `-wal` that
    /// is there is read the ordinary way.
    fn readable(conn: Connection, path: &Path) -> Result<Connection, StoreError> {
        let probe = conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get::<_, i64>(0));
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        match probe {
            Err(e)
                if matches!(sqlite_code(&e), Some(ErrorCode::CannotOpen | ErrorCode::ReadOnly))
                    && !Path::new(&wal).exists() =>
            {
                drop(conn);
                let text = path.to_string_lossy().replace('%', "%25").replace('?', "%3f").replace('#', "%23");
                let uri = format!("file:{text}?immutable=1");
                let flags =
                    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                Connection::open_with_flags(uri, flags).map_err(|e| Self::refusal(path, &e))
            }
            _ => Ok(conn),
        }
    }

    /// An error of SQLite while opening, as what it means for the file.
    fn refusal(path: &Path, e: &rusqlite::Error) -> StoreError {
        let path = path.to_path_buf();
        match sqlite_code(e) {
            Some(ErrorCode::NotADatabase) => StoreError::NotAStore {
                path,
                detail: format!("SQLite: {e} (another kind of file, or a store damaged in its header)"),
            },
            Some(ErrorCode::DatabaseCorrupt) => StoreError::Damaged { path, detail: e.to_string() },
            Some(ErrorCode::ReadOnly) => StoreError::ReadOnly { path },
            _ => StoreError::Open { path, detail: e.to_string() },
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The checks of an open, all through SQLite: the file's shape (a store of this
    /// format, a blank file, or something else), SQLite's `quick_check`, and for a blank
    /// file or one that lacks a table, the schema in one `BEGIN IMMEDIATE` transaction.
    fn check_and_create(&mut self) -> Result<(), StoreError> {
        let path = self.path.clone();
        let refusal = |e: rusqlite::Error| Self::refusal(&path, &e);
        let complete = {
            let tx = self.conn.transaction_with_behavior(TransactionBehavior::Deferred).map_err(refusal)?;
            let shape = shape(&tx).map_err(refusal)?;
            tx.finish().map_err(refusal)?;
            match shape {
                Shape::Foreign(detail) => return Err(StoreError::NotAStore { path, detail }),
                Shape::Blank if self.read_only => {
                    return Err(StoreError::NotAStore { path, detail: "a database without tables".into() });
                }
                Shape::Blank => false,
                Shape::Ours(complete) => complete,
            }
        };
        if !self.read_only {
            // WAL: readers never wait for a writer; a no-op once the file is in WAL mode
            let mode = self.switch_to_wal().map_err(refusal)?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(StoreError::Open { path, detail: format!("journal mode stays {mode:?}, WAL needed") });
            }
            self.conn.execute_batch("PRAGMA synchronous = FULL;").map_err(refusal)?;
            if std::env::var_os(CRASH_AT_ENV).is_some() {
                // crash tests only: a tiny page cache spills a command's pages into the WAL
                // before its commit, so a crash leaves uncommitted frames for SQLite to drop
                self.conn.execute_batch("PRAGMA cache_size = 1;").map_err(refusal)?;
            }
        }
        self.quick_check()?;
        if !complete {
            if self.read_only {
                return Err(StoreError::ReadOnly { path });
            }
            self.create()?;
        }
        Ok(())
    }

    /// `PRAGMA journal_mode = WAL`, retried while SQLite answers busy: switching a new file
    /// into WAL needs an exclusive lock, and SQLite reports `database is locked` at once
    /// (without its busy handler) when another process is opening the same new store. The
    /// retries end after [`BUSY_TIMEOUT`], like any other wait for the lock.
    fn switch_to_wal(&self) -> Result<String, rusqlite::Error> {
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(2);
        loop {
            match self.conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
                Err(e) if sqlite_code(&e) == Some(ErrorCode::DatabaseBusy) && started.elapsed() < BUSY_TIMEOUT => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                other => return other,
            }
        }
    }

    /// SQLite's `quick_check`; a finding is [`StoreError::Damaged`] with the tables it
    /// names.
    fn quick_check(&self) -> Result<(), StoreError> {
        let rows: Result<Vec<String>, rusqlite::Error> = self
            .conn
            .prepare("PRAGMA quick_check")
            .and_then(|mut st| st.query_map([], |r| r.get::<_, String>(0))?.collect());
        let found = match rows {
            Ok(r) if r == ["ok"] => return Ok(()),
            Ok(r) => r,
            Err(e) => match sqlite_code(&e) {
                Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => vec![e.to_string()],
                _ => return Err(Self::refusal(&self.path, &e)),
            },
        };
        let mut detail = found.join("; ");
        let tables = self.tables_named_in(&found);
        if !tables.is_empty() {
            detail.push_str(&format!("; tables affected: {}", tables.join(", ")));
        }
        Err(StoreError::Damaged { path: self.path.clone(), detail })
    }

    /// The tables whose b-trees `quick_check` lines name (`Tree N page …`), where the
    /// schema can still be read.
    fn tables_named_in(&self, lines: &[String]) -> Vec<String> {
        let mut roots: Vec<i64> =
            lines.iter().filter_map(|l| l.strip_prefix("Tree ")?.split_whitespace().next()?.parse().ok()).collect();
        roots.sort_unstable();
        roots.dedup();
        roots
            .iter()
            .filter_map(|root| {
                self.conn
                    .query_row("SELECT name FROM sqlite_schema WHERE rootpage = ?1", params![root], |r| r.get(0))
                    .ok()
            })
            .collect()
    }

    /// The schema, idempotent: one `BEGIN IMMEDIATE` transaction that checks the shape
    /// again under the write lock (another process may have just created the store, or
    /// something else), creates what is missing and records the format.
    fn create(&mut self) -> Result<(), StoreError> {
        let path = self.path.clone();
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if let Shape::Foreign(detail) = shape(&tx)? {
            return Err(StoreError::NotAStore { path, detail });
        }
        tx.execute_batch(SCHEMA)?;
        for table in SIGNED_LATER {
            if !has_column(&tx, table, "sig")? {
                tx.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN sig TEXT NOT NULL DEFAULT ''"))?;
            }
        }
        tx.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('format', ?1)", params![STORE_FORMAT])?;
        match shape(&tx)? {
            Shape::Ours(true) => {}
            Shape::Ours(false) | Shape::Blank => {
                return Err(StoreError::Sql("the schema was not created".into()));
            }
            Shape::Foreign(detail) => return Err(StoreError::NotAStore { path, detail }),
        }
        tx.commit()?;
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

/// The crash test hook: when [`CRASH_AT_ENV`] names `point`, the process aborts here at
/// once (no destructor, no rollback, no commit), as a `kill -9` would stop it. The points
/// are `start:before_commit` and `decide:before_commit` (every row of the command written,
/// the transaction still open) and `decide:after_commit`. For tests only; unset, it does
/// nothing.
pub(crate) fn crash_point(point: &str) {
    if std::env::var_os(CRASH_AT_ENV).is_some_and(|v| v == point) {
        std::process::abort();
    }
}

/// Typed reads and writes; every function works on a connection or a transaction.
pub(crate) mod rows {
    use super::{
        ApprovalRequest, Approver, AuditEvent, AuditLine, BadRow, Connection, OptionalExtension, PendingAction,
        RowCode, Rows, SentEmail, SignedDecision, SigningKey, StoreError, params, to_json,
    };
    use serde::de::DeserializeOwned;

    /// The signing domain of stored approval requests.
    pub const REQUEST_DOMAIN: &str = "rolegate-request/1";
    /// The signing domain of stored parked actions.
    pub const PENDING_DOMAIN: &str = "rolegate-pending/1";
    /// The signing domain of outbox rows (the mail sent).
    pub const OUTBOX_DOMAIN: &str = "rolegate-outbox/1";
    /// The signing domain of the approver registry's rows.
    pub(crate) const APPROVER_DOMAIN: &str = "rolegate-approver/1";
    /// The signing domain of a run's row: its sequence number, id and spec.
    pub const RUN_DOMAIN: &str = "rolegate-run/1";
    /// The signing domain of an approval audit line: its sequence number and the line.
    pub const APPROVAL_AUDIT_DOMAIN: &str = "rolegate-approval-audit/1";
    /// The signing domain of a gate audit event: its sequence number, run and the event.
    pub const GATE_AUDIT_DOMAIN: &str = "rolegate-gate-audit/1";

    /// The text a row's signature covers: its columns, each ended by a NUL.
    fn row_text(columns: &[&str]) -> String {
        let mut text = String::with_capacity(columns.iter().map(|c| c.len() + 1).sum());
        for c in columns {
            text.push_str(c);
            text.push('\0');
        }
        text
    }

    /// A row whose columns say something its signed record does not.
    fn disagrees(table: &'static str, id: &str, column: &str) -> BadRow {
        BadRow {
            table,
            id: id.to_string(),
            code: RowCode::BadSchema,
            detail: format!("its {column} column is not what its signed record says: edited in the file"),
        }
    }

    /// The record of a signed row, or why it is set aside: signature first, then the
    /// schema.
    /// `signed` is the text the signature covers and `json` the record in it (the same
    /// text for a row signed over its record alone).
    fn verified<T: DeserializeOwned>(
        key: &SigningKey,
        domain: &str,
        (table, id): (&'static str, &str),
        (signed, json): (&str, &str),
        sig: &str,
    ) -> Result<T, BadRow> {
        if !key.verify_as(domain, signed, sig) {
            let detail = if sig.is_empty() {
                "unsigned (written before this table was signed): not read back as fact".to_string()
            } else {
                "the signature does not match: edited in the file".to_string()
            };
            return Err(BadRow { table, id: id.to_string(), code: RowCode::BadSignature, detail });
        }
        parsed(table, id, json)
    }

    /// The record of an unsigned row, or why it is set aside.
    fn parsed<T: DeserializeOwned>(table: &'static str, id: &str, json: &str) -> Result<T, BadRow> {
        serde_json::from_str(json).map_err(|e| BadRow {
            table,
            id: id.to_string(),
            code: RowCode::BadSchema,
            detail: format!("does not read back: {e}"),
        })
    }

    /// A record filed under another row's id.
    fn misfiled(table: &'static str, id: &str, holds: &str) -> BadRow {
        BadRow {
            table,
            id: id.to_string(),
            code: RowCode::BadSchema,
            detail: format!("the row holds the record of {holds}"),
        }
    }

    /// Checks that `key` is the key the store was started with, by the key id kept in
    /// `meta`; with `record`, a store that has none yet records this key's id.
    ///
    /// # Errors
    /// [`StoreError::OtherKey`] for a different key.
    pub(crate) fn bind_key(c: &Connection, key: &SigningKey, record: bool) -> Result<(), StoreError> {
        let this = key.key_id();
        let stored: Option<String> =
            c.query_row("SELECT value FROM meta WHERE key = 'key_id'", [], |r| r.get(0)).optional()?;
        match stored {
            Some(id) if id == this => Ok(()),
            Some(id) => Err(StoreError::OtherKey { store: id, this }),
            None if record => {
                c.execute("INSERT INTO meta (key, value) VALUES ('key_id', ?1)", params![this])?;
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Records a new run with the spec it can be rebuilt from and returns its id,
    /// `run-N`, N from the table's own `AUTOINCREMENT` sequence: never reused, even after
    /// a row was deleted, and distinct across processes (the write lock is held).
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn new_run(c: &Connection, spec: &str, key: &SigningKey) -> Result<String, StoreError> {
        // the empty id is a placeholder inside this transaction only
        c.execute("INSERT INTO runs (run_id, spec) VALUES ('', ?1)", params![spec])?;
        let seq = c.last_insert_rowid();
        let run_id = format!("run-{seq}");
        let sig = key.sign_as(RUN_DOMAIN, &row_text(&[&seq.to_string(), &run_id, spec]));
        c.execute("UPDATE runs SET run_id = ?1, sig = ?3 WHERE seq = ?2", params![run_id, seq, sig])?;
        Ok(run_id)
    }

    /// A run's row checked: its signature covers its sequence number, id and spec.
    fn run_row(key: &SigningKey, seq: i64, run_id: &str, spec: &str, sig: &str) -> Result<String, BadRow> {
        if key.verify_as(RUN_DOMAIN, &row_text(&[&seq.to_string(), run_id, spec]), sig) {
            return Ok(spec.to_string());
        }
        let detail = if sig.is_empty() {
            "unsigned (written before runs were signed): its spec is not read back as fact".to_string()
        } else {
            "the signature does not match: edited in the file".to_string()
        };
        Err(BadRow { table: "runs", id: run_id.to_string(), code: RowCode::BadSignature, detail })
    }

    /// Reserves the id of a new request, `req-N`, N from the table's own `AUTOINCREMENT`
    /// sequence; [`put_request`] then fills the row in the same transaction.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn new_request_id(c: &Connection) -> Result<String, StoreError> {
        c.execute("INSERT INTO requests (id, run_id, status, json, sig) VALUES ('', '', '', '', '')", [])?;
        let seq = c.last_insert_rowid();
        let id = format!("req-{seq}");
        c.execute("UPDATE requests SET id = ?1 WHERE seq = ?2", params![id, seq])?;
        Ok(id)
    }

    /// The spec of a run.
    ///
    /// # Errors
    /// [`StoreError::BadRow`] when the run is not in the store.
    pub(crate) fn run_spec(c: &Connection, run_id: &str, key: &SigningKey) -> Result<String, StoreError> {
        let (seq, spec, sig): (i64, String, String) = c
            .query_row("SELECT seq, spec, sig FROM runs WHERE run_id = ?1", params![run_id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()?
            .ok_or_else(|| StoreError::BadRow { what: format!("run {run_id}"), detail: "not in the store".into() })?;
        run_row(key, seq, run_id, &spec, &sig)
            .map_err(|b| StoreError::BadRow { what: format!("run {run_id}"), detail: format!("refused: {}", b.detail) })
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
        let json = to_json(r)?;
        let sig = key.sign_as(REQUEST_DOMAIN, &json);
        // an update first: an upsert would take a number of the id sequence each time
        let updated = c.execute(
            "UPDATE requests SET run_id = ?2, status = ?3, json = ?4, sig = ?5 WHERE id = ?1",
            params![r.id, r.run_id, r.status.as_str(), json, sig],
        )?;
        if updated == 0 {
            c.execute(
                "INSERT INTO requests (id, run_id, status, json, sig) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![r.id, r.run_id, r.status.as_str(), json, sig],
            )?;
        }
        Ok(())
    }

    /// Every request, ordered by creation, each verified by its signature; a row that
    /// does not verify or read back (or holds another request's record) is set aside.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn requests(c: &Connection, key: &SigningKey) -> Result<Rows<ApprovalRequest>, StoreError> {
        let mut st = c.prepare("SELECT seq, id, run_id, status, json, sig FROM requests ORDER BY seq")?;
        let raw: Vec<(i64, String, String, String, String, String)> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))?
            .collect::<Result<_, _>>()?;
        let mut rows = Rows::default();
        for (seq, id, run_id, status, json, sig) in &raw {
            // a request's id is `req-N`, N its row's number: a renumbered row says otherwise
            if *id != format!("req-{seq}") {
                rows.push(Err(disagrees("requests", id, "seq")));
                continue;
            }
            let row = verified::<ApprovalRequest>(key, REQUEST_DOMAIN, ("requests", id), (json, json), sig)
                .and_then(|r| if &r.id == id { Ok(r) } else { Err(misfiled("requests", id, &r.id)) })
                .and_then(|r| match (r.run_id == *run_id, r.status.as_str() == status) {
                    (true, true) => Ok(r),
                    (false, _) => Err(disagrees("requests", id, "run_id")),
                    (true, false) => Err(disagrees("requests", id, "status")),
                });
            rows.push(row);
        }
        Ok(rows)
    }

    /// Appends approval audit lines.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn push_approval_audit(c: &Connection, lines: &[AuditLine], key: &SigningKey) -> Result<(), StoreError> {
        for l in lines {
            let json = to_json(l)?;
            c.execute("INSERT INTO approval_audit (json) VALUES (?1)", params![json])?;
            let seq = c.last_insert_rowid();
            let sig = key.sign_as(APPROVAL_AUDIT_DOMAIN, &row_text(&[&seq.to_string(), &json]));
            c.execute("UPDATE approval_audit SET sig = ?1 WHERE seq = ?2", params![sig, seq])?;
        }
        Ok(())
    }

    /// The approval audit, in order, each line verified by its signature (over its
    /// sequence number and the line); a line that does not verify or read back is set
    /// aside.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn approval_audit(c: &Connection, key: &SigningKey) -> Result<Rows<AuditLine>, StoreError> {
        let mut st = c.prepare("SELECT seq, json, sig FROM approval_audit ORDER BY seq")?;
        let raw: Vec<(i64, String, String)> =
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<_, _>>()?;
        let mut rows = Rows::default();
        for (seq, json, sig) in &raw {
            let id = seq.to_string();
            let text = row_text(&[&id, json]);
            rows.push(verified(key, APPROVAL_AUDIT_DOMAIN, ("approval_audit", &id), (&text, json), sig));
        }
        Ok(rows)
    }

    /// Appends gate audit events of a run, each signed over its sequence number, its run
    /// and the event.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn push_gate_audit(c: &Connection, events: &[AuditEvent], key: &SigningKey) -> Result<(), StoreError> {
        for e in events {
            insert_gate_audit(c, e.run_id.as_str(), &to_json(e)?, key)?;
        }
        Ok(())
    }

    /// Appends one gate audit event of `run_id`, already written as `json`, signed.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn insert_gate_audit(
        c: &Connection,
        run_id: &str,
        json: &str,
        key: &SigningKey,
    ) -> Result<(), StoreError> {
        c.execute("INSERT INTO gate_audit (run_id, json) VALUES (?1, ?2)", params![run_id, json])?;
        let seq = c.last_insert_rowid();
        let sig = key.sign_as(GATE_AUDIT_DOMAIN, &row_text(&[&seq.to_string(), run_id, json]));
        c.execute("UPDATE gate_audit SET sig = ?1 WHERE seq = ?2", params![sig, seq])?;
        Ok(())
    }

    /// The gate audit, in order, each event verified by its signature; an event that does
    /// not verify, read back, or belong to its row's run is set aside.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn gate_audit(c: &Connection, key: &SigningKey) -> Result<Rows<AuditEvent>, StoreError> {
        let mut st = c.prepare("SELECT seq, run_id, json, sig FROM gate_audit ORDER BY seq")?;
        let raw: Vec<(i64, String, String, String)> =
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?.collect::<Result<_, _>>()?;
        let mut rows = Rows::default();
        for (seq, run_id, json, sig) in &raw {
            let id = seq.to_string();
            let text = row_text(&[&id, run_id, json]);
            let row =
                verified::<AuditEvent>(key, GATE_AUDIT_DOMAIN, ("gate_audit", &id), (&text, json), sig).and_then(|e| {
                    if e.run_id.as_str() == run_id { Ok(e) } else { Err(disagrees("gate_audit", &id, "run_id")) }
                });
            rows.push(row);
        }
        Ok(rows)
    }

    /// Inserts or replaces a parked action (with its status and stored result).
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn put_pending(c: &Connection, p: &PendingAction, key: &SigningKey) -> Result<(), StoreError> {
        let status = p.status.as_str();
        let json = to_json(p)?;
        c.execute(
            "INSERT INTO pending (run_id, pending_id, status, json, sig) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(run_id, pending_id) DO UPDATE SET status = excluded.status, json = excluded.json, sig = excluded.sig",
            params![p.run_id, p.id, status, json, key.sign_as(PENDING_DOMAIN, &json)],
        )?;
        Ok(())
    }

    /// The parked actions of a run (all runs for `None`), each verified by its signature;
    /// a row that does not verify or read back (or holds another action) is set aside.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn pending_of(
        c: &Connection,
        run_id: Option<&str>,
        key: &SigningKey,
    ) -> Result<Rows<PendingAction>, StoreError> {
        let mut st = c.prepare(
            "SELECT run_id, pending_id, status, json, sig FROM pending WHERE ?1 IS NULL OR run_id = ?1 ORDER BY rowid",
        )?;
        let raw: Vec<(String, String, String, String, String)> = st
            .query_map(params![run_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?
            .collect::<Result<_, _>>()?;
        let mut rows = Rows::default();
        for (run, id, status, json, sig) in &raw {
            let name = format!("{run}/{id}");
            let row =
                verified::<PendingAction>(key, PENDING_DOMAIN, ("pending", &name), (json, json), sig).and_then(|p| {
                    if &p.run_id != run || &p.id != id {
                        Err(misfiled("pending", &name, &format!("{}/{}", p.run_id, p.id)))
                    } else if p.status.as_str() != status {
                        Err(disagrees("pending", &name, "status"))
                    } else {
                        Ok(p)
                    }
                });
            rows.push(row);
        }
        Ok(rows)
    }

    /// Records sent mail, each row signed with the store key.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn push_sent(
        c: &Connection,
        run_id: &str,
        sent: &[SentEmail],
        key: &SigningKey,
    ) -> Result<(), StoreError> {
        for e in sent {
            let json = to_json(e)?;
            c.execute(
                "INSERT INTO outbox (idempotency_key, run_id, json, sig) VALUES (?1, ?2, ?3, ?4)",
                params![e.idempotency_key, run_id, json, key.sign_as(OUTBOX_DOMAIN, &json)],
            )?;
        }
        Ok(())
    }

    /// Every e-mail sent, in order. A row stands for a real send only when it verifies
    /// (store signature) and is bound to a signed parked action of its run that ran:
    /// same idempotency key, recipient, subject and body. Any other row (inserted or
    /// edited by hand) is set aside and never stands in for a send: the world is
    /// rebuilt without it, so the approved e-mail it would have swallowed still goes out.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn sent(c: &Connection, key: &SigningKey) -> Result<Rows<SentEmail>, StoreError> {
        let actions = pending_of(c, None, key)?.good;
        let mut st = c.prepare("SELECT seq, idempotency_key, run_id, json, sig FROM outbox ORDER BY seq")?;
        let raw: Vec<(i64, String, String, String, String)> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?
            .collect::<Result<_, _>>()?;
        let mut rows = Rows::default();
        for (seq, idempotency_key, run_id, json, sig) in &raw {
            let id = seq.to_string();
            let row = verified::<SentEmail>(key, OUTBOX_DOMAIN, ("outbox", &id), (json, json), sig).and_then(|e| {
                if &e.idempotency_key != idempotency_key {
                    return Err(disagrees("outbox", &id, "idempotency_key"));
                }
                let arg =
                    |a: &PendingAction, k: &str| a.call.arguments.get(k).and_then(|v| v.as_str()).map(String::from);
                let bound = actions.iter().any(|a| {
                    &a.run_id == run_id
                        && a.status == crate::gate::PendingStatus::Executed
                        && arg(a, "idempotency_key").as_deref() == Some(e.idempotency_key.as_str())
                        && arg(a, "to").as_deref() == Some(e.to.as_str())
                        && arg(a, "subject").as_deref() == Some(e.subject.as_str())
                        && arg(a, "body").as_deref() == Some(e.body.as_str())
                });
                if bound {
                    Ok(e)
                } else {
                    Err(BadRow {
                        table: "outbox",
                        id,
                        code: RowCode::Unbound,
                        detail: format!("matches no signed parked action of {run_id} that ran"),
                    })
                }
            });
            rows.push(row);
        }
        Ok(rows)
    }

    /// Registers an approver (a new row; the name must be free).
    ///
    /// # Errors
    /// [`StoreError::Sql`] (e.g. the name is taken).
    pub(crate) fn put_approver(c: &Connection, a: &Approver, key: &SigningKey) -> Result<(), StoreError> {
        let json = to_json(a)?;
        c.execute(
            "INSERT INTO approvers (name, json, sig) VALUES (?1, ?2, ?3)",
            params![a.name, json, key.sign_as(APPROVER_DOMAIN, &json)],
        )?;
        Ok(())
    }

    /// The approver registry, each row verified by its store signature; a row that does
    /// not verify (a public key swapped in the file) or holds another name is set aside.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn approvers(c: &Connection, key: &SigningKey) -> Result<Rows<Approver>, StoreError> {
        let mut st = c.prepare("SELECT name, json, sig FROM approvers ORDER BY name")?;
        let raw: Vec<(String, String, String)> =
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<_, _>>()?;
        let mut rows = Rows::default();
        for (name, json, sig) in &raw {
            let row = verified::<Approver>(key, APPROVER_DOMAIN, ("approvers", name), (json, json), sig)
                .and_then(|a| if &a.name == name { Ok(a) } else { Err(misfiled("approvers", name, &a.name)) });
            rows.push(row);
        }
        Ok(rows)
    }

    /// Records the signed decision that took a request out of `pending`.
    ///
    /// # Errors
    /// [`StoreError::Sql`] (e.g. a request decided twice).
    pub(crate) fn put_decision(c: &Connection, request_id: &str, d: &SignedDecision) -> Result<(), StoreError> {
        c.execute("INSERT INTO decisions (request_id, json) VALUES (?1, ?2)", params![request_id, to_json(d)?])?;
        Ok(())
    }

    /// The signed decision recorded for a request, still to be verified; a row that does
    /// not read back is set aside.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn decision(
        c: &Connection,
        request_id: &str,
    ) -> Result<Option<Result<SignedDecision, BadRow>>, StoreError> {
        let json: Option<String> = c
            .query_row("SELECT json FROM decisions WHERE request_id = ?1", params![request_id], |r| r.get(0))
            .optional()?;
        Ok(json.map(|j| parsed("decisions", request_id, &j)))
    }

    /// Every recorded decision as `(request, json)` (for `store check`).
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn all_decisions(c: &Connection) -> Result<Vec<(String, String)>, StoreError> {
        let mut st = c.prepare("SELECT request_id, json FROM decisions ORDER BY request_id")?;
        Ok(st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?)
    }

    /// Every run with its spec, in order (for `store check`).
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn all_runs(c: &Connection, key: &SigningKey) -> Result<Vec<RunOfStore>, StoreError> {
        let mut st = c.prepare("SELECT seq, run_id, spec, sig FROM runs ORDER BY seq")?;
        let raw: Vec<(i64, String, String, String)> =
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?.collect::<Result<_, _>>()?;
        Ok(raw
            .into_iter()
            .map(|(seq, run_id, spec, sig)| {
                let checked = run_row(key, seq, &run_id, &spec, &sig);
                (run_id, checked)
            })
            .collect())
    }

    /// Every sealed checkpoint as `(run, seq, text)`, in order (for `store check`).
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn all_checkpoints(c: &Connection) -> Result<Vec<CheckpointRow>, StoreError> {
        let mut st = c.prepare("SELECT run_id, seq, step, status, sealed FROM checkpoints ORDER BY run_id, seq")?;
        Ok(st
            .query_map([], |r| {
                Ok(CheckpointRow {
                    run_id: r.get(0)?,
                    seq: r.get(1)?,
                    step: r.get(2)?,
                    status: r.get(3)?,
                    sealed: r.get(4)?,
                })
            })?
            .collect::<Result<_, _>>()?)
    }

    /// The `(run, seq)` of every row of a run-numbered table (`checkpoints`, `steps`), in
    /// order.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub(crate) fn numbering(c: &Connection, table: &str) -> Result<Vec<(String, i64)>, StoreError> {
        let sql = match table {
            "checkpoints" => "SELECT run_id, seq FROM checkpoints ORDER BY run_id, seq",
            _ => "SELECT run_id, seq FROM steps ORDER BY run_id, seq",
        };
        let mut st = c.prepare(sql)?;
        Ok(st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?)
    }

    /// A run's id with its spec, or why its row was set aside.
    pub(crate) type RunOfStore = (String, Result<String, BadRow>);

    /// One row of `checkpoints` as stored (the seal still to be opened).
    pub(crate) struct CheckpointRow {
        pub(crate) run_id: String,
        pub(crate) seq: i64,
        pub(crate) step: i64,
        pub(crate) status: String,
        pub(crate) sealed: String,
    }
}
