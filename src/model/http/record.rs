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
//! its key against its name, and the key recomputed from the request it holds. A file that
//! fails any check is `bad_recording`, never a panic and never an answer. Only answers
//! that were JSON are recorded (a server's HTML error page is not an exchange worth
//! keeping); a truncated or refused answer is recorded like any other, so a replay ends
//! the same way.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::config::ConfigError;
use super::{HttpCode, HttpFailure};

/// The format name written into every file.
pub(crate) const EXCHANGE_FORMAT: &str = "rolegate-exchange-1";

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

/// A directory of recorded exchanges and how it is used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recording {
    dir: PathBuf,
    mode: RecordMode,
}

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
        Ok(Self { dir, mode })
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
        serde_json::to_vec(&exchange.response).map(Some).map_err(|e| bad(e.to_string()))
    }

    /// Records exchange `key`: the request `body` sent and the `answer` received. An
    /// answer that is not JSON is not recorded. The file appears whole or not at all
    /// (written beside, then renamed).
    ///
    /// # Errors
    /// `recording_failed` when the directory or the file cannot be written.
    pub(crate) fn store(&self, key: &str, repetition: u32, body: &[u8], answer: &[u8]) -> Result<(), HttpFailure> {
        let Ok(response) = serde_json::from_slice::<Value>(answer) else { return Ok(()) };
        let failed = |e: &dyn std::fmt::Display| {
            HttpFailure::new(HttpCode::RecordingFailed, format!("{}: {e}", self.dir.display()))
        };
        let request: Value = serde_json::from_slice(body).map_err(|e| failed(&e))?;
        let exchange = Exchange { format: EXCHANGE_FORMAT.into(), key: key.into(), repetition, request, response };
        let mut text = serde_json::to_vec_pretty(&exchange).map_err(|e| failed(&e))?;
        text.push(b'\n');
        std::fs::create_dir_all(&self.dir).map_err(|e| failed(&e))?;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tmp = self.dir.join(format!(".{key}.{}.{}.tmp", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
        std::fs::write(&tmp, &text).map_err(|e| failed(&e))?;
        std::fs::rename(&tmp, self.path(key)).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            failed(&e)
        })
    }
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
        rec.store(&k0, 0, body, answer).unwrap();
        let back: Value = serde_json::from_slice(&rec.load(&k0).unwrap().unwrap()).unwrap();
        assert_eq!(back, serde_json::from_slice::<Value>(answer).unwrap());
        rec.store(&key_of(body, 2).unwrap(), 2, body, b"<html>502</html>").unwrap();
        assert_eq!(rec.load(&key_of(body, 2).unwrap()).unwrap(), None, "a non-JSON answer is not recorded");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn tampered_or_garbage_files_are_bad_recordings() {
        let d = dir("tamper");
        let rec = Recording::new(d.clone(), RecordMode::Cache).unwrap();
        let body = br#"{"model":"m","messages":[{"role":"user","content":"x"}]}"#;
        let key = key_of(body, 0).unwrap();
        rec.store(&key, 0, body, br#"{"choices":[]}"#).unwrap();
        let path = rec.path(&key);
        let good = std::fs::read_to_string(&path).unwrap();
        for bad in [
            good.replace("\"content\": \"x\"", "\"content\": \"y\""),
            good.replace("\"repetition\": 0", "\"repetition\": 1"),
            good.replace(EXCHANGE_FORMAT, "other-format"),
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
