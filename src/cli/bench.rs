//! `rolegate bench`: prints the three-role pipeline's figures and their ratios against
//! the peers (figures given on the command line, or the published ones).

use std::sync::Arc;

use super::format::OutputFormat;
use super::{EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, ReportFormat, out};
use rolegate::agent::Env;
use rolegate::eval::{BenchOptions, BenchReport, Peers, bench, ratios};
use rolegate::multi::MultiEnv;

/// The bench's arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Runs one at a time.
    #[arg(long, default_value_t = 20_000)]
    pub sequential: u64,
    /// Runs with `--inflight` in flight.
    #[arg(long, default_value_t = 100_000)]
    pub concurrent: u64,
    /// Runs kept in flight.
    #[arg(long, default_value_t = 1000)]
    pub inflight: usize,
    /// Runs parked inside the researcher for the memory figure (0 skips it).
    #[arg(long, default_value_t = 20_000)]
    pub parked: usize,
    /// Rounds of the coordinator's intake over m01's three messages (0 skips it).
    #[arg(long, default_value_t = 200_000)]
    pub envelope_rounds: u64,
    /// A Python peer measured in this session, `NAME=RUNS_PER_SEC` (repeatable).
    #[arg(long = "python-peer")]
    pub python_peer: Vec<String>,
    /// The bare tokio floor measured in this session with the same number in flight,
    /// runs per second.
    #[arg(long)]
    pub floor: Option<f64>,
    /// The floor's bytes per parked run, measured in this session.
    #[arg(long)]
    pub floor_bytes: Option<f64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
    /// Measure the HTTP model client instead, against loopback servers this command
    /// starts: the overhead per call, and the throughput through --connections.
    #[arg(long)]
    pub http: bool,
    /// --http: single-agent runs (two model calls each) against the instant server.
    #[arg(long, default_value_t = 2000)]
    pub http_runs: u32,
    /// --http: connections (one shared --max-connections limit) to the slow server.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// --http: the slow server's time per answer, in milliseconds.
    #[arg(long, default_value_t = 50)]
    pub answer_ms: u64,
    /// --http: calls per connection, timed.
    #[arg(long, default_value_t = 20)]
    pub calls_per_connection: usize,
    /// Measure durable runs instead: the three-role pipeline with every step (each
    /// hand-off and each researcher step) committed to a store file before the run goes on
    /// (group commit, `synchronous = FULL`).
    #[arg(long)]
    pub durable: bool,
    /// --durable: the store file, which must not exist (it is removed afterwards); put it
    /// on the disk the peer's SQLite file is on.
    #[arg(long, value_name = "PATH", default_value = "rolegate-bench.db")]
    pub durable_store: std::path::PathBuf,
    /// --durable: runs one at a time.
    #[arg(long, default_value_t = 300)]
    pub durable_sequential: u64,
    /// --durable: runs with --inflight in flight.
    #[arg(long, default_value_t = 20_000)]
    pub durable_concurrent: u64,
    /// --durable: LangGraph + SqliteSaver (durability=sync) measured in this session, runs
    /// per second, for the ratio.
    #[arg(long, value_name = "RUNS_PER_SEC")]
    pub langgraph_durable: Option<f64>,
}

