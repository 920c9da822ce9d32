//! Bounded everything: prices that would overflow or switch the budget off are refused by
//! name, negative budgets are refused, `check` streams in constant memory, a long table's
//! duplicate id is found in linear time, FIFOs and devices are refused as paths, a
//! non-UTF-8 file names its line, the run's deadline ends an HTTP call and its retries
//! with `time_budget`, and retries get seedable jitter.
//!
//! Time: the deadline tests use paused tokio time where nothing waits on the socket (the
//! retry waits), and real time where a call ends before any wait.

use rolegate::agent::ModelDecider;
use rolegate::cost::{MAX_PRICE_PER_1K, Price, PriceTable};
use rolegate::eval::parse_single_table;
use rolegate::model::http::{HttpCode, Jitter, RetryPolicy, ToolMode};
use rolegate::model::{HttpClient, LlmClient, LlmRequest, Message};
use rust_decimal::Decimal;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::http_runs::{http_cfg, http_env};
use crate::http_server::{Reply, Server};
use crate::util::temp_dir;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rolegate"));
    c.env_remove("ROLEGATE_API_KEY").env_remove("ROLEGATE_BASE_URL");
    c
}

/// Runs `cmd`, failing the test (instead of hanging it) when it takes over a minute.
fn output_within(mut cmd: Command) -> Output {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(cmd.stdin(Stdio::null()).output());
    });
    rx.recv_timeout(Duration::from_secs(60)).expect("the command ends (no hang)").expect("the binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn prices_file(dir: &Path, input: &str) -> PathBuf {
    let path = dir.join("prices.json");
    let json = format!(r#"{{"models": {{"local-model": {{"input_per_1k": "{input}", "output_per_1k": "0.01"}}}}}}"#);
    std::fs::write(&path, json).unwrap();
    path
}

#[test]
fn a_huge_or_negative_price_is_refused_by_name_in_run_compare_and_suite_never_a_panic() {
    let dir = temp_dir("limits-prices");
    for price in ["79228162514264337593543950335", "1000000001", "-1", "-0.0001"] {
        let file = prices_file(&dir, price);
        let f = file.to_str().unwrap();
        let base = "http://127.0.0.1:9/v1";
        let runs: [&[&str]; 3] = [
            &["run", "Check T-601.", "--model", "openai:local-model", "--base-url", base, "--prices", f],
            &["compare", "--model", "openai:local-model", "--base-url", base, "--prices", f],
            &["suite", "--model", "openai:local-model", "--base-url", base, "--prices", f],
        ];
        for args in runs {
            let mut cmd = bin();
            cmd.args(args);
            let out = output_within(cmd);
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{price} {args:?}: {err}");
            assert!(err.contains(f) && err.contains("local-model.input_per_1k") && err.contains(price), "{err}");
            assert!(err.contains("out of range") && !err.contains("panicked"), "{err}");
        }
    }
    // in the library: the same refusal, and a cost that would overflow saturates
    let table = r#"{"models": {"m": {"input_per_1k": "-2", "output_per_1k": "1"}}}"#;
    assert!(PriceTable::from_json(table).unwrap_err().to_string().contains("m.input_per_1k = -2"));
    let huge = Price { input_per_1k: Decimal::MAX, output_per_1k: Decimal::MAX };
    assert_eq!(huge.checked_cost(u64::MAX, u64::MAX), None);
    assert_eq!(huge.cost(u64::MAX, u64::MAX), Decimal::MAX);
    let top = Price { input_per_1k: MAX_PRICE_PER_1K, output_per_1k: MAX_PRICE_PER_1K };
    assert!(top.checked_cost(u64::MAX, u64::MAX).is_some(), "every token count fits at the top price");
}

#[test]
fn a_single_row_refuses_a_negative_cost_budget_like_a_multi_row() {
    let row = r#"{"id": "neg", "model": "sensible", "user": "kwame", "task": "triage", "goal": "Check T-601.", "limits": {"max_cost": "-1"}, "expect": {"status": "done", "reason": "done", "calls": [], "emails": 0}}"#;
    let err = parse_single_table(row, "rows.jsonl").unwrap_err().to_string();
    assert!(err.contains("limits.max_cost") && err.contains("must not be negative"), "{err}");
}

/// Peak resident memory of process `pid`, in KiB (`VmHWM`).
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn check_answers_each_line_before_reading_the_next_and_stays_small_on_a_large_stream() {
    let mut child = bin()
        .args(["check", "memory"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // one line in, one verdict out, while the input is still open
    let mut verdict = String::new();
    writeln!(
        stdin,
        r#"{{"id": "a", "key": "ticket-t-601", "text": "T-601 status is open", "source": "tool:get_ticket:o1"}}"#
    )
    .unwrap();
    stdout.read_line(&mut verdict).unwrap();
    assert_eq!(verdict.trim(), r#"{"line":1,"id":"a","code":"ok"}"#);
    // what the process holds once it has checked a line: its code, data and compiled checks
    let settled = peak_kib(child.id());
    // then 96 MiB: lines over the 1 MiB limit, and short lines in between
    let reader = std::thread::spawn(move || {
        let mut codes = std::collections::BTreeMap::<String, usize>::new();
        for l in stdout.lines() {
            let v: serde_json::Value = serde_json::from_str(&l.unwrap()).unwrap();
            *codes.entry(v["code"].as_str().unwrap().to_string()).or_default() += 1;
        }
        codes
    });
    let long = vec![b'x'; 2 << 20];
    for _ in 0..48 {
        stdin.write_all(&long).unwrap();
        stdin
            .write_all(b"\n{\"key\": \"fact\", \"text\": \"T-601 status is open\", \"source\": \"user:turn-1\"}\n")
            .unwrap();
    }
    stdin.flush().unwrap();
    let peak = peak_kib(child.id());
    drop(stdin);
    let status = child.wait().unwrap();
    let codes = reader.join().unwrap();
    assert_eq!(status.code(), Some(1), "the long lines are refused");
    assert_eq!(codes.get("line_too_long"), Some(&48));
    assert_eq!(codes.get("ok"), Some(&48));
    // the whole input was 96 MiB; the process never held more than about a line of it
    // (the reader keeps at most 1 MiB of a line)
    assert!(
        peak < settled + 8 * 1024,
        "peak resident memory {peak} KiB (settled at {settled} KiB) for a 96 MiB stream"
    );
}

#[test]
fn a_bad_line_names_its_number_in_check_and_a_non_utf8_table_names_its_line() {
    let dir = temp_dir("limits-utf8");
    let table = dir.join("rows.jsonl");
    std::fs::write(&table, b"# rows\n\n{\"id\": \"x\", \xff}\n").unwrap();
    let mut cmd = bin();
    cmd.arg("suite").arg(&table);
    let out = output_within(cmd);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("line 3: not UTF-8"), "{}", text(&out.stderr));
    let mut cmd = bin();
    cmd.args(["check", "memory"]).arg(&table);
    let out = output_within(cmd);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains(r#""line":3,"code":"bad_line","error":"not UTF-8"#), "{}", text(&out.stdout));
}

#[test]
fn fifos_nobody_reads_and_devices_as_input_are_refused_without_hanging() {
    let dir = temp_dir("limits-fifo");
    let fifo = dir.join("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success());
    let fifo = fifo.to_str().unwrap().to_string();
    let good = dir.join("trace.jsonl");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["check".into(), "memory".into(), fifo.clone()], "a FIFO"),
        (vec!["check".into(), "memory".into(), "/dev/zero".into()], "a character device"),
        (vec!["suite".into(), fifo.clone()], "a FIFO"),
        (vec!["suite".into(), "/dev/zero".into()], "a character device"),
        (vec!["suite".into(), "--attacks".into(), fifo.clone()], "a FIFO"),
        (
            vec![
                "run".into(),
                "Check T-601.".into(),
                "--prices".into(),
                "/dev/zero".into(),
                "--model".into(),
                "openai:m".into(),
                "--base-url".into(),
                "http://127.0.0.1:9/v1".into(),
            ],
            "a character device",
        ),
        (vec!["--trace-json".into(), fifo.clone(), "run".into(), "Check T-601.".into()], "a FIFO"),
        (vec!["report".into(), "--out".into(), fifo.clone()], "a FIFO"),
        (vec!["report".into(), "--out".into(), dir.to_str().unwrap().to_string()], "a directory"),
    ];
    for (args, what) in cases {
        let mut cmd = bin();
        cmd.args(&args);
        let out = output_within(cmd);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("not a regular file") && err.contains(what), "{args:?}: {err}");
    }
    // a regular file and a character device are fine as a trace export
    for sink in [good.as_path(), Path::new("/dev/null")] {
        let mut cmd = bin();
        cmd.arg("--trace-json").arg(sink).args(["run", "Check T-601."]);
        assert_eq!(output_within(cmd).status.code(), Some(0), "{}", sink.display());
    }
    // a FIFO that a process reads is a sink too (`--trace-json /dev/stdout | jq`): the
    // test holds the read end open (a non-blocking open does not wait for a writer), and
    // one short run's trace fits in the pipe's buffer
    use std::os::unix::fs::OpenOptionsExt;
    let mut reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .expect("open the FIFO to read");
    let mut cmd = bin();
    cmd.arg("--trace-json").arg(&fifo).args(["run", "Check T-601."]);
    let out = output_within(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut read = String::new();
    std::io::Read::read_to_string(&mut reader, &mut read).expect("the trace is in the pipe");
    assert!(read.contains("\"run_id\""), "{read}");
}

#[test]
fn a_duplicate_id_at_the_end_of_a_long_table_is_found_in_linear_time() {
    let mut table = String::new();
    for i in 0..100_000 {
        table.push_str(&format!(
            "{{\"id\": \"r{i}\", \"model\": \"sensible\", \"user\": \"kwame\", \"task\": \"triage\", \"goal\": \"Check T-601.\", \"expect\": {{\"status\": \"done\", \"reason\": \"done\", \"calls\": [], \"emails\": 0}}}}\n"
        ));
    }
    table.push_str("{\"id\": \"r7\", \"model\": \"sensible\", \"user\": \"kwame\", \"task\": \"triage\", \"goal\": \"Check T-601.\", \"expect\": {\"status\": \"done\", \"reason\": \"done\", \"calls\": [], \"emails\": 0}}\n");
    let started = std::time::Instant::now();
    let err = parse_single_table(&table, "long.jsonl").unwrap_err().to_string();
    let took = started.elapsed();
    assert!(err.contains("long.jsonl:100001:") && err.contains("r7 is used twice"), "{err}");
    // the bound the issue asks for is one second, for the release build; the debug build
    // of the tests parses each row far more slowly (and shares two cores with the other
    // tests), while the quadratic check took 59 s in a release build on 100k rows
    let bound = if cfg!(debug_assertions) { Duration::from_secs(40) } else { Duration::from_secs(1) };
    assert!(took < bound, "{took:?}");
}

fn request() -> LlmRequest {
    LlmRequest {
        model: "local-model".into(),
        messages: vec![Message::system("rules"), Message::user("<goal source=\"user-input\">Check T-601.</goal>")],
        tools: Vec::new(),
        max_tokens: 50,
    }
}

#[tokio::test]
async fn a_retry_after_past_the_runs_time_budget_ends_the_run_at_once_with_time_budget() {
    // the issue's case: max_seconds 2 against a server answering 429 with Retry-After: 5
    let server = Server::start(vec![], Some(Reply::Status(429, "slow down", Some("5")))).await;
    let mut cfg = http_cfg(&server, "local-model", ToolMode::Native);
    cfg.endpoint.retry.max_retries = 10;
    let mut config = rolegate::lab::LabConfig::default();
    config.budget.max_seconds = Duration::from_secs(2);
    let mut lab = config.build(&http_env());
    lab.agent.replace_decider(Box::new(ModelDecider::new(HttpClient::new(cfg))));
    let started = tokio::time::Instant::now();
    let run = lab.agent.run("What is the status of T-601?", "run-1").await.unwrap();
    assert_eq!(run.reason().as_str(), "time_budget", "{:?}", run.trace().lines());
    let lines = run.trace().lines();
    assert!(lines.iter().any(|l| l.contains("model  time_budget") && l.contains("HTTP 429")), "{lines:?}");
    assert_eq!(server.seen().len(), 1, "no retry was started that would end past the deadline");
    assert!(started.elapsed() < Duration::from_secs(2), "nothing waited for the 5 s");
}

#[tokio::test(start_paused = true)]
async fn retries_and_their_waits_end_at_the_deadline() {
    // 429 with Retry-After: 1, again and again; the deadline is 2.5 s away
    let server = Server::start(vec![], Some(Reply::Status(429, "slow down", Some("1")))).await;
    let mut cfg = http_cfg(&server, "local-model", ToolMode::Native);
    cfg.endpoint.retry = RetryPolicy { max_retries: 10, jitter: Jitter::Off, ..RetryPolicy::default() };
    let mut client = HttpClient::new(cfg);
    let started = tokio::time::Instant::now();
    client.set_deadline(Some(started + Duration::from_millis(2500)));
    let err = client.complete(&request()).await.unwrap_err().to_string();
    assert!(err.starts_with(HttpCode::TimeBudget.as_str()), "{err}");
    // attempts at 0 s, 1 s and 2 s; the next wait would end at 3 s, past the deadline
    assert_eq!(server.seen().len(), 3, "{err}");
    assert_eq!(started.elapsed(), Duration::from_secs(2));
}

#[test]
fn jitter_spreads_the_waits_and_a_seed_repeats_them() {
    let policy = RetryPolicy { jitter: Jitter::Seeded(7), ..RetryPolicy::default() };
    let backoff = policy.backoff(2);
    assert_eq!(backoff, Duration::from_secs(2));
    assert_eq!(policy.jittered(backoff, false, 0.0), Duration::from_secs(1));
    assert_eq!(policy.jittered(backoff, false, 0.5), Duration::from_millis(1500));
    assert_eq!(policy.jittered(Duration::from_secs(5), true, 0.0), Duration::from_secs(5), "never less than asked");
    assert_eq!(policy.jittered(Duration::from_secs(5), true, 1.0), Duration::from_millis(5500));
    let off = RetryPolicy { jitter: Jitter::Off, ..policy };
    assert_eq!(off.jittered(backoff, false, 0.9), backoff);
}

#[tokio::test(start_paused = true)]
async fn seeded_clients_repeat_their_waits_and_different_seeds_differ() {
    /// The paused time a call with four retries after 503s took with jitter `seed`.
    async fn waited(seed: u64) -> Duration {
        let server = Server::start(vec![], Some(Reply::Status(503, "busy", None))).await;
        let mut cfg = http_cfg(&server, "local-model", ToolMode::Native);
        cfg.endpoint.retry = RetryPolicy { max_retries: 4, jitter: Jitter::Seeded(seed), ..RetryPolicy::default() };
        let mut client = HttpClient::new(cfg);
        let started = tokio::time::Instant::now();
        let err = client.complete(&request()).await.unwrap_err().to_string();
        assert!(err.starts_with("server_error") && err.contains("after 4 retries"), "{err}");
        assert_eq!(server.seen().len(), 5);
        started.elapsed()
    }
    let (one, again, other) = (waited(1).await, waited(1).await, waited(2).await);
    assert_eq!(one, again, "the same seed, the same waits");
    assert_ne!(one, other, "another seed, other waits");
    // without jitter the four backoffs would be 0.5 + 1 + 2 + 4 = 7.5 s exactly; with it
    // each is between its half and its whole
    assert!(one < Duration::from_millis(7500) && one >= Duration::from_millis(3750), "{one:?}");
}

#[tokio::test]
async fn a_role_call_ends_at_the_multi_runs_deadline_with_time_budget() {
    use rolegate::multi::{MultiConfig, MultiEnv, MultiReason, RoleSetup};
    // every role on a server that answers 429 with Retry-After: 5; the run has 2 s
    let server = Server::start(vec![], Some(Reply::Status(429, "slow down", Some("5")))).await;
    let mut cfg = http_cfg(&server, "local-model", ToolMode::Native);
    cfg.endpoint.retry.max_retries = 10;
    let menv = MultiEnv::new(&http_env()).unwrap();
    let mut config = MultiConfig { user: "kwame".into(), ..MultiConfig::default() };
    config.budget.max_seconds = Duration::from_secs(2);
    let started = tokio::time::Instant::now();
    let run =
        rolegate::multi::run(&menv, config, RoleSetup::http(&cfg).models(), "Status of T-601?", "run-1").await.unwrap();
    assert_eq!(run.reason, MultiReason::TimeBudget, "{:?}", run.traces);
    assert_eq!(server.seen().len(), 1, "the planner's one attempt; no retry ends past the deadline");
    assert!(started.elapsed() < Duration::from_secs(2), "nothing waited for the 5 s");
}
