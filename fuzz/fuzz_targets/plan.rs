//! Fuzz target: a planner's plan text, parsed and checked with `check_plan` for a task
//! (the first byte picks it). Asserts that a plan round-trips and that a clean plan only
//! names allowed, read-only tools with valid arguments, which the gate then runs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rolegate::testkit::check_plan_text;
use rolegate_fuzz::{FIXTURE, hold, task_and_text};

fuzz_target!(|data: &[u8]| {
    if let Some((task, text)) = task_and_text(data) {
        hold(check_plan_text(&FIXTURE, task, text));
    }
});
