//! Fuzz target: a tool name and its arguments (raw JSON or fields from known names and
//! values). Asserts that validated arguments are exactly the arguments given, that the
//! gate agrees with the validation (and runs the calculator on what passes), that a write
//! is parked with the arguments given and that nothing is sent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rolegate::testkit::check_tool_arguments;
use rolegate_fuzz::{FIXTURE, FuzzCall, hold};

fuzz_target!(|call: FuzzCall| {
    let _ = hold(check_tool_arguments(&FIXTURE, &call.tool(), &call.args.value()));
});
