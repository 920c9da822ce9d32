//! Fuzz target: a saved memory file (`SessionMemory::from_json`). Asserts that every
//! loaded note passes the write rules and that saving and loading again changes nothing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rolegate::testkit::check_memory_json;
use rolegate_fuzz::hold;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        hold(check_memory_json(text));
    }
});
