//! Approver identity: each approver holds an Ed25519 key pair. The private key lives in a
//! file only its owner can read (mode 0600; a file with wider permissions is refused);
//! the public key is registered in the store. A decision is a [`DecisionStatement`] over
//! the request id, the fingerprint of the exact action, the decision and the time, signed
//! with the approver's private key; it is verified against the registered public key
//! before anything runs, and again whenever a recorded approval is acted on. Who decided
//! is therefore read from the key, never from a typed name: the requester's process never
//! holds an approver's key, so it cannot approve under any name.

use crate::codes::codes;
use ed25519_dalek::{Signature, Signer, SigningKey as Ed25519Secret, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::path::Path;

use super::approvals::ApprovalRequest;
use super::checkpoint::read_small_file;

/// The first word of an approver's private key file.
pub(crate) const APPROVER_KEY_FORMAT: &str = "rolegate-approver-key/1";
/// The format tag of a decision statement.
pub(crate) const DECISION_FORMAT: &str = "rolegate-decision/1";

codes! {
    /// Why an approver's key or decision was refused. Each is a named code a person reads.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[non_exhaustive]
    pub enum IdentityCode {
        /// A name was given (`--as`) without the approver's key file.
        NoKey = "no_key",
        /// The key file cannot be used (missing, wider permissions than 0600, malformed).
        BadKeyFile = "bad_key_file",
        /// The key is not the one registered for that approver, or nobody of that name is.
        UnknownKey = "unknown_key",
        /// The name given does not match the key's owner.
        NameMismatch = "name_mismatch",
        /// The approver's registry row fails its store signature (a public key swapped in
        /// the file).
        ApproverRowRefused = "approver_row_refused",
        /// Only users with the approver role can be registered.
        NotAnApprover = "not_an_approver",
        /// The name is registered already; a key is never replaced in place.
        AlreadyRegistered = "already_registered",
        /// A recorded approval has no signed decision behind it.
        NoDecision = "no_decision",
        /// The decision's signature does not verify against the approver's registered key.
        BadDecisionSignature = "bad_decision_signature",
        /// The signed decision is about another request, another decision or another
        /// approver (a decision replayed where it does not belong).
        DecisionMismatch = "decision_mismatch",
        /// The signed decision reviewed other arguments than the ones parked now.
        ChangedSinceReview = "changed_since_review",
        /// The statement to sign could not be written as JSON; nothing was signed.
        BadStatement = "bad_statement",
    }
}

/// A refusal: the code and what it concerns.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {detail}")]
pub struct IdentityError {
    /// The named code.
    pub code: IdentityCode,
    /// Details for a person (never a key).
    pub detail: String,
}

impl IdentityError {
    /// A refusal with `code`.
    pub fn new(code: IdentityCode, detail: impl Into<String>) -> Self {
        Self { code, detail: detail.into() }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N || !text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// The fingerprint of a public key given in hex: the first 16 hex digits of its SHA-256.
pub(crate) fn key_fingerprint(public_hex: &str) -> String {
    let digest = hex(&Sha256::digest(public_hex.as_bytes()));
    digest.get(..16).unwrap_or_default().to_string()
}

/// An approver's private key, read from their key file. Its bytes are never printed.
#[derive(Clone)]
pub struct ApproverKey {
    /// The approver the key belongs to.
    name: String,
    /// The Ed25519 secret.
    secret: Ed25519Secret,
}

impl fmt::Debug for ApproverKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApproverKey({}, {})", self.name, self.fingerprint())
    }
}

impl ApproverKey {
    /// A new key for `name` from 32 random bytes of the operating system.
    ///
    /// # Errors
    /// [`IdentityCode::BadKeyFile`] when no randomness can be had.
    pub fn generate(name: &str) -> Result<Self, IdentityError> {
        let mut seed = [0u8; 32];
        getrandom::getrandom(&mut seed)
            .map_err(|e| IdentityError::new(IdentityCode::BadKeyFile, format!("no randomness: {e}")))?;
        Ok(Self::from_seed(name, seed))
    }

    /// A key for `name` from a 32-byte seed (deterministic: for tests and examples).
    pub fn from_seed(name: &str, seed: [u8; 32]) -> Self {
        Self { name: name.to_string(), secret: Ed25519Secret::from_bytes(&seed) }
    }

    /// The approver's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The public key in hex, as registered.
    pub fn public_hex(&self) -> String {
        hex(self.secret.verifying_key().as_bytes())
    }

    /// The fingerprint of the public key.
    pub fn fingerprint(&self) -> String {
        key_fingerprint(&self.public_hex())
    }

    /// Writes the key to a new file `path` that only its owner can read or write (mode
    /// 0600, created with that mode; an existing file is never overwritten).
    ///
    /// # Errors
    /// [`IdentityCode::BadKeyFile`] when the file exists or cannot be written.
    pub fn write_new(&self, path: &Path) -> Result<(), IdentityError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let bad = |e: std::io::Error| IdentityError::new(IdentityCode::BadKeyFile, format!("{}: {e}", path.display()));
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(bad)?;
        let secret = hex(&self.secret.to_bytes());
        crate::security::register_secret(&secret);
        let text = format!("{APPROVER_KEY_FORMAT} {} {secret}\n", self.name);
        file.write_all(text.as_bytes()).and_then(|()| file.sync_all()).map_err(bad)
    }

    /// Reads a key file: a small regular file that no one but its owner may read or write
    /// (any group or other permission bit is refused), holding
    /// `rolegate-approver-key/1 NAME HEX`.
    ///
    /// # Errors
    /// [`IdentityCode::BadKeyFile`] with the reason.
    pub fn read(path: &Path) -> Result<Self, IdentityError> {
        use std::os::unix::fs::PermissionsExt;
        let bad = |why: String| IdentityError::new(IdentityCode::BadKeyFile, format!("{}: {why}", path.display()));
        let mode = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?.permissions().mode();
        if mode & 0o077 != 0 {
            return Err(bad(format!(
                "permissions {:o} are wider than 0600; only the approver may read the key",
                mode & 0o777
            )));
        }
        let bytes = read_small_file(path, 1024).map_err(bad)?;
        let text = std::str::from_utf8(&bytes).map_err(|_| bad("not UTF-8 text".into()))?;
        let mut words = text.split_whitespace();
        let (Some(APPROVER_KEY_FORMAT), Some(name), Some(secret), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return Err(bad(format!("not an approver key file ({APPROVER_KEY_FORMAT} NAME KEY)")));
        };
        let seed = unhex::<32>(secret).ok_or_else(|| bad("the key is not 64 hex digits".into()))?;
        // the key's text is a secret the process now holds: the redactor hides it anywhere
        crate::security::register_secret(secret);
        Ok(Self::from_seed(name, seed))
    }

    /// Signs `statement` with this key.
    ///
    /// # Errors
    /// [`IdentityError`] (`bad_statement`) when the statement cannot be written as JSON:
    /// nothing is signed then.
    pub fn sign(&self, statement: &DecisionStatement) -> Result<SignedDecision, IdentityError> {
        let text = serde_json::to_string(statement).map_err(|e| {
            IdentityError::new(IdentityCode::BadStatement, format!("the statement could not be encoded: {e}"))
        })?;
        let signature = hex(&self.secret.sign(text.as_bytes()).to_bytes());
        Ok(SignedDecision { statement: text, signature })
    }
}

