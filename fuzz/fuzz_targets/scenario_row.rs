//! Fuzz target: one line of a scenario table. Asserts that a refusal names file, line and
//! field, that a parsed row round-trips, and that a short row runs to a named reason.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rolegate::testkit::check_scenario_row;
use rolegate_fuzz::{FIXTURE, RUNTIME, hold};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        hold(RUNTIME.block_on(check_scenario_row(&FIXTURE, text)));
    }
});
