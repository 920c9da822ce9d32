//! The checkpoint rules for any stored text: [`Checkpoint::open`] verifies before it
//! parses, so whatever the text,
//! - the loader answers a checkpoint or one of its three codes, the same each time;
//! - a checkpoint that loads was signed by the key: its `signature` is exactly the key's
//!   HMAC of its `body`, another key refuses it (`bad_signature`), and its state passes
//!   the state rules again (sealing it anew loads the same checkpoint);
//! - each code means what it says: `not_a_checkpoint` only for text without the sealed
//!   shape, `bad_signature` only for a well-formed seal whose signature does not match,
//!   `invalid_state` only for a correct signature over a body that breaks the rules;
//! - any body the key really signed loads as a legal state or is `invalid_state`;
//! - any single-byte change of a signed checkpoint is refused.

use super::{Broken, ensure};
use crate::agent::AgentState;
use crate::human::{CHECKPOINT_FORMAT, Checkpoint, CheckpointCode, SigningKey};

/// The key the fuzz target, the property tests and the seeds sign with. Not a secret.
pub const FUZZ_KEY: &[u8] = b"fuzz-only checkpoint key, not a secret";
/// Another key: a checkpoint signed with [`FUZZ_KEY`] must never load with it.
pub const OTHER_KEY: &[u8] = b"another checkpoint key, not a secret";

/// The two keys, [`FUZZ_KEY`] and [`OTHER_KEY`].
///
/// # Errors
/// Only if the keys were too short (a bug).
pub fn keys() -> Result<(SigningKey, SigningKey), Broken> {
    let make = |k: &[u8]| SigningKey::new(k).map_err(|e| Broken { rule: "fuzz_keys", detail: e.to_string() });
    Ok((make(FUZZ_KEY)?, make(OTHER_KEY)?))
}

/// How a fuzz input is read: the stored text as it is, or a body a key holder signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointInput {
    /// The text is what the store holds (sealed form expected).
    Stored,
    /// The text is a body; it is sealed with the key first ([`check_signed_body`]).
    SignedBody,
}

/// Splits a fuzz input into its mode (the first byte: even stored, odd signed body) and
/// the text (invalid UTF-8 is skipped). The fuzz target and the replay of its seeds in
/// `cargo test` both read inputs so.
pub fn checkpoint_input(data: &[u8]) -> Option<(CheckpointInput, &str)> {
    let (first, rest) = data.split_first()?;
    let mode = if first % 2 == 0 { CheckpointInput::Stored } else { CheckpointInput::SignedBody };
    Some((mode, std::str::from_utf8(rest).ok()?))
}

/// Checks one fuzz input of either mode.
///
/// # Errors
/// As [`check_checkpoint_text`] and [`check_signed_body`].
pub fn check_checkpoint_input(
    key: &SigningKey,
    other: &SigningKey,
    mode: CheckpointInput,
    text: &str,
) -> Result<Result<Checkpoint, CheckpointCode>, Broken> {
    match mode {
        CheckpointInput::Stored => check_checkpoint_text(key, other, text),
        CheckpointInput::SignedBody => check_signed_body(key, other, text),
    }
}

/// The sealed form, read as strictly as the loader reads it.
#[derive(serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct Shape {
    format: String,
    body: String,
    signature: String,
}

/// The three fields of the sealed form, when `text` has that shape.
fn sealed_parts(text: &str) -> Option<(String, String, String)> {
    let s: Shape = serde_json::from_str(text).ok()?;
    Some((s.format, s.body, s.signature))
}

/// A sealed text with `body` signed by `key`, whatever the body holds, in the form
/// [`Checkpoint::seal`] writes.
pub fn seal_body(key: &SigningKey, body: &str) -> String {
    let shape = Shape { format: CHECKPOINT_FORMAT.into(), body: body.into(), signature: key.sign(body) };
    serde_json::to_string(&shape).unwrap_or_default()
}