/// A registered approver: the name and public key kept in the store's registry (each
/// row signed with the store key, so a key swapped in the file is refused).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approver {
    /// The approver (a user with the approver role).
    pub name: String,
    /// The Ed25519 public key, hex.
    pub public_key: String,
    /// Its fingerprint.
    pub fingerprint: String,
}

impl Approver {
    /// The registry entry of `key`.
    pub fn of(key: &ApproverKey) -> Self {
        Self { name: key.name.clone(), public_key: key.public_hex(), fingerprint: key.fingerprint() }
    }

    fn verifying_key(&self) -> Option<VerifyingKey> {
        VerifyingKey::from_bytes(&unhex::<32>(&self.public_key)?).ok()
    }
}

/// What an approver signs: one decision on one request, for the exact action reviewed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionStatement {
    /// [`DECISION_FORMAT`].
    pub format: String,
    /// The request decided.
    pub request_id: String,
    /// The run it belongs to.
    pub run_id: String,
    /// The parked action.
    pub pending_id: String,
    /// The fingerprint of the exact call reviewed (tool and arguments).
    pub action_fingerprint: String,
    /// `approve`, `deny` or `cancel`.
    pub decision: String,
    /// When, in the approver's clock seconds.
    pub at: f64,
    /// The approver.
    pub approver: String,
    /// The fingerprint of the approver's public key.
    pub key_fingerprint: String,
}

