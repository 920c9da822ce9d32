//! Figures for the three-role pipeline, printed by `rolegate bench`: complete runs of the
//! m01 row per second (one at a time, and with many in flight), the coordinator's own work
//! per envelope, and resident memory per run parked inside the researcher.
//!
//! Every run is the real thing: role actors, the researcher's single-agent loop with its
//! gate, traces, envelope checks, claim support; each run must end `done` or the bench
//! fails. Figures depend on the machine and on what else runs on it; compare them only
//! with peers measured in the same session (`bench/side_by_side.sh` does that).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use super::multi_scenarios::{MultiRow, bundled_multi};
use super::parked::ParkingGate;
use crate::agent::Durable;
use crate::gate::Observation;
use crate::label::Label;
use crate::multi::{
    Intake, MultiConfig, MultiEnv, MultiError, MultiHandle, MultiReason, MultiRun, Role, RoleModels, start,
};
use crate::tools::{GetTicketArgs, LookupDocumentArgs, Registry, ToolArgs};

/// Logical messages per run (brief, finding, verdict), as the peers count them.
pub(crate) const ENVELOPES_PER_RUN: f64 = 3.0;

/// Why the bench could not produce a figure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// The bundled m01 row is missing or broken.
    #[error("the bundled m01 row: {0}")]
    Row(String),
    /// A run could not be carried out.
    #[error(transparent)]
    Multi(#[from] MultiError),
    /// A run ended other than `done`: the figure would measure something else.
    #[error("run {run_id} ended {reason}, not done")]
    WrongOutcome {
        run_id: String,
        /// How it ended.
        reason: MultiReason,
    },
}

/// How much to measure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchOptions {
    /// Runs one at a time.
    pub sequential: u64,
    /// Runs with `inflight` in flight.
    pub concurrent: u64,
    /// Runs kept in flight.
    pub inflight: usize,
    /// Runs parked inside the researcher for the memory figure (0 skips it).
    pub parked: usize,
    /// Rounds of the coordinator's intake over m01's three messages.
    pub envelope_rounds: u64,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self { sequential: 20_000, concurrent: 100_000, inflight: 1000, parked: 20_000, envelope_rounds: 200_000 }
    }
}

/// Runs in a time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    /// Runs completed.
    pub runs: u64,
    /// Wall time.
    pub secs: f64,
}

impl Rate {
    /// Runs per second.
    pub fn runs_per_sec(&self) -> f64 {
        if self.secs > 0.0 { self.runs as f64 / self.secs } else { 0.0 }
    }

    /// Wall microseconds per envelope (inverse throughput, not latency).
    pub fn us_per_envelope(&self) -> f64 {
        if self.runs == 0 { 0.0 } else { self.secs * 1e6 / (self.runs as f64 * ENVELOPES_PER_RUN) }
    }
}

/// Resident memory of runs parked inside the researcher.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Memory {
    /// Runs parked.
    pub parked: usize,
    /// VmRSS before spawning them, KiB.
    pub rss_before_kib: u64,
    /// VmRSS with all of them parked, KiB.
    pub rss_parked_kib: u64,
}

impl Memory {
    /// Bytes of resident memory per parked run.
    pub fn bytes_per_run(&self) -> f64 {
        if self.parked == 0 {
            return 0.0;
        }
        (self.rss_parked_kib as f64 - self.rss_before_kib as f64) * 1024.0 / self.parked as f64
    }
}

/// Every figure of one bench.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchReport {
    /// Runs one at a time.
    pub sequential: Rate,
    /// Runs with many in flight.
    pub concurrent: Rate,
    /// How many were in flight.
    pub inflight: usize,
    /// Microseconds of coordinator intake (parse, route, filter, claim support, envelope,
    /// trace line) per envelope.
    pub coordinator_us_per_envelope: f64,
    /// Memory per parked run; `None` where `/proc/self/status` does not exist.
    pub memory: Option<Memory>,
}

fn m01() -> Result<MultiRow, BenchError> {
    let rows = bundled_multi().map_err(|e| BenchError::Row(e.to_string()))?;
    rows.into_iter().find(|r| r.id == "m01").ok_or_else(|| BenchError::Row("no row m01".into()))
}

fn launch(env: &Arc<MultiEnv>, row: &MultiRow, models: RoleModels, i: u64) -> Result<MultiHandle, BenchError> {
    launch_with(env, row, models, i, &Durable::none())
}

fn launch_with(
    env: &Arc<MultiEnv>,
    row: &MultiRow,
    models: RoleModels,
    i: u64,
    durable: &Durable,
) -> Result<MultiHandle, BenchError> {
    let run_id = format!("bench-{i}");
    let cfg = MultiConfig { durable: durable.clone(), ..row.config() };
    Ok(start(env, cfg, models, &row.goal, &run_id, CancellationToken::new())?)
}

