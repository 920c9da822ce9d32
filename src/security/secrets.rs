//! The process-wide secret registry: every secret the process was given (the API key of
//! an HTTP model, a signing key) is registered when it is read, and [`super::redact`]
//! replaces its exact value wherever it appears, whatever its shape. Key *shapes*
//! (`sk-…`, `Bearer …`) catch secrets the process was not given; the registry catches the
//! ones it was, even when they look like nothing in particular.
//!
//! The registry only grows (a secret once seen stays hidden for the life of the process)
//! and holds few entries, so a lookup is a scan of a short list under a read lock.

use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// Shortest secret registered: a shorter value would blank ordinary words all over the
/// output, and is no secret worth the name.
pub const MIN_SECRET_CHARS: usize = 6;

/// Most secrets kept; registering more is refused (the registry is for the handful a
/// process is configured with, not for data).
pub const MAX_SECRETS: usize = 64;

/// What a registered secret is replaced with.
pub const SECRET_PLACEHOLDER: &str = "[secret]";

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// True once a secret is registered (set under the write lock, after the push): while it
/// is false the registry is empty and a look-up takes no lock.
static ANY: AtomicBool = AtomicBool::new(false);

/// Registers `secret` (trimmed) so that redaction hides its exact value from now on.
/// Returns false when it was not registered: shorter than [`MIN_SECRET_CHARS`]
/// characters, or the registry is full. Registering a secret twice keeps one entry.
pub fn register_secret(secret: &str) -> bool {
    let secret = secret.trim();
    if secret.chars().count() < MIN_SECRET_CHARS {
        return false;
    }
    let mut all = SECRETS.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    if all.iter().any(|s| s == secret) {
        return true;
    }
    if all.len() >= MAX_SECRETS {
        return false;
    }
    all.push(secret.to_string());
    // the longest first, so that a secret containing another is hidden whole
    all.sort_by_key(|s| std::cmp::Reverse(s.len()));
    ANY.store(true, Ordering::Release);
    true
}

/// Registers the text of a secret given as bytes (a signing key): its UTF-8 form, when it
/// has one (bytes that are not text cannot appear in text output).
pub fn register_secret_bytes(secret: &[u8]) -> bool {
    std::str::from_utf8(secret).is_ok_and(register_secret)
}

/// True when `text` holds a registered secret.
pub fn holds_registered(text: &str) -> bool {
    if !ANY.load(Ordering::Acquire) {
        return false;
    }
    let all = SECRETS.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    all.iter().any(|s| text.contains(s.as_str()))
}

/// `text` with every registered secret replaced by [`SECRET_PLACEHOLDER`] and nothing
/// else changed (borrowed when it holds none): the last filter before anything is
/// printed, for output that must otherwise stay as it is (an outbox listing its
/// addresses).
pub fn hide_secrets(text: &str) -> std::borrow::Cow<'_, str> {
    match hide_registered(text) {
        Some(s) => std::borrow::Cow::Owned(s),
        None => std::borrow::Cow::Borrowed(text),
    }
}

/// `text` with every registered secret replaced by [`SECRET_PLACEHOLDER`]; `None` when it
/// holds none.
pub(super) fn hide_registered(text: &str) -> Option<String> {
    if !ANY.load(Ordering::Acquire) {
        return None;
    }
    let all = SECRETS.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    if !all.iter().any(|s| text.contains(s.as_str())) {
        return None;
    }
    let mut out = text.to_string();
    for s in all.iter() {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), SECRET_PLACEHOLDER);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_value_is_hidden_whatever_its_shape() {
        assert!(register_secret("  plain-words-unit-7Q  "));
        assert!(!register_secret("short"));
        assert_eq!(hide_registered("x plain-words-unit-7Q y").as_deref(), Some("x [secret] y"));
        assert!(holds_registered("aplain-words-unit-7Qb"));
        assert_eq!(hide_registered("nothing"), None);
        assert!(register_secret_bytes(b"bytes-key-unit-9Z"));
        assert!(!register_secret_bytes(&[0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9]));
        assert_eq!(hide_registered("bytes-key-unit-9Z").as_deref(), Some("[secret]"));
    }
}
