//! Fuzz target: the checkpoint loader, on a stored text or (odd first byte) on a body the
//! key holder signed. Asserts that a checkpoint that loads was signed by the key (another
//! key refuses it), that its state passes the state rules and round-trips, and that each
//! refusal code means what it says.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rolegate::testkit::{check_checkpoint_input, checkpoint_input};
use rolegate_fuzz::{SIGNING_KEYS, hold};

fuzz_target!(|data: &[u8]| {
    if let Some((mode, text)) = checkpoint_input(data) {
        let _ = hold(check_checkpoint_input(&SIGNING_KEYS.0, &SIGNING_KEYS.1, mode, text));
    }
});
