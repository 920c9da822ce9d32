//! The durable step writer: group commit of every run's steps.
//!
//! Runs in flight send their steps (already sealed in their own task) over a channel to
//! one writer thread that owns its own connection to the store. The thread takes every
//! step waiting when it wakes (up to [`MAX_BATCH`]), writes them in one `BEGIN IMMEDIATE`
//! transaction, commits (`synchronous = FULL`: the commit is on disk before it returns),
//! and only then answers each step's acknowledgement. A run awaits its step's answer before
//! the step asks the model or runs a tool, so a step is durable before its effects are
//! visible to the next step, and many runs share one disk flush: while one commit is being
//! flushed, the steps of every other run that reached a boundary meanwhile queue up for
//! the next.
//!
//! The single loop's steps (and PolicyPal's turns) are checkpoints, written to the
//! `checkpoints` table in the format `rolegate approvals` already reads; the records of the
//! other designs (a checked plan, an accepted hand-off, a run's end) go to the `steps`
//! table, each signed with the store key under [`STEP_DOMAIN`].

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};

use super::{BadRow, RowCode, Rows, Store, StoreError, rows, to_json};
use crate::agent::{AgentState, Progress, StepSink};
use crate::future::BoxFuture;
use crate::gate::AuditEvent;
use crate::human::{Checkpoint, SigningKey};

/// The signing domain of the `steps` rows.
pub const STEP_DOMAIN: &str = "rolegate-step/1";
/// Most steps one transaction carries.
pub(crate) const MAX_BATCH: usize = 4096;

/// What goes in one durable step.
enum Row {
    /// A checkpoint of a loop (state and progress), with the gate's audit since the last.
    Checkpoint { run_id: String, step: u32, status: &'static str, sealed: String, audit: Vec<(String, String)> },
    /// A design's record.
    Step { run_id: String, kind: &'static str, step: u32, body: String, sig: String },
    /// A model exchange of a durable run (see `exchanges.rs`), signed.
    Exchange(super::exchanges::ExchangeRow),
}

/// A step waiting for the writer, with where to say it is committed.
struct Job {
    row: Result<Row, String>,
    ack: tokio::sync::oneshot::Sender<Result<(), String>>,
}

/// Counters of the writer, for the bench.
#[derive(Debug, Default)]
pub struct WriterStats {
    /// Transactions committed.
    pub commits: AtomicU64,
    /// Steps committed.
    pub steps: AtomicU64,
}

/// The group-commit writer of one store file. Cloning the `Arc` shares it; dropping the
/// last clone ends the thread after it wrote what was sent, and waits for it, so the
/// writer's connection is closed (and its WAL checkpointed) before the drop returns.
#[derive(Debug)]
pub struct StepWriter {
    tx: std::sync::Mutex<Option<mpsc::Sender<Job>>>,
    key: SigningKey,
    stats: Arc<WriterStats>,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for StepWriter {
    fn drop(&mut self) {
        drop(self.tx.lock().map(|mut tx| tx.take()));
        if let Ok(mut thread) = self.thread.lock()
            && let Some(t) = thread.take()
        {
            let _ = t.join();
        }
    }
}

/// One record of the `steps` table as read back (its signature verified).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRecord {
    /// The run.
    pub run_id: String,
    /// Its order in the run's journal (1, 2, …).
    pub seq: i64,
    /// `plan`, `handoff`, `end`.
    pub kind: String,
    /// The step the record is about.
    pub step: u32,
    /// The record's JSON.
    pub body: String,
}

/// The text a `steps` row's signature covers.
fn signed_text(run_id: &str, kind: &str, step: u32, body: &str) -> String {
    let mut s = String::with_capacity(run_id.len() + kind.len() + body.len() + 16);
    s.push_str(run_id);
    s.push('\0');
    s.push_str(kind);
    s.push('\0');
    s.push_str(&step.to_string());
    s.push('\0');
    s.push_str(body);
    s
}

/// The signature of a `steps` row.
pub(crate) fn sign_step(key: &SigningKey, run_id: &str, kind: &str, step: u32, body: &str) -> String {
    key.sign_as(STEP_DOMAIN, &signed_text(run_id, kind, step, body))
}

impl StepWriter {
    /// Opens (or creates) the store at `path` for the writer thread, binds `key` to it and
    /// starts the thread.
    ///
    /// # Errors
    /// As [`Store::open`]; [`StoreError::OtherKey`] for another key.
    pub fn start(path: &Path, key: SigningKey) -> Result<Arc<Self>, StoreError> {
        let mut store = Store::open(path)?;
        {
            let tx = store.begin()?;
            rows::bind_key(&tx, &key, true)?;
            tx.commit()?;
        }
        let (tx, rx) = mpsc::channel::<Job>();
        let stats = Arc::new(WriterStats::default());
        let counters = stats.clone();
        let signer = key.clone();
        let thread = std::thread::Builder::new()
            .name("rolegate-steps".into())
            .spawn(move || write_loop(store, &rx, &counters, &signer))
            .map_err(StoreError::from_io)?;
        Ok(Arc::new(Self {
            tx: std::sync::Mutex::new(Some(tx)),
            key,
            stats,
            thread: std::sync::Mutex::new(Some(thread)),
        }))
    }

    /// The writer's counters.
    pub fn stats(&self) -> &WriterStats {
        &self.stats
    }

    /// Commits a durable run's model exchange with the next batch; the future resolves
    /// once it is committed.
    pub(crate) fn keep_exchange(&self, row: super::exchanges::ExchangeRow) -> BoxFuture<'static, Result<(), String>> {
        self.send(Ok(Row::Exchange(row)))
    }

    /// The key the writer signs with.
    pub(crate) fn key(&self) -> &SigningKey {
        &self.key
    }

    fn send(&self, row: Result<Row, String>) -> BoxFuture<'static, Result<(), String>> {
        let (ack, wait) = tokio::sync::oneshot::channel();
        let sent =
            self.tx.lock().map_err(|_| ()).and_then(|tx| tx.as_ref().ok_or(())?.send(Job { row, ack }).map_err(|_| ()));
        Box::pin(async move {
            sent.map_err(|()| "the step writer has stopped".to_string())?;
            wait.await.map_err(|_| "the step writer stopped before the commit".to_string())?
        })
    }
}