/// `n` complete m01 runs with `inflight` of them in flight (1: one at a time), every step
/// made durable through `durable` (a store's group-commit writer) before the run goes on.
///
/// # Errors
/// As [`sequential`].
pub async fn durable_runs(
    env: &Arc<MultiEnv>,
    n: u64,
    inflight: usize,
    durable: &Durable,
    first: u64,
) -> Result<Rate, BenchError> {
    let row = m01()?;
    let mut window: VecDeque<MultiHandle> = VecDeque::with_capacity(inflight);
    let t0 = Instant::now();
    let mut next = 0;
    while next < n || !window.is_empty() {
        while window.len() < inflight.max(1) && next < n {
            window.push_back(launch_with(env, &row, RoleModels::fakes(row.roles), first + next, durable)?);
            next += 1;
        }
        if let Some(h) = window.pop_front() {
            done(h.finish().await?)?;
        }
    }
    Ok(Rate { runs: n, secs: t0.elapsed().as_secs_f64() })
}

fn done(run: MultiRun) -> Result<(), BenchError> {
    if run.reason == MultiReason::Done {
        Ok(())
    } else {
        Err(BenchError::WrongOutcome { run_id: run.run_id, reason: run.reason })
    }
}

/// `n` complete m01 runs, one at a time.
///
/// # Errors
/// [`BenchError`] when a run fails or ends other than `done`.
pub(crate) async fn sequential(env: &Arc<MultiEnv>, n: u64) -> Result<Rate, BenchError> {
    let row = m01()?;
    let t0 = Instant::now();
    for i in 0..n {
        done(launch(env, &row, RoleModels::fakes(row.roles), i)?.finish().await?)?;
    }
    Ok(Rate { runs: n, secs: t0.elapsed().as_secs_f64() })
}

/// `n` complete m01 runs with `inflight` of them in flight at any time.
///
/// # Errors
/// As [`sequential`].
pub(crate) async fn concurrent(env: &Arc<MultiEnv>, n: u64, inflight: usize) -> Result<Rate, BenchError> {
    let row = m01()?;
    let mut window: VecDeque<MultiHandle> = VecDeque::with_capacity(inflight);
    let t0 = Instant::now();
    let mut next = 0;
    while next < n || !window.is_empty() {
        while window.len() < inflight.max(1) && next < n {
            window.push_back(launch(env, &row, RoleModels::fakes(row.roles), next)?);
            next += 1;
        }
        if let Some(h) = window.pop_front() {
            done(h.finish().await?)?;
        }
    }
    Ok(Rate { runs: n, secs: t0.elapsed().as_secs_f64() })
}

/// The m01 messages as the roles send them (sender, text).
type Texts = Vec<(Role, String)>;

