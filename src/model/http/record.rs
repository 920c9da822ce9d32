//! Record and replay model exchanges: `--cache DIR` keeps each answer a server gave in a
//! JSON file and reuses it instead of asking again; `--replay DIR` answers only from such
//! files and never contacts a server (a missing exchange is `replay_miss`). A recording
//! is a plain directory a researcher can publish beside a paper and anyone can re-run.
//!
//! One file per exchange, `<key>.json`, where the key is the SHA-256 of everything that
//! determines the answer: the exact request body (model, messages, tools, `max_tokens`,
//! `temperature`, `seed`, `tool_choice`) and the repetition index of the caller
//! ([`HttpConfig::repetition`](super::HttpConfig::repetition)). The base URL and the key
//! are not part of it: the same request to another copy of the server is the same
//! exchange, and no secret is ever written.
//!
//! A file is read strictly (unknown fields refused) and checked before use: its format,
//! its key against its name, the key recomputed from the request it holds, and the digest
//! of the answer it holds (`response_sha256`, over the format, the key and the answer), so
//! an edited answer is refused like an edited request. A file that fails any check is
//! `bad_recording`, never a panic and never an answer. Only answers that were JSON are
//! recorded (a server's HTML error page is not an exchange worth keeping); a truncated or
//! refused answer is recorded like any other, so a replay ends the same way.
//!
//! **One answer per exchange.** A server need not answer the same request the same way
//! twice (even at temperature 0 with a seed), so a recording keeps the first answer and
//! every later ask of that exchange is given it: identical requests in flight at once in
//! one process wait for the first (single flight, [`Recording::flight`]), and a file is
//! written only where none exists (written beside with `create_new`, never through a link,
//! then hard-linked into place), so a second process that asked the server too reads and
//! uses the answer the first one kept. Every run of a recorded experiment therefore used
//! the answers the recording holds, and a replay reproduces its results cell for cell.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::config::ConfigError;
use super::{HttpCode, HttpFailure};

/// The format name written into every file.
pub(crate) const EXCHANGE_FORMAT: &str = "rolegate-exchange-2";

/// Largest recorded file read, in bytes.
const MAX_EXCHANGE_BYTES: u64 = 16 * 1024 * 1024;

/// Whether a recording may ask the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordMode {
    /// Reuse a recorded exchange; ask the server for the others and record them.
    Cache,
    /// Reuse a recorded exchange; a missing one is `replay_miss` (no server is contacted).
    Replay,
}

/// A directory of recorded exchanges and how it is used. Clones share the exchanges in
/// flight (see [`Recording::flight`]).
#[derive(Clone, Debug)]
pub struct Recording {
    dir: PathBuf,
    mode: RecordMode,
    flights: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl PartialEq for Recording {
    fn eq(&self, other: &Self) -> bool {
        self.dir == other.dir && self.mode == other.mode
    }
}

impl Eq for Recording {}

/// One recorded exchange, as stored.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Exchange {
    /// [`EXCHANGE_FORMAT`].
    format: String,
    /// The key (also the file's name).
    key: String,
    /// The caller's repetition index.
    repetition: u32,
    /// The request body as sent.
    request: Value,
    /// The answer body as received.
    response: Value,
    /// Hex SHA-256 of the format, the key and the answer: an edited answer does not match.
    response_sha256: String,
}

