//! Fuzz target: a sequence of PolicyPal model replies (text, native tool calls, claimed
//! usage), optionally confirming a card. Asserts that every run ends with a named reason,
//! that nothing is sent before a confirmation and that a confirmed card sends exactly its
//! own arguments, once.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rolegate::testkit::check_pal_replies;
use rolegate_fuzz::{FIXTURE, FuzzPal, FuzzReply, RUNTIME, hold};

fuzz_target!(|input: FuzzPal| {
    let replies = input.replies.iter().take(10).map(FuzzReply::response).collect();
    hold(RUNTIME.block_on(check_pal_replies(&FIXTURE, replies, input.confirm)));
});
