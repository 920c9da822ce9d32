//! Reading what a fact is built from (`id`, `status`, `title`) out of a tool result's JSON
//! text, by serde, borrowing the strings that need no unescaping.

use serde::Deserialize;
use std::borrow::Cow;

/// The fields of a tool result that facts are built from; everything else is ignored.
#[derive(Debug, PartialEq, Eq, Deserialize)]
pub(super) struct Seen<'a> {
    #[serde(borrow)]
    pub(super) id: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(super) status: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) title: Option<Cow<'a, str>>,
}

/// `text` read as [`Seen`], or `None` where `serde_json::from_str` fails.
pub(super) fn read(text: &str) -> Option<Seen<'_>> {
    serde_json::from_str(text).ok()
}