/// Loads `text` as a checkpoint signed with `key` and checks what came of it.
///
/// # Errors
/// [`Broken`] when any rule of the module documentation fails.
pub fn check_checkpoint_text(
    key: &SigningKey,
    other: &SigningKey,
    text: &str,
) -> Result<Result<Checkpoint, CheckpointCode>, Broken> {
    let opened = Checkpoint::open(text, key);
    let code = match &opened {
        Ok(_) => None,
        Err(e) => {
            let code = e.code();
            ensure(code.is_some(), "checkpoint_refusal_is_named", || e.to_string())?;
            code
        }
    };
    let again = Checkpoint::open(text, key).map_err(|e| e.code());
    ensure(
        again.as_ref().map_err(|c| *c) == opened.as_ref().map_err(|_| code),
        "checkpoint_load_is_deterministic",
        || format!("{code:?} then {:?}", again.as_ref().err()),
    )?;
    let parts = sealed_parts(text);
    let signed = parts.as_ref().is_some_and(|(_, body, sig)| key.sign(body) == *sig);
    match (opened, code) {
        (Ok(cp), _) => {
            ensure(signed, "a_loaded_checkpoint_was_signed_by_the_key", || "the signature is not the key's".into())?;
            let format = parts.as_ref().map(|p| p.0.as_str());
            ensure(format == Some(CHECKPOINT_FORMAT), "a_loaded_checkpoint_has_the_format", || format!("{format:?}"))?;
            let foreign = Checkpoint::open(text, other).map_err(|e| e.code());
            ensure(
                foreign.as_ref().err() == Some(&Some(CheckpointCode::BadSignature)),
                "another_key_refuses_it",
                || format!("{:?}", foreign.as_ref().err()),
            )?;
            let state = serde_json::to_string(&cp.state).unwrap_or_default();
            let reloaded = serde_json::from_str::<AgentState>(&state);
            ensure(reloaded.as_ref().ok() == Some(&cp.state), "a_loaded_state_passes_the_state_rules", || {
                format!("{:?}", reloaded.err())
            })?;
            let resealed = Checkpoint::open(
                &cp.seal(key).map_err(|e| Broken { rule: "checkpoint_reseal", detail: e.to_string() })?,
                key,
            );
            ensure(resealed.as_ref().ok() == Some(&cp), "checkpoint_round_trip", || format!("{:?}", resealed.err()))?;
            Ok(Ok(cp))
        }
        (Err(_), Some(code)) => {
            let means = match code {
                CheckpointCode::NotACheckpoint => parts.as_ref().is_none_or(|p| p.0 != CHECKPOINT_FORMAT),
                CheckpointCode::BadSignature => parts.as_ref().is_some_and(|p| p.0 == CHECKPOINT_FORMAT) && !signed,
                CheckpointCode::InvalidState => signed && parts.as_ref().is_some_and(|p| p.0 == CHECKPOINT_FORMAT),
            };
            ensure(means, "checkpoint_code_means_what_it_says", || format!("{code} (signed: {signed})"))?;
            Ok(Err(code))
        }
        (Err(_), None) => Err(Broken { rule: "checkpoint_refusal_is_named", detail: "no code".into() }),
    }
}

/// Seals `body` with `key` as a writer holding the key would, then loads it.
///
/// # Errors
/// [`Broken`] when a body the key signed is refused for anything but its state, or when
/// [`check_checkpoint_text`] finds a broken rule.
pub fn check_signed_body(
    key: &SigningKey,
    other: &SigningKey,
    body: &str,
) -> Result<Result<Checkpoint, CheckpointCode>, Broken> {
    let got = check_checkpoint_text(key, other, &seal_body(key, body))?;
    ensure(
        matches!(got, Ok(_) | Err(CheckpointCode::InvalidState)),
        "a_signed_body_loads_or_is_invalid_state",
        || format!("{got:?}"),
    )?;
    Ok(got)
}

/// Changes byte `index` (modulo the length) of the signed checkpoint `sealed` to `byte`
/// and loads the result. Returns `None` when the change changes nothing, else the code
/// the changed text was refused with (`None` inside: it is not UTF-8, so the store could
/// not even read it as text).
///
/// # Errors
/// [`Broken`] when the changed text loads.
pub fn check_byte_change(
    key: &SigningKey,
    sealed: &str,
    index: usize,
    byte: u8,
) -> Result<Option<Option<CheckpointCode>>, Broken> {
    let mut bytes = sealed.as_bytes().to_vec();
    let Some(at) = index.checked_rem(bytes.len()) else { return Ok(None) };
    if bytes[at] == byte {
        return Ok(None);
    }
    bytes[at] = byte;
    let Ok(text) = String::from_utf8(bytes) else { return Ok(Some(None)) };
    match Checkpoint::open(&text, key) {
        Ok(_) => Err(Broken {
            rule: "a_changed_checkpoint_is_refused",
            detail: format!("byte {at} set to {byte:#04x} still loads"),
        }),
        Err(e) => Ok(Some(e.code())),
    }
}
