//! Signed checkpoints: everything a new process needs to continue a run.
//!
//! A [`Checkpoint`] is the typed state plus the run's [`Progress`]: fingerprints of calls
//! already sent (the repeat rule), the calls, the trace, the usage ledger (cost so far)
//! and the working seconds so far. Stored text is untrusted input, so it is signed with
//! HMAC-SHA256 and, when loaded, verified in constant time before anything is parsed; the
//! state then passes the same validation as a live state ([`AgentState`]'s `RawState`
//! rules). A tampered or malformed checkpoint never becomes state.

use crate::codes::codes;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::fmt;
use std::path::Path;

use crate::agent::{AgentState, Progress, Run};

/// The environment variable holding the signing key.
pub(crate) const SIGNING_KEY_ENV: &str = "ROLEGATE_SIGNING_KEY";
/// The environment variable naming a file that holds the signing key.
pub(crate) const SIGNING_KEY_FILE_ENV: &str = "ROLEGATE_SIGNING_KEY_FILE";
/// The shortest key accepted, in bytes (after trimming).
pub(crate) const MIN_KEY_BYTES: usize = 32;
/// The largest key file read, in bytes: a key file is small, and a device such as
/// `/dev/zero` must not be read without end.
pub(crate) const MAX_KEY_FILE_BYTES: u64 = 4096;
/// The format tag of a signed checkpoint.
pub(crate) const CHECKPOINT_FORMAT: &str = "rolegate-checkpoint/1";

type HmacSha256 = Hmac<Sha256>;

codes! {
    /// Why a checkpoint was refused.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[non_exhaustive]
    pub enum CheckpointCode {
        /// Not a signed checkpoint at all (junk, wrong format, unknown fields).
        NotACheckpoint = "not_a_checkpoint",
        /// The signature does not match the body (edited, or signed with another key).
        BadSignature = "bad_signature",
        /// Correctly signed, but the state breaks the state rules.
        InvalidState = "invalid_state",
    }
}

/// Errors of checkpoints and signing keys.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// A checkpoint was refused before it became state.
    #[error("{code}: {detail}")]
    Refused {
        /// Why.
        code: CheckpointCode,
        /// Details for a person (never the body).
        detail: String,
    },
    /// No signing key is configured.
    #[error(
        "no signing key: set {SIGNING_KEY_ENV} to a secret of at least {MIN_KEY_BYTES} bytes, or {SIGNING_KEY_FILE_ENV} to a file holding one"
    )]
    MissingKey,
    /// A checkpoint could not be written as JSON; nothing was signed.
    #[error("checkpoint could not be encoded: {0}")]
    Encode(String),
    /// The configured key is unusable.
    #[error("signing key: {0}")]
    BadKey(String),
}

impl CheckpointError {
    /// The refusal code, for a refused checkpoint.
    pub fn code(&self) -> Option<CheckpointCode> {
        match self {
            Self::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }

    fn refused(code: CheckpointCode, detail: impl Into<String>) -> Self {
        Self::Refused { code, detail: detail.into() }
    }
}

/// The secret checkpoints are signed with. Its bytes are never printed.
#[derive(Clone)]
pub struct SigningKey {
    /// The keyed MAC, ready to be cloned for each message.
    mac: HmacSha256,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningKey(..)")
    }
}

impl SigningKey {
    /// A key from raw bytes (taken as they are).
    ///
    /// # Errors
    /// [`CheckpointError::BadKey`] for a key shorter than [`MIN_KEY_BYTES`].
    pub fn new(bytes: &[u8]) -> Result<Self, CheckpointError> {
        if bytes.len() < MIN_KEY_BYTES {
            return Err(CheckpointError::BadKey(format!(
                "the key is {} bytes; it must be at least {MIN_KEY_BYTES}",
                bytes.len()
            )));
        }
        let mac = HmacSha256::new_from_slice(bytes).map_err(|e| CheckpointError::BadKey(e.to_string()))?;
        // its value is hidden from every output from now on, whatever its shape
        crate::security::register_secret_bytes(bytes);
        Ok(Self { mac })
    }