impl StepSink for StepWriter {
    fn agent_step(
        &self,
        state: &AgentState,
        progress: &Progress,
        audit: &[AuditEvent],
    ) -> BoxFuture<'static, Result<(), String>> {
        let row = (|| {
            let sealed = Checkpoint::seal_parts(state, progress, &self.key).map_err(|e| e.to_string())?;
            let audit = audit
                .iter()
                .map(|e| Ok((e.run_id.to_string(), to_json(e).map_err(|e| e.to_string())?)))
                .collect::<Result<Vec<_>, String>>()?;
            Ok(Row::Checkpoint {
                run_id: state.run_id().to_string(),
                step: state.step(),
                status: state.status().name(),
                sealed,
                audit,
            })
        })();
        self.send(row)
    }

    fn design_step(
        &self,
        run_id: &str,
        kind: &'static str,
        step: u32,
        body: String,
    ) -> BoxFuture<'static, Result<(), String>> {
        let sig = sign_step(&self.key, run_id, kind, step, &body);
        self.send(Ok(Row::Step { run_id: run_id.to_string(), kind, step, body, sig }))
    }
}

/// The crash test hook of the writer: `durable:before_commit:K` aborts with the K-th
/// durable record of this process written but not committed, `durable:after_commit:K`
/// once it is committed but before its run hears so; `durable:hold_after_commit:K` says so
/// on standard error and holds the process there for the test to `SIGKILL` it.
fn crash_at(phase: &str, first: u64, last: u64) {
    let Some(v) = std::env::var_os(super::CRASH_AT_ENV) else { return };
    let v = v.to_string_lossy();
    if phase == "after_commit" {
        let held = v.strip_prefix("durable:hold_after_commit:").and_then(|k| k.parse::<u64>().ok());
        if let Some(k) = held.filter(|k| (first..=last).contains(k)) {
            eprintln!("rolegate-test: held after durable step {k}");
            loop {
                std::thread::park();
            }
        }
    }
    let Some(k) = v.strip_prefix("durable:").and_then(|r| r.strip_prefix(phase)).and_then(|r| r.strip_prefix(':'))
    else {
        return;
    };
    if k.parse::<u64>().is_ok_and(|k| (first..=last).contains(&k)) {
        std::process::abort();
    }
}

