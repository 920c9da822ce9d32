//! Fuzz target: the normaliser every text check reads through (`security::fold`). Asserts
//! that folding is idempotent, leaves no hidden character, keeps ASCII text as it is, and
//! that the instruction, secret and personal-data checks judge a text and its fold alike.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rolegate::testkit::check_fold;
use rolegate_fuzz::hold;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = hold(check_fold(text));
    }
});