/// The durable bench: its own store file, the writer's counters, one at a time and in
/// flight.
async fn durable(args: &BenchArgs, env: Arc<MultiEnv>) -> u8 {
    use rolegate::agent::Durable;
    use rolegate::store::StepWriter;
    use std::sync::atomic::Ordering;
    let path = args.durable_store.clone();
    if path.exists() {
        eprintln!("rolegate: bench --durable: {} exists; give a new file (--durable-store)", path.display());
        return EXIT_USAGE;
    }
    // an ephemeral key: the rows are the bench's own and removed afterwards
    let key = match rolegate::human::SigningKey::new(
        format!("rolegate bench key {:?}", std::time::SystemTime::now()).as_bytes(),
    ) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let writer = match StepWriter::start(&path, key) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let sink = Durable::to(writer.clone());
    let (n_seq, n_conc, inflight) = (args.durable_sequential, args.durable_concurrent, args.inflight);
    let env2 = env.clone();
    let sink2 = sink.clone();
    let task = tokio::spawn(async move {
        // warm-up, then one at a time, then in flight
        rolegate::eval::durable_runs(&env2, 50, 1, &sink2, 0).await.map_err(|e| e.to_string())?;
        let seq = rolegate::eval::durable_runs(&env2, n_seq, 1, &sink2, 1_000_000).await.map_err(|e| e.to_string())?;
        let conc = rolegate::eval::durable_runs(&env2, n_conc, inflight, &sink2, 2_000_000)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((seq, conc))
    });
    let before = (writer.stats().commits.load(Ordering::Relaxed), writer.stats().steps.load(Ordering::Relaxed));
    let result = task.await;
    let after = (writer.stats().commits.load(Ordering::Relaxed), writer.stats().steps.load(Ordering::Relaxed));
    drop(sink);
    drop(writer);
    let (seq, conc) = match joined(result) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rolegate: bench: {e}");
            return EXIT_USAGE;
        }
    };
    let runs = 50 + n_seq + n_conc;
    let (commits, steps) = (after.0 - before.0, after.1 - before.1);
    let steps_per_run = steps as f64 / runs.max(1) as f64;
    let steps_per_commit = steps as f64 / commits.max(1) as f64;
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
    let ratio = args.langgraph_durable.map(|lg| conc.runs_per_sec() / lg);
    match ReportFormat::of(args.format) {
        ReportFormat::Table => {
            out(
                "durable three-role runs of m01 (every step committed before the next; SQLite WAL, synchronous=FULL, group commit):",
            );
            out(&format!("  one at a time:          {:>10.0} runs/s ({} runs)", seq.runs_per_sec(), seq.runs));
            out(&format!(
                "  {inflight:>5} in flight:        {:>10.0} runs/s ({} runs)",
                conc.runs_per_sec(),
                conc.runs
            ));
            out(&format!(
                "  durable steps per run:  {steps_per_run:>10.1}   steps per commit: {steps_per_commit:.1} ({steps} steps, {commits} commits)"
            ));
            if let (Some(lg), Some(r)) = (args.langgraph_durable, ratio) {
                out(&format!("  LangGraph + SqliteSaver (durability=sync), this session: {lg:.0} runs/s"));
                out(&format!(
                    "  rolegate durable in flight / LangGraph durable: {r:.1}x (target >= 20x) {}",
                    if r >= 20.0 { "met" } else { "MISSED" }
                ));
            }
        }
        ReportFormat::Json => {
            let _ = out(&serde_json::json!({
                "durable_sequential_runs_per_sec": seq.runs_per_sec(),
                "durable_inflight": inflight,
                "durable_inflight_runs_per_sec": conc.runs_per_sec(),
                "durable_steps_per_run": steps_per_run,
                "durable_steps_per_commit": steps_per_commit,
                "langgraph_durable_runs_per_sec": args.langgraph_durable,
                "ratio": ratio,
            })
            .to_string());
        }
    }
    if ratio.is_some_and(|r| r < 20.0) { EXIT_MISMATCH } else { EXIT_OK }
}