fn write_loop(mut store: Store, rx: &mpsc::Receiver<Job>, stats: &WriterStats, key: &SigningKey) {
    let mut written: u64 = 0;
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let (good, bad): (Vec<Job>, Vec<Job>) = batch.into_iter().partition(|j| j.row.is_ok());
        for job in bad {
            let why = job.row.err().unwrap_or_default();
            let _ = job.ack.send(Err(why));
        }
        if good.is_empty() {
            continue;
        }
        let (first_no, last_no) = (written + 1, written + good.len() as u64);
        let result = commit(&mut store, &good, (first_no, last_no), key).map_err(|e| e.to_string());
        if result.is_ok() {
            written = last_no;
            stats.commits.fetch_add(1, Ordering::Relaxed);
            stats.steps.fetch_add(good.len() as u64, Ordering::Relaxed);
            crash_at("after_commit", first_no, last_no);
        }
        for job in good {
            let _ = job.ack.send(result.clone());
        }
    }
}

fn commit(store: &mut Store, jobs: &[Job], (first, last): (u64, u64), key: &SigningKey) -> Result<(), StoreError> {
    let tx = store.begin()?;
    for job in jobs {
        match &job.row {
            Ok(Row::Checkpoint { run_id, step, status, sealed, audit }) => {
                rows::push_checkpoint(&tx, run_id, *step, status, sealed)?;
                for (run, json) in audit {
                    rows::insert_gate_audit(&tx, run, json, key)?;
                }
            }
            Ok(Row::Step { run_id, kind, step, body, sig }) => push_step(&tx, run_id, kind, *step, body, sig)?,
            Ok(Row::Exchange(row)) => super::exchanges::push_exchange(&tx, row)?,
            Err(_) => {}
        }
    }
    crash_at("before_commit", first, last);
    tx.commit()?;
    Ok(())
}

/// Appends a signed record to a run's journal.
///
/// # Errors
/// [`StoreError::Sql`].
pub(crate) fn push_step(
    c: &Connection,
    run_id: &str,
    kind: &str,
    step: u32,
    body: &str,
    sig: &str,
) -> Result<(), StoreError> {
    c.execute(
        "INSERT INTO steps (run_id, seq, kind, step, body, sig)
         VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM steps WHERE run_id = ?1), ?2, ?3, ?4, ?5)",
        params![run_id, kind, step, body, sig],
    )?;
    Ok(())
}

/// The journal of a run (every run for `None`), in order, each row verified by its
/// signature; a row that does not verify is set aside.
///
/// # Errors
/// [`StoreError::Sql`].
pub(crate) fn steps_of(c: &Connection, run_id: Option<&str>, key: &SigningKey) -> Result<Rows<StepRecord>, StoreError> {
    let mut st = c.prepare(
        "SELECT run_id, seq, kind, step, body, sig FROM steps WHERE ?1 IS NULL OR run_id = ?1 ORDER BY run_id, seq",
    )?;
    let raw: Vec<(String, i64, String, u32, String, String)> = st
        .query_map(params![run_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))?
        .collect::<Result<_, _>>()?;
    let mut out = Rows::default();
    for (run_id, seq, kind, step, body, sig) in raw {
        if key.verify_as(STEP_DOMAIN, &signed_text(&run_id, &kind, step, &body), &sig) {
            out.push(Ok(StepRecord { run_id, seq, kind, step, body }));
        } else {
            out.push(Err(BadRow {
                table: "steps",
                id: format!("{run_id}#{seq}"),
                code: RowCode::BadSignature,
                detail: "the signature does not match: edited in the file".into(),
            }));
        }
    }
    Ok(out)
}

/// A run's checkpoints, journal records, and its latest checkpoint's step and status.
pub(crate) type RunSummary = (i64, i64, Option<(u32, String)>);

/// How many checkpoints and journal records a run has, and its latest checkpoint's step
/// and status (for `runs list`).
///
/// # Errors
/// [`StoreError::Sql`].
pub(crate) fn run_summary(c: &Connection, run_id: &str) -> Result<RunSummary, StoreError> {
    let checkpoints: i64 =
        c.query_row("SELECT count(*) FROM checkpoints WHERE run_id = ?1", params![run_id], |r| r.get(0))?;
    let steps: i64 = c.query_row("SELECT count(*) FROM steps WHERE run_id = ?1", params![run_id], |r| r.get(0))?;
    let last = c
        .query_row(
            "SELECT step, status FROM checkpoints WHERE run_id = ?1 ORDER BY seq DESC LIMIT 1",
            params![run_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok((checkpoints, steps, last))
}
