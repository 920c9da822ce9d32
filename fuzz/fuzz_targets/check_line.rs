//! Fuzz target: lines for `rolegate check envelopes|proposals|memory` (the first byte picks
//! the kind; the last line is the one under test, up to eight lines before it are read
//! first). Asserts that the line's verdict is a known code of its kind, carries its line
//! number, is the same each time and does not depend on the lines read before it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rolegate::testkit::{check_checker_line, check_lines_input};
use rolegate_fuzz::hold;

fuzz_target!(|data: &[u8]| {
    if let Some((kind, before, line)) = check_lines_input(data) {
        let _ = hold(check_checker_line(kind, &before, line));
    }
});