/// The result of a bench task the command spawned and joined: its own error or the
/// join's (a panic), as text.
fn joined<T, E: std::fmt::Display>(r: Result<Result<T, E>, tokio::task::JoinError>) -> Result<T, String> {
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

fn peers(args: &BenchArgs) -> Result<Peers, String> {
    if args.python_peer.is_empty() && args.floor.is_none() {
        return Ok(Peers::published());
    }
    let mut python = Vec::new();
    for p in &args.python_peer {
        let (name, rps) =
            p.rsplit_once('=').ok_or_else(|| format!("--python-peer {p:?}: expected NAME=RUNS_PER_SEC"))?;
        let rps: f64 = rps.parse().map_err(|_| format!("--python-peer {p:?}: {rps:?} is not a number"))?;
        python.push((name.to_string(), rps));
    }
    let floor = args.floor.ok_or("--floor is needed with --python-peer")?;
    Ok(Peers { source: "measured in this session".into(), python, floor, floor_bytes: args.floor_bytes })
}

fn table(report: &BenchReport, peers: &Peers) -> Vec<String> {
    let mut lines = vec![
        format!(
            "three-role runs of m01, one at a time:   {:>10.0} runs/s  {:>7.2} us/envelope ({} runs)",
            report.sequential.runs_per_sec(),
            report.sequential.us_per_envelope(),
            report.sequential.runs
        ),
        format!(
            "three-role runs of m01, {:>5} in flight: {:>10.0} runs/s  {:>7.2} us/envelope ({} runs)",
            report.inflight,
            report.concurrent.runs_per_sec(),
            report.concurrent.us_per_envelope(),
            report.concurrent.runs
        ),
        format!("coordinator intake per envelope:         {:>10.2} us", report.coordinator_us_per_envelope),
    ];
    match report.memory {
        Some(m) => lines.push(format!(
            "memory per run parked in the researcher: {:>10.0} bytes ({} runs, VmRSS {} -> {} KiB)",
            m.bytes_per_run(),
            m.parked,
            m.rss_before_kib,
            m.rss_parked_kib
        )),
        None => lines.push("memory per parked run: not measured (no /proc/self/status)".into()),
    }
    lines.push(format!("peers ({}):", peers.source));
    for (name, rps) in &peers.python {
        lines.push(format!("  {name}: {rps:.0} runs/s"));
    }
    lines.push(format!("  bare tokio floor, same in flight: {:.0} runs/s", peers.floor));
    if let Some(b) = peers.floor_bytes {
        lines.push(format!("  bare tokio floor, parked run: {b:.0} bytes"));
    }
    for r in ratios(report, peers) {
        lines.push(format!(
            "{:<62} {:>8.2}  target {:<8} {}",
            r.what,
            r.value,
            r.target,
            if r.met { "met" } else { "MISSED" }
        ));
    }
    lines
}

fn json(report: &BenchReport, peers: &Peers) -> String {
    let rs: Vec<_> = ratios(report, peers)
        .into_iter()
        .map(|r| serde_json::json!({"what": r.what, "value": r.value, "target": r.target, "met": r.met}))
        .collect();
    serde_json::json!({
        "sequential_runs_per_sec": report.sequential.runs_per_sec(),
        "sequential_us_per_envelope": report.sequential.us_per_envelope(),
        "inflight": report.inflight,
        "inflight_runs_per_sec": report.concurrent.runs_per_sec(),
        "inflight_us_per_envelope": report.concurrent.us_per_envelope(),
        "coordinator_us_per_envelope": report.coordinator_us_per_envelope,
        "bytes_per_parked_run": report.memory.map(|m| m.bytes_per_run()),
        "parked_runs": report.memory.map(|m| m.parked),
        "peers": {
            "source": peers.source,
            "python": peers.python.iter().map(|(n, r)| serde_json::json!({"name": n, "runs_per_sec": r})).collect::<Vec<_>>(),
            "floor_runs_per_sec": peers.floor,
            "floor_bytes_per_parked_run": peers.floor_bytes,
        },
        "ratios": rs,
    })
    .to_string()
}

/// Runs the bench and prints it; exit 1 when a target is missed.
pub(crate) async fn run(args: BenchArgs) -> u8 {
    if let Err(e) = super::format::takes("bench", args.format, &super::format::LISTING) {
        eprintln!("rolegate: {e}");
        return EXIT_USAGE;
    }
    if args.http {
        return super::bench_http::run(args.http_runs, args.connections, args.answer_ms, args.calls_per_connection)
            .await;
    }
    let peers = match peers(&args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let env = match Env::bundled().map_err(|e| e.to_string()).and_then(|e| MultiEnv::new(&e).map_err(|e| e.to_string()))
    {
        Ok(e) => e,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    if args.durable {
        return durable(&args, env).await;
    }
    let opts = BenchOptions {
        sequential: args.sequential,
        concurrent: args.concurrent,
        inflight: args.inflight,
        parked: args.parked,
        envelope_rounds: args.envelope_rounds,
    };
    // the driver is itself a runtime task, like the peers' drivers
    let task = tokio::spawn(async move { bench(&Arc::clone(&env), &opts).await });
    let report = match joined(task.await) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rolegate: bench: {e}");
            return EXIT_USAGE;
        }
    };
    match ReportFormat::of(args.format) {
        ReportFormat::Table => {
            for l in table(&report, &peers) {
                out(&l);
            }
        }
        ReportFormat::Json => {
            out(&json(&report, &peers));
        }
    }
    if ratios(&report, &peers).iter().all(|r| r.met) { EXIT_OK } else { EXIT_MISMATCH }
}