/// The m01 messages as the roles send them, and the researcher's observations.
fn m01_texts(env: &MultiEnv) -> Result<(Texts, Vec<Observation>), BenchError> {
    let world = env.environment.as_world().ok_or_else(|| BenchError::Row("the bench runs on the help desk".into()))?;
    let read = |args: ToolArgs| {
        Registry.execute(world, "kwame", &args).map_err(|e| BenchError::Row(e.message)).map(|v| v.to_string())
    };
    let ticket = read(ToolArgs::GetTicket(GetTicketArgs { ticket_id: "T-601".into() }))?;
    let doc = read(ToolArgs::LookupDocument(LookupDocumentArgs { doc_id: "kc-returns-v3".into() }))?;
    let observations = vec![
        Observation::new("o1", 1, "get_ticket", true, ticket),
        Observation::new("o2", 2, "lookup_document", true, doc),
    ];
    let finding = crate::multi::Evidence::from_observations(&observations);
    let texts = vec![
        (Role::Planner, r#"{"kind":"brief","question":"Status of T-601 and our refund policy?"}"#.to_string()),
        (
            Role::Researcher,
            serde_json::json!({"kind": "finding", "claim": finding.strict_claim(), "sources": ["T-601", "kc-returns-v3"]})
                .to_string(),
        ),
        (Role::Reviewer, r#"{"kind":"verdict","approve":true,"notes":"Re-read 1 cited document(s)."}"#.to_string()),
    ];
    Ok((texts, observations))
}

/// Microseconds of coordinator intake per envelope, over `rounds` rounds of m01's three
/// messages (a fresh intake per round, as per run).
///
/// # Errors
/// [`BenchError::Row`] if a message were refused (the figure would measure a refusal).
pub(crate) fn coordinator_work(env: &MultiEnv, rounds: u64) -> Result<f64, BenchError> {
    let (texts, observations) = m01_texts(env)?;
    let row = m01()?;
    let t0 = Instant::now();
    for _ in 0..rounds {
        let mut intake = Intake::new("bench-1", row.claims);
        for (depth, (role, text)) in (1..).zip(&texts) {
            let obs: &[Observation] = if *role == Role::Researcher { &observations } else { &[] };
            intake
                .accept_labelled(*role, text, obs, 1, depth, Label::UNTRUSTED)
                .map_err(|c| BenchError::Row(format!("m01 refused: {c}")))?;
        }
        std::hint::black_box(&intake);
    }
    Ok(t0.elapsed().as_secs_f64() * 1e6 / (rounds.max(1) as f64 * ENVELOPES_PER_RUN))
}

/// VmRSS of this process in KiB, from `/proc/self/status`.
pub(crate) fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()
}

/// Resident memory per m01 run parked inside the researcher, with `k` runs parked; every
/// run is then let go and must end `done`. `None` without `/proc`.
///
/// # Errors
/// As [`sequential`].
pub(crate) async fn parked_memory(env: &Arc<MultiEnv>, k: usize) -> Result<Option<Memory>, BenchError> {
    let Some(_) = rss_kib() else { return Ok(None) };
    let row = m01()?;
    // real time on purpose: this is a measurement of the process, not a test
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = rss_kib().unwrap_or(0);
    let gate = ParkingGate::new();
    let mut handles = Vec::with_capacity(k);
    for i in 0..k {
        let mut models = RoleModels::fakes(row.roles);
        models.researcher = gate.park(models.researcher);
        handles.push(launch(env, &row, models, i as u64)?);
    }
    while gate.arrived() < k {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let parked = rss_kib().unwrap_or(0);
    gate.open();
    for h in handles {
        done(h.finish().await?)?;
    }
    Ok(Some(Memory { parked: k, rss_before_kib: before, rss_parked_kib: parked }))
}

/// Every figure, after a warm-up.
///
/// # Errors
/// As [`sequential`].
pub async fn bench(env: &Arc<MultiEnv>, opts: &BenchOptions) -> Result<BenchReport, BenchError> {
    sequential(env, 2000).await?;
    concurrent(env, 2 * opts.inflight.max(1000) as u64, opts.inflight).await?;
    let memory = if opts.parked > 0 { parked_memory(env, opts.parked).await? } else { None };
    let sequential = sequential(env, opts.sequential).await?;
    let concurrent = concurrent(env, opts.concurrent, opts.inflight).await?;
    let coordinator_us_per_envelope = coordinator_work(env, opts.envelope_rounds)?;
    Ok(BenchReport { sequential, concurrent, inflight: opts.inflight, coordinator_us_per_envelope, memory })
}

/// The peers' figures a report is compared with.
#[derive(Clone, Debug, PartialEq)]
pub struct Peers {
    /// Where the figures come from (printed).
    pub source: String,
    /// Python peers: name and runs per second.
    pub python: Vec<(String, f64)>,
    /// The bare tokio floor with the same number in flight, runs per second.
    pub floor: f64,
    /// The floor's bytes per parked run, if known.
    pub floor_bytes: Option<f64>,
}

impl Peers {
    /// The figures published in `bench-peers/RESULTS.md` (medians on a 2-vCPU VM): use
    /// them only when the peers cannot be run in the same session.
    pub fn published() -> Self {
        Self {
            source: "published medians (bench-peers/RESULTS.md), not this session".into(),
            python: vec![
                ("AutoGen core 0.7.5, 100 in flight".into(), 1115.0),
                ("LangGraph 1.2.24 invoke, sequential".into(), 1617.0),
            ],
            floor: 147_029.0,
            floor_bytes: Some(15_175.0),
        }
    }
}

/// One comparison against a target.
#[derive(Clone, Debug, PartialEq)]
pub struct Ratio {
    /// What is compared.
    pub what: String,
    /// The figure.
    pub value: f64,
    /// The target it must meet.
    pub target: String,
    /// Whether it does.
    pub met: bool,
}

/// The three targets: at least 30 times the faster Python peer with runs in flight, no
/// worse than 1.5 times slower than the bare floor, at most 17 KB (17,000 bytes) per
/// parked run. The last two are issue 18's; they were 4 times and 24 KB before it.
pub fn ratios(report: &BenchReport, peers: &Peers) -> Vec<Ratio> {
    let ours = report.concurrent.runs_per_sec();
    let mut out = Vec::new();
    if let Some((name, best)) = peers.python.iter().max_by(|a, b| a.1.total_cmp(&b.1)) {
        let r = if *best > 0.0 { ours / best } else { 0.0 };
        out.push(Ratio {
            what: format!("in flight vs the faster Python peer ({name})"),
            value: r,
            target: ">= 30x".into(),
            met: r >= 30.0,
        });
    }
    if peers.floor > 0.0 {
        let slower = peers.floor / ours.max(f64::MIN_POSITIVE);
        out.push(Ratio {
            what: "bare tokio floor / in flight (times slower than the floor)".into(),
            value: slower,
            target: "<= 1.5x".into(),
            met: slower <= 1.5,
        });
    }
    if let Some(m) = report.memory {
        let kb = m.bytes_per_run() / 1000.0;
        out.push(Ratio {
            what: "KB per run parked in the researcher".into(),
            value: kb,
            target: "<= 17 KB".into(),
            met: kb <= 17.0,
        });
    }
    out
}
