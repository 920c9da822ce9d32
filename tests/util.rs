//! Shared helpers for the integration tests.

use rolegate::agent::Env;
use rolegate::lab::{Lab, LabConfig};
use rolegate::model::FakeKind;

/// The bundled environment.
pub fn env() -> Env {
    Env::bundled().expect("bundled data loads")
}

/// A lab with fake model `kind` and the default config otherwise.
pub fn lab(kind: FakeKind) -> Lab {
    LabConfig::fake(kind).build(&env())
}

/// A lab from a config.
pub fn lab_with(cfg: LabConfig) -> Lab {
    cfg.build(&env())
}

use rolegate::BoxFuture;
use rolegate::agent::Decider;
use rolegate::agent::{AgentState, Run};
use rolegate::human::{ApprovalQueue, ApprovalRequest, Checkpoint, SigningKey};
use rolegate::model::{LlmRequest, LlmResponse, ModelError};
use std::time::Duration;

/// The goal of the research lab.
pub const REPLY_GOAL: &str = "Reply to T-601 about returns.";

/// A signing key for tests.
pub fn key() -> SigningKey {
    SigningKey::new(b"tests-only signing key, 32 bytes").expect("long enough")
}

/// The research lab parked on its e-mail, with the request in a queue.
pub struct Parked {
    /// Agent, world (outbox) and clock.
    pub lab: Lab,
    /// The queue holding the request.
    pub queue: ApprovalQueue,
    /// The parked run.
    pub run: Run,
    /// The request for `pa-1`.
    pub request: ApprovalRequest,
    /// The parked run as a checkpoint.
    pub checkpoint: Checkpoint,
}

/// The research lab parked, with `approvers` and a request lifetime of `ttl`.
pub async fn parked_with(approvers: &[&str], ttl: Duration) -> Parked {
    let mut lab = lab_with(LabConfig::research());
    let run = lab.agent.run(REPLY_GOAL, "run-1").await.expect("runs");
    let mut queue = ApprovalQueue::new(approvers.iter().copied(), lab.clock.shared());
    queue.ttl = ttl;
    let request = queue.submit(&lab.agent.gate().pending()["pa-1"]).expect("queue has room");
    let checkpoint = Checkpoint::of(&run);
    Parked { lab, queue, run, request, checkpoint }
}

/// The research lab parked, lena approving, 900 s to decide.
pub async fn parked() -> Parked {
    parked_with(&["lena"], Duration::from_secs(900)).await
}

/// A decider whose process dies on its `n`th call (1-based).
pub struct CrashingDecider {
    /// The decider that answers until then.
    pub inner: Box<dyn Decider>,
    /// The call that dies.
    pub dies_on: u32,
    /// Calls so far.
    pub calls: u32,
}

impl Decider for CrashingDecider {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn decide<'a>(
        &'a mut self,
        state: &'a AgentState,
        request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        self.calls += 1;
        if self.calls == self.dies_on {
            return Box::pin(std::future::ready(Err(ModelError::Crashed("process died".into()))));
        }
        self.inner.decide(state, request)
    }
}

/// A fresh directory under the system temp dir, unique to this process and `name`.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rolegate-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Session memory is kept beside a checkpoint, not in it: a new process restores it.
pub fn restore_memory(lab: &mut Lab, state: &AgentState) {
    lab.agent.restore_memory(state.observations());
}

/// The bundled environment with the role scopes, shared by multi-agent runs.
pub fn menv() -> std::sync::Arc<rolegate::multi::MultiEnv> {
    rolegate::multi::MultiEnv::new(&env()).expect("bundled policy has the role scopes")
}

/// The bundled m01 row.
pub fn m01() -> rolegate::eval::MultiRow {
    rolegate::eval::bundled_multi().expect("bundled table loads").remove(0)
}

