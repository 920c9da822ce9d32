//! [`Observation`]: what a run saw, one per tool call or refused proposal. It sits with
//! the gate because a gate outcome is where it comes from; memory and the loop read it.

use compact_str::CompactString;
use serde::{Deserialize, Serialize};

/// What came back from a tool or a check. Its text is untrusted data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    /// `o1`, `o2`, … in order.
    pub(crate) id: CompactString,
    /// The step it was made in.
    pub step: u32,
    /// The tool (or `rejected` for a refused proposal).
    pub(crate) tool: CompactString,
    /// True when the tool succeeded.
    pub ok: bool,
    /// Result text, clipped.
    pub text: String,
}

impl Observation {
    /// An observation: `id` (`o1`, …) made at `step` by `tool`, with its result text.
    pub fn new(id: &str, step: u32, tool: &str, ok: bool, text: String) -> Self {
        Self { id: id.into(), step, tool: tool.into(), ok, text }
    }

    /// `o1`, `o2`, … in order.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The tool (or `rejected` for a refused proposal).
    pub fn tool(&self) -> &str {
        &self.tool
    }
}
