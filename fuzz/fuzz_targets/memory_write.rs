//! Fuzz target: a sequence of memory writes (keys, sources and text built from known
//! fragments or anything). Asserts that a stored note passes the content rules, that a
//! refused write changes nothing, that the limit holds and that a save and load gives
//! back exactly the live notes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rolegate::testkit::check_memory_writes;
use rolegate_fuzz::{FuzzWrite, hold};

fuzz_target!(|writes: Vec<FuzzWrite>| {
    let writes: Vec<_> = writes.iter().take(16).map(FuzzWrite::write).collect();
    hold(check_memory_writes(&writes));
});
