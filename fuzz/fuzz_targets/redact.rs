//! Fuzz target: the redactor (`security::redact`) with a registered secret. Asserts that
//! the registered value never shows, that a text with nothing to hide comes back as it
//! was, and that the output holds nothing the secret and personal-data checks still find.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rolegate::testkit::check_redact;
use rolegate_fuzz::hold;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = hold(check_redact(text));
    }
});