impl Recording {
    /// A recording in `dir`. A replay needs the directory to exist; a cache creates it on
    /// its first answer.
    ///
    /// # Errors
    /// [`ConfigError::BadSetting`] when `dir` is not a directory (or, for a replay, is
    /// missing).
    pub fn new(dir: PathBuf, mode: RecordMode) -> Result<Self, ConfigError> {
        let name = match mode {
            RecordMode::Cache => "--cache",
            RecordMode::Replay => "--replay",
        };
        match std::fs::metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(ConfigError::BadSetting { name, message: format!("{} is not a directory", dir.display()) });
            }
            Err(_) if mode == RecordMode::Cache => {}
            Err(e) => return Err(ConfigError::BadSetting { name, message: format!("{}: {e}", dir.display()) }),
        }
        Ok(Self { dir, mode, flights: Arc::default() })
    }

    /// Waits until no other ask of exchange `key` is in flight in this process and holds
    /// the exchange until the returned guard drops: the first ask goes to the server and
    /// records its answer, and every identical ask waiting here then reads that answer.
    pub(crate) async fn flight(&self, key: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            // a poisoned map only loses sharing: a fresh lock still serialises nothing wrong
            let mut flights = self.flights.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            flights.entry(key.to_string()).or_default().clone()
        };
        lock.lock_owned().await
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Cache or replay.
    pub fn mode(&self) -> RecordMode {
        self.mode
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }

    /// The recorded answer body of exchange `key`, if there is one.
    ///
    /// # Errors
    /// `bad_recording` for a file that is not a regular file, too large, not strict JSON
    /// of this format, or whose key does not match its name or its request.
    pub(crate) fn load(&self, key: &str) -> Result<Option<Vec<u8>>, HttpFailure> {
        let path = self.path(key);
        let bad = |why: String| HttpFailure::new(HttpCode::BadRecording, format!("{}: {why}", path.display()));
        // looked at before opening: a FIFO or a device is refused without blocking on it
        let meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(bad(e.to_string())),
        };
        if !meta.is_file() {
            return Err(bad("not a regular file".into()));
        }
        if meta.len() > MAX_EXCHANGE_BYTES {
            return Err(bad(format!("larger than {MAX_EXCHANGE_BYTES} bytes")));
        }
        let bytes = std::fs::read(&path).map_err(|e| bad(e.to_string()))?;
        let exchange: Exchange = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        if exchange.format != EXCHANGE_FORMAT {
            return Err(bad(format!("format {:?}, expected {EXCHANGE_FORMAT:?}", exchange.format)));
        }
        if exchange.key != key {
            return Err(bad("the key inside is not the file's name".into()));
        }
        if key_of_value(&exchange.request, exchange.repetition) != key {
            return Err(bad("the request inside does not hash to the file's key".into()));
        }
        if response_digest(key, &exchange.response) != exchange.response_sha256 {
            return Err(bad("the answer inside does not match its digest (edited)".into()));
        }
        serde_json::to_vec(&exchange.response).map(Some).map_err(|e| bad(e.to_string()))
    }

    /// Records exchange `key`: the request `body` sent and the `answer` received, and
    /// returns the answer the recording now holds for it: `answer`, or the one another
    /// process recorded first (which the caller then uses instead). An answer that is not
    /// JSON is not recorded (and is returned as it is). The file appears whole or not at all,
    /// and never replaces one: it is written beside (a new file, never through a link) and
    /// hard-linked into place.
    ///
    /// # Errors
    /// `recording_failed` when the directory or the file cannot be written;
    /// `bad_recording` when the file another process recorded first does not read back.
    pub(crate) fn store(
        &self,
        key: &str,
        repetition: u32,
        body: &[u8],
        answer: Vec<u8>,
    ) -> Result<Vec<u8>, HttpFailure> {
        let Ok(response) = serde_json::from_slice::<Value>(&answer) else { return Ok(answer) };
        let failed = |e: &dyn std::fmt::Display| {
            HttpFailure::new(HttpCode::RecordingFailed, format!("{}: {e}", self.dir.display()))
        };
        let request: Value = serde_json::from_slice(body).map_err(|e| failed(&e))?;
        let response_sha256 = response_digest(key, &response);
        let exchange = Exchange {
            format: EXCHANGE_FORMAT.into(),
            key: key.into(),
            repetition,
            request,
            response,
            response_sha256,
        };
        let mut text = serde_json::to_vec_pretty(&exchange).map_err(|e| failed(&e))?;
        text.push(b'\n');
        std::fs::create_dir_all(&self.dir).map_err(|e| failed(&e))?;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tmp = self.dir.join(format!(".{key}.{}.{}.tmp", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
        let written = write_new(&tmp, &text);
        let linked = written.and_then(|()| std::fs::hard_link(&tmp, self.path(key)));
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(answer),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match self.load(key)? {
                Some(first) => Ok(first),
                None => Err(failed(&"the recorded file vanished")),
            },
            Err(e) => Err(failed(&e)),
        }
    }
}

/// Writes `text` to a new file at `path`: refused when anything (a file, a link) is there
/// already, so a planted link never redirects the write.
fn write_new(path: &Path, text: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW).mode(0o644);
    }
    let mut file = options.open(path)?;
    file.write_all(text)?;
    file.sync_all()
}

/// Hex SHA-256 of the format, the key and `response` (serde_json's text of it).
fn response_digest(key: &str, response: &Value) -> String {
    let mut h = Sha256::new();
    h.update(EXCHANGE_FORMAT.as_bytes());
    h.update(b"\n");
    h.update(key.as_bytes());
    h.update(b"\n");
    h.update(response.to_string().as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The key of a request body at `repetition`.
///
/// # Errors
/// `bad_recording` if the body is not JSON (the client builds it, so it always is).
pub(crate) fn key_of(body: &[u8], repetition: u32) -> Result<String, HttpFailure> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| HttpFailure::new(HttpCode::BadRecording, format!("request body: {e}")))?;
    Ok(key_of_value(&value, repetition))
}