impl DecisionStatement {
    /// The statement of `key`'s owner deciding `decision` on `req` at `at`.
    pub fn new(req: &ApprovalRequest, decision: &str, at: f64, key: &ApproverKey) -> Self {
        Self {
            format: DECISION_FORMAT.into(),
            request_id: req.id.clone(),
            run_id: req.run_id.clone(),
            pending_id: req.pending_id.clone(),
            action_fingerprint: req.fingerprint.clone(),
            decision: decision.into(),
            at,
            approver: key.name.clone(),
            key_fingerprint: key.fingerprint(),
        }
    }
}

/// A statement as signed: the exact text and the Ed25519 signature over it, hex.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedDecision {
    /// The statement's JSON text, exactly as signed.
    pub statement: String,
    /// The signature, 128 hex digits.
    pub signature: String,
}

impl SignedDecision {
    /// Verifies the decision against the registered `approver` and checks that it is
    /// exactly `decision` on `req` as it stands (same request, run, action, fingerprint).
    ///
    /// # Errors
    /// [`IdentityCode::BadDecisionSignature`] when it does not verify (or the registered
    /// key is unusable), [`IdentityCode::DecisionMismatch`] when it is about something
    /// else, [`IdentityCode::ChangedSinceReview`] when the action's fingerprint changed.
    pub fn verify(
        &self,
        approver: &Approver,
        req: &ApprovalRequest,
        decision: &str,
    ) -> Result<DecisionStatement, IdentityError> {
        let bad = |why: &str| IdentityError::new(IdentityCode::BadDecisionSignature, format!("{}: {why}", req.id));
        let public = approver.verifying_key().ok_or_else(|| bad("the registered public key is unusable"))?;
        let signature =
            unhex::<64>(&self.signature).map(|b| Signature::from_bytes(&b)).ok_or_else(|| bad("no signature"))?;
        public
            .verify_strict(self.statement.as_bytes(), &signature)
            .map_err(|_| bad(&format!("not signed by {}'s registered key", approver.name)))?;
        let statement: DecisionStatement =
            serde_json::from_str(&self.statement).map_err(|e| bad(&format!("not a decision statement: {e}")))?;
        let same = statement.format == DECISION_FORMAT
            && statement.request_id == req.id
            && statement.run_id == req.run_id
            && statement.pending_id == req.pending_id
            && statement.decision == decision
            && statement.approver == approver.name
            && statement.key_fingerprint == approver.fingerprint;
        if !same {
            return Err(IdentityError::new(
                IdentityCode::DecisionMismatch,
                format!(
                    "the signed decision is {} {} by {}, not {decision} {}",
                    statement.decision, statement.request_id, statement.approver, req.id
                ),
            ));
        }
        if statement.action_fingerprint != req.fingerprint {
            return Err(IdentityError::new(
                IdentityCode::ChangedSinceReview,
                format!("{}: the signed decision reviewed other arguments", req.id),
            ));
        }
        Ok(statement)
    }
}
