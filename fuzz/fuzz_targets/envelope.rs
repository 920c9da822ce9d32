//! Fuzz target: a raw message on a channel (the first byte picks the channel and the claim
//! mode), checked by the coordinator's parse, route and claim checks and its intake, in
//! the standard context of what the researcher read. Asserts that the verdict is a named
//! code, that the intake agrees and stamps the channel as sender, and that an accepted
//! envelope re-serialises to a body accepted again, on the same channel only, with the
//! same code.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rolegate::testkit::{check_envelope, envelope_input};
use rolegate_fuzz::{ENVELOPES, hold};

fuzz_target!(|data: &[u8]| {
    if let Some((channel, claims, text)) = envelope_input(data) {
        let _ = hold(check_envelope(&ENVELOPES, channel, text, claims));
    }
});