/// The key of a request (as a JSON value, written in serde_json's canonical key order) at
/// `repetition`: hex SHA-256 of the format name, the repetition and the request.
fn key_of_value(request: &Value, repetition: u32) -> String {
    let mut h = Sha256::new();
    h.update(EXCHANGE_FORMAT.as_bytes());
    h.update(b"\n");
    h.update(repetition.to_string().as_bytes());
    h.update(b"\n");
    h.update(request.to_string().as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rolegate-record-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn an_exchange_is_keyed_by_its_request_and_repetition_and_read_back() {
        let d = dir("roundtrip");
        let rec = Recording::new(d.clone(), RecordMode::Cache).unwrap();
        let body = br#"{"model":"m","messages":[],"max_tokens":5,"stream":false}"#;
        let answer = br#"{"choices":[{"message":{"content":"hi"}}]}"#;
        let k0 = key_of(body, 0).unwrap();
        assert_ne!(k0, key_of(body, 1).unwrap(), "the repetition is part of the key");
        assert_ne!(k0, key_of(br#"{"model":"m","messages":[],"max_tokens":6,"stream":false}"#, 0).unwrap());
        assert_eq!(k0, key_of(br#"{"stream":false, "max_tokens":5,"messages":[],"model":"m"}"#, 0).unwrap());
        assert_eq!(rec.load(&k0).unwrap(), None);
        assert_eq!(rec.store(&k0, 0, body, answer.to_vec()).unwrap(), answer.to_vec());
        let back: Value = serde_json::from_slice(&rec.load(&k0).unwrap().unwrap()).unwrap();
        assert_eq!(back, serde_json::from_slice::<Value>(answer).unwrap());
        rec.store(&key_of(body, 2).unwrap(), 2, body, b"<html>502</html>".to_vec()).unwrap();
        assert_eq!(rec.load(&key_of(body, 2).unwrap()).unwrap(), None, "a non-JSON answer is not recorded");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_first_answer_recorded_is_the_one_every_later_ask_gets() {
        let d = dir("first");
        let rec = Recording::new(d.clone(), RecordMode::Cache).unwrap();
        let body = br#"{"model":"m","messages":[{"role":"user","content":"x"}]}"#;
        let key = key_of(body, 0).unwrap();
        let first = br#"{"choices":[{"message":{"content":"first"}}]}"#.to_vec();
        let second = br#"{"choices":[{"message":{"content":"second"}}]}"#.to_vec();
        assert_eq!(rec.store(&key, 0, body, first.clone()).unwrap(), first);
        // another ask that reached the server too is handed the recorded answer, and the
        // file is not replaced
        let used: Value = serde_json::from_slice(&rec.store(&key, 0, body, second).unwrap()).unwrap();
        assert_eq!(used["choices"][0]["message"]["content"], "first");
        let kept: Value = serde_json::from_slice(&rec.load(&key).unwrap().unwrap()).unwrap();
        assert_eq!(kept["choices"][0]["message"]["content"], "first");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[cfg(unix)]
    #[test]
    fn a_link_planted_at_the_temporary_name_is_never_written_through() {
        let d = dir("link");
        std::fs::create_dir_all(&d).unwrap();
        let victim = d.join("victim.txt");
        std::fs::write(&victim, "keep me").unwrap();
        let link = d.join("planted.tmp");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(write_new(&link, b"overwritten").is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn tampered_or_garbage_files_are_bad_recordings() {
        let d = dir("tamper");
        let rec = Recording::new(d.clone(), RecordMode::Cache).unwrap();
        let body = br#"{"model":"m","messages":[{"role":"user","content":"x"}]}"#;
        let key = key_of(body, 0).unwrap();
        rec.store(&key, 0, body, br#"{"choices":[]}"#.to_vec()).unwrap();
        let path = rec.path(&key);
        let good = std::fs::read_to_string(&path).unwrap();
        for bad in [
            good.replace("\"content\": \"x\"", "\"content\": \"y\""),
            good.replace("\"repetition\": 0", "\"repetition\": 1"),
            good.replace(EXCHANGE_FORMAT, "other-format"),
            // the answer edited, its digest left: refused
            good.replace("\"choices\": []", "\"choices\": [{\"message\": {\"content\": \"edited\"}}]"),
            good.replacen('{', "{\"extra\": 1, ", 1),
            "not json".to_string(),
            String::new(),
        ] {
            std::fs::write(&path, &bad).unwrap();
            let err = rec.load(&key).unwrap_err();
            assert_eq!(err.code, HttpCode::BadRecording, "{bad}");
        }
        // a file under another exchange's name
        let other = key_of(body, 9).unwrap();
        std::fs::write(rec.path(&other), &good).unwrap();
        assert_eq!(rec.load(&other).unwrap_err().code, HttpCode::BadRecording);
        std::fs::create_dir_all(rec.path("dir-key")).unwrap();
        assert_eq!(rec.load("dir-key").unwrap_err().code, HttpCode::BadRecording);
        assert!(matches!(
            Recording::new(d.join("missing"), RecordMode::Replay),
            Err(ConfigError::BadSetting { name: "--replay", .. })
        ));
        assert!(Recording::new(d.join("missing"), RecordMode::Cache).is_ok(), "a cache directory is made later");
        assert!(Recording::new(path, RecordMode::Cache).is_err(), "a file is not a directory");
        let _ = std::fs::remove_dir_all(&d);
    }
}