/// Runs the calling test again in a child process of its own and asserts it passed there;
/// returns true only inside that child, where the test body should run. For tests whose
/// subject is process-global state (such as `tracing`'s dispatchers).
pub fn in_own_process(test: &str) -> bool {
    const CHILD: &str = "ROLEGATE_TEST_CHILD";
    if std::env::var(CHILD).as_deref() == Ok(test) {
        return true;
    }
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args(["--exact", test, "--test-threads", "1", "--nocapture"])
        .env(CHILD, test)
        .output()
        .expect("the test binary starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{test} in its own process:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

/// A writer the tests read back (a trace export's file, in memory).
#[derive(Clone, Default)]
pub struct SharedBuffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedBuffer {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }

    /// Everything written so far, as trace export records (one per line).
    pub fn records(&self) -> Vec<rolegate::agent::TraceRecord> {
        self.text().lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect()
    }
}

/// Registers lena as an approver of the store at `store` (once), with the store signing
/// key `signing_key`; her private key goes to `lena.key` beside the store (mode 0600).
/// The CLI tests run the binary in the store's folder and approve with `--key lena.key`.
pub fn register_lena(store: &std::path::Path, signing_key: &str) -> std::path::PathBuf {
    let key = store.with_file_name("lena.key");
    if !key.exists() {
        let args = ["approvers", "add", "lena", "--key-out", key.to_str().unwrap()];
        let out = on_store(store, signing_key, &args).output().expect("the binary runs");
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    }
    key
}

/// The `rolegate` binary on `store` (in its folder) with `args` and `--store STORE`,
/// signing with `key`; a key file or a crash point set in the environment is removed.
pub fn on_store(store: &std::path::Path, key: &str, args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_rolegate"));
    c.current_dir(store.parent().unwrap())
        .args(args)
        .arg("--store")
        .arg(store)
        .env("ROLEGATE_SIGNING_KEY", key)
        .env_remove("ROLEGATE_SIGNING_KEY_FILE")
        .env_remove("ROLEGATE_TEST_CRASH_AT");
    c
}

/// Runs the `rolegate` binary on `store` as [`on_store`] sets it up.
pub fn run_binary(store: &std::path::Path, key: &str, args: &[&str]) -> std::process::Output {
    on_store(store, key, args).output().expect("the binary runs")
}

/// What a process printed on standard output.
pub fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// What a process printed on standard error.
pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `text` with every measured wall time replaced by `~` (table cells such as `0.4ms` with
/// their padding, header padding of the wall columns, and the JSON fields): everything
/// else must match byte for byte.
pub fn without_wall_times(text: &str) -> String {
    let cells = regex::Regex::new(r" +\d+\.\dms").unwrap();
    let headers = regex::Regex::new(r" +wall p(50|95)").unwrap();
    let json = regex::Regex::new(r#""wall_(us|ms_p50|ms_p95)": ?[0-9.]+"#).unwrap();
    let text = cells.replace_all(text, " ~ms");
    let text = headers.replace_all(&text, " wall p$1");
    json.replace_all(&text, r#""wall_$1":~"#).into_owned()
}

/// The standard output of `o` without its measured wall times.
pub fn shown(o: &std::process::Output) -> String {
    without_wall_times(&stdout(o))
}

/// Four corners of the defense matrix (the information-flow defense off in each): the
/// single agent with every control on; the single agent with wide scopes, its loop check
/// on and approval off; the three roles with every control on; the three roles with every
/// control off.
pub fn corner_configs() -> Vec<rolegate::suite::DefenseConfig> {
    use rolegate::eval::{ScopeWidth, Switch};
    use rolegate::multi::ClaimMode;
    use rolegate::suite::DefenseConfig;
    let (on, off) = (Switch::On, Switch::Off);
    let (narrow, wide) = (ScopeWidth::Narrow, ScopeWidth::Wide);
    vec![
        DefenseConfig::Single { scopes: narrow, loop_check: on, approval: on, ifc: off },
        DefenseConfig::Single { scopes: wide, loop_check: on, approval: off, ifc: off },
        DefenseConfig::Multi { filter: on, claims: ClaimMode::Strict, scopes: narrow, approval: on, ifc: off },
        DefenseConfig::Multi { filter: off, claims: ClaimMode::Free, scopes: wide, approval: off, ifc: off },
    ]
}

/// Every `.rs` file under `dir`, depth first (none for a folder that does not exist).
pub fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