    /// A key as configured, from the environment or a file, read the same way for both:
    /// it must be UTF-8 text; surrounding whitespace is trimmed; what is left must not be
    /// empty and must be at least [`MIN_KEY_BYTES`] long. `source` names where it came
    /// from in the error.
    ///
    /// # Errors
    /// [`CheckpointError::BadKey`] with the reason.
    pub fn from_text(bytes: &[u8], source: &str) -> Result<Self, CheckpointError> {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| CheckpointError::BadKey(format!("{source}: the key is not UTF-8 text")))?;
        let key = text.trim();
        if key.is_empty() {
            return Err(CheckpointError::BadKey(format!("{source}: the key is empty or only whitespace")));
        }
        Self::new(key.as_bytes()).map_err(|e| match e {
            CheckpointError::BadKey(why) => CheckpointError::BadKey(format!("{source}: {why}")),
            other => other,
        })
    }

    /// The key from configuration: `value` (the environment variable, when it is set at
    /// all, even to something unusable), else the contents of `file`; both are read by
    /// [`SigningKey::from_text`].
    ///
    /// # Errors
    /// [`CheckpointError::MissingKey`] when neither is set; [`CheckpointError::BadKey`]
    /// for an unusable key or key file.
    pub fn from_config(value: Option<&std::ffi::OsStr>, file: Option<&Path>) -> Result<Self, CheckpointError> {
        if let Some(v) = value {
            return Self::from_text(v.as_encoded_bytes(), SIGNING_KEY_ENV);
        }
        if let Some(path) = file {
            return Self::from_file(path);
        }
        Err(CheckpointError::MissingKey)
    }

    /// The key from [`SIGNING_KEY_ENV`], else from the file named by
    /// [`SIGNING_KEY_FILE_ENV`].
    ///
    /// # Errors
    /// As [`SigningKey::from_config`].
    pub fn from_env() -> Result<Self, CheckpointError> {
        let value = std::env::var_os(SIGNING_KEY_ENV);
        let file = std::env::var_os(SIGNING_KEY_FILE_ENV).map(std::path::PathBuf::from);
        Self::from_config(value.as_deref(), file.as_deref())
    }

    /// The key held in a file, read by [`SigningKey::from_text`]. The file must be a
    /// regular file (a FIFO would block, a device never end) of at most
    /// [`MAX_KEY_FILE_BYTES`].
    ///
    /// # Errors
    /// [`CheckpointError::BadKey`] when the file cannot be read, is not a regular file, is
    /// too large, or holds an unusable key.
    pub fn from_file(path: &Path) -> Result<Self, CheckpointError> {
        let source = path.display().to_string();
        let bytes = read_small_file(path, MAX_KEY_FILE_BYTES)
            .map_err(|why| CheckpointError::BadKey(format!("{source}: {why}")))?;
        Self::from_text(&bytes, &source)
    }

    /// A short public id of this key (16 hex digits, a keyed hash of a fixed text): two
    /// processes can tell whether they hold the same key without showing it.
    pub fn key_id(&self) -> String {
        let full = self.sign_as("rolegate-key-id/1", "");
        full.get(..16).unwrap_or_default().to_string()
    }

    fn mac(&self, domain: &str, body: &str) -> HmacSha256 {
        let mut mac = self.mac.clone();
        mac.update(domain.as_bytes());
        mac.update(&[0]);
        mac.update(body.as_bytes());
        mac
    }

    /// The hex HMAC-SHA256 of a checkpoint `body`.
    pub fn sign(&self, body: &str) -> String {
        self.sign_as(CHECKPOINT_FORMAT, body)
    }

    /// True when `signature` is the HMAC of a checkpoint `body` (constant-time compare).
    pub fn verify(&self, body: &str, signature: &str) -> bool {
        self.verify_as(CHECKPOINT_FORMAT, body, signature)
    }

    /// The hex HMAC-SHA256 of `body` for records of kind `domain` (e.g. a stored approval
    /// request); the domain keeps a signature of one kind from passing as another.
    pub fn sign_as(&self, domain: &str, body: &str) -> String {
        hex(&self.mac(domain, body).finalize().into_bytes())
    }

    /// True when `signature` is the HMAC of `body` for `domain` (constant-time compare).
    pub fn verify_as(&self, domain: &str, body: &str, signature: &str) -> bool {
        match unhex(signature) {
            Some(bytes) => self.mac(domain, body).verify_slice(&bytes).is_ok(),
            None => false,
        }
    }
}

