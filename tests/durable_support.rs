//! What the durable-run tests in separate processes share (`durable_crash`,
//! `durable_http`; the binary on a store is `util::on_store`): a run held after its K-th
//! durable record and killed with `SIGKILL`, the counts of a run's rows, the status
//! `runs list` gives, and what a run printed with the parts that differ between two
//! stores by design normalised.

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::util::stderr;

/// Starts `c` (set to hold after a durable record, `durable:hold_after_commit:K`), waits
/// for it to say it is held, and kills it with `SIGKILL`. False when it ended by itself
/// instead (the run has fewer records than K); `what` names the case in a failure.
pub fn held_and_killed(mut c: Command, what: &str) -> bool {
    let mut child = c.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stderr.take().unwrap()).read_line(&mut line).unwrap();
    if !line.starts_with("rolegate-test: held") {
        assert!(child.wait().unwrap().code().is_some(), "{what}: {line}");
        return false;
    }
    child.kill().unwrap();
    assert_eq!(child.wait().unwrap().code(), None, "{what}: killed by a signal");
    true
}

/// Each `count(*)` query of `sql`, run on `store` with SQLite directly.
pub fn counts<const N: usize>(store: &Path, sql: [&str; N]) -> [i64; N] {
    let c = rusqlite::Connection::open(store).unwrap();
    sql.map(|q| c.query_row(q, [], |r| r.get::<_, i64>(0)).unwrap())
}

/// The status of the first run in the output of `runs list --format json`.
pub fn first_status(list: &Output) -> String {
    assert_eq!(list.status.code(), Some(0), "{}", stderr(list));
    let runs: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    runs[0]["status"].as_str().unwrap().to_string()
}

/// What a run printed, without what differs between two stores by design: the store's
/// path and a request's expiry (read from the system clock).
pub fn printed(out: &Output, store: &Path) -> String {
    let text = crate::util::stdout(out).replace(&store.display().to_string(), "STORE");
    let mut parts = text.split("expires_at=");
    let mut normal = parts.next().unwrap_or_default().to_string();
    for rest in parts {
        normal.push_str("expires_at=T");
        normal.push_str(rest.trim_start_matches(|c: char| c.is_ascii_digit()));
    }
    normal
}
