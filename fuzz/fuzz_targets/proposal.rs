//! Fuzz target: a model's proposal text, parsed strictly and checked by the loop's own
//! check in the standard context of a task (the first byte picks the task). Asserts that
//! an accepted proposal round-trips, that check, state and gate agree, that nothing is
//! sent and that no tool outside the allowlist runs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rolegate::testkit::check_proposal;
use rolegate_fuzz::{FIXTURE, hold, task_and_text};

fuzz_target!(|data: &[u8]| {
    if let Some((task, text)) = task_and_text(data) {
        hold(check_proposal(&FIXTURE, task, text));
    }
});