/// The bytes of a small regular file: refused without reading when it is not a regular
/// file (checked before it is opened, and again on the open handle) or is larger than
/// `max` bytes (and never more than `max + 1` bytes are read). Says why not.
///
/// # Errors
/// The reason, for a person.
pub(crate) fn read_small_file(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > max {
        return Err(format!("{} bytes; a key file holds at most {max}", meta.len()));
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    if bytes.len() as u64 > max {
        return Err(format!("more than {max} bytes; a key file holds at most {max}"));
    }
    Ok(bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of a signature in its one canonical form, lower-case hex. Anything else (upper
/// case, a sign `from_str_radix` would accept) is no signature, so no single byte of a
/// signed record can change while it still verifies.
fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok()).collect()
}

/// The outer, signed form: the body is kept as the exact text that was signed.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sealed {
    format: String,
    body: String,
    signature: String,
}

/// The sealed text of a checkpoint body.
fn seal_body<T: Serialize>(body: &T, key: &SigningKey) -> Result<String, CheckpointError> {
    let encode = |e: serde_json::Error| CheckpointError::Encode(e.to_string());
    let body = serde_json::to_string(body).map_err(encode)?;
    let sealed = Sealed { format: CHECKPOINT_FORMAT.into(), signature: key.sign(&body), body };
    serde_json::to_string(&sealed).map_err(encode)
}

/// A run as it stood at the top of a step (or parked): state and progress.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// The typed state (validated again on load).
    pub state: AgentState,
    /// Calls, their fingerprints, trace, ledger (cost so far), working time so far, the
    /// bad-step count and the gate's per-tool call counts.
    pub progress: Progress,
}

impl Checkpoint {
    /// A checkpoint of `state` and `progress`.
    pub fn new(state: &AgentState, progress: &Progress) -> Self {
        Self { state: state.clone(), progress: progress.clone() }
    }

    /// A checkpoint of a finished or parked run.
    pub fn of(run: &Run) -> Self {
        Self::new(&run.state, &run.progress)
    }

    /// The run this checkpoint holds.
    pub fn into_run(self) -> Run {
        Run { state: self.state, progress: self.progress }
    }

    /// The signed JSON text of a checkpoint of `state` and `progress`, without copying
    /// them (the same text as `Checkpoint::new(state, progress).seal(key)`).
    ///
    /// # Errors
    /// As [`Checkpoint::seal`].
    pub fn seal_parts(state: &AgentState, progress: &Progress, key: &SigningKey) -> Result<String, CheckpointError> {
        /// The shape of [`Checkpoint`], borrowed.
        #[derive(Serialize)]
        struct Parts<'a> {
            state: &'a AgentState,
            progress: &'a Progress,
        }
        seal_body(&Parts { state, progress }, key)
    }

    /// The signed JSON text to store.
    ///
    /// # Errors
    /// [`CheckpointError::Encode`] when the checkpoint cannot be written as JSON: nothing
    /// is signed then, and no empty text stands in for it.
    pub fn seal(&self, key: &SigningKey) -> Result<String, CheckpointError> {
        seal_body(self, key)
    }

    /// Loads signed JSON text: shape, then signature (constant time), then the state rules.
    ///
    /// # Errors
    /// [`CheckpointError::Refused`] with `not_a_checkpoint`, `bad_signature` or
    /// `invalid_state`.
    pub fn open(text: &str, key: &SigningKey) -> Result<Self, CheckpointError> {
        let sealed: Sealed = serde_json::from_str(text)
            .map_err(|e| CheckpointError::refused(CheckpointCode::NotACheckpoint, e.to_string()))?;
        if sealed.format != CHECKPOINT_FORMAT {
            let detail = format!("format must be {CHECKPOINT_FORMAT}");
            return Err(CheckpointError::refused(CheckpointCode::NotACheckpoint, detail));
        }
        if !key.verify(&sealed.body, &sealed.signature) {
            return Err(CheckpointError::refused(
                CheckpointCode::BadSignature,
                "the body was changed after signing, or signed with another key",
            ));
        }
        serde_json::from_str(&sealed.body)
            .map_err(|e| CheckpointError::refused(CheckpointCode::InvalidState, e.to_string()))
    }
}
