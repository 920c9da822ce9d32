//! The trace: one redacted line per decision (step, kind, code, clipped detail). The same
//! inputs give the same lines, byte for byte. Every line is also a `tracing` event.

use crate::codes::codes;
use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;

use crate::security::{clip, redact};

/// Most characters of a line's detail.
pub(super) const DETAIL_CHARS: usize = 60;

/// Most characters of a tool line's arguments.
pub(crate) const ARGS_CHARS: usize = 240;

codes! {
    /// What a trace line is about.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    #[non_exhaustive]
    pub enum TraceKind {
        /// A model call and the parse of its proposal.
        Model = "model",
        /// The loop's check of a proposal.
        Check = "check",
        /// A gate decision.
        Tool = "tool",
        /// A memory write.
        Memory = "memory",
        /// A human decision.
        Human = "human",
        /// The end of a run.
        Stop = "stop",
        /// A message between roles (accepted or rejected by the coordinator).
        Message = "message",
        /// A plan check.
        Plan = "plan",
    }
}

/// One decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceLine {
    pub step: u32,
    pub kind: TraceKind,
    /// The code (`ok` or a named rejection).
    pub code: Cow<'static, str>,
    /// Redacted, clipped detail (up to 24 bytes kept inline, without an allocation).
    pub detail: CompactString,
    /// For a tool line: the call's arguments as JSON, redacted and clipped to
    /// [`ARGS_CHARS`] (what a report shows; the printed line leaves them out). Up to 24
    /// bytes are kept inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<CompactString>,
}

impl fmt::Display for TraceLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = format!("{:>2} {:<6} {:<18} {}", self.step, self.kind, self.code, self.detail);
        f.write_str(line.trim_end())
    }
}

/// The decisions of one run, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trace {
    /// The run the lines belong to (up to 24 bytes kept inline, as the role).
    pub run_id: CompactString,
    /// The role that made them, for multi-agent runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<CompactString>,
    pub lines: Vec<TraceLine>,
}

thread_local! {
    /// The compact JSON of the arguments of the tool line being added on this thread.
    static ARGS_JSON: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Largest buffer [`ARGS_JSON`] keeps between lines (a larger one, for a rare large
/// argument, is dropped after use).
const ARGS_BUFFER_KEPT: usize = 4096;

/// The redacted, clipped compact JSON of a tool call's arguments, through a fresh string.
fn args_line(args: &serde_json::Value) -> CompactString {
    let text = serde_json::to_string(args).unwrap_or_else(|_| args.to_string());
    CompactString::from(clip(&redact(&text), ARGS_CHARS))
}

impl Trace {
    /// An empty trace for `run_id`.
    pub fn new(run_id: &str) -> Self {
        Self { run_id: run_id.into(), role: None, lines: Vec::new() }
    }

    /// Adds a line; `detail` is redacted, then clipped. The `tracing` event carries the
    /// whole redacted detail (the `--trace-json` export keeps it); only the stored line is
    /// clipped, so a run's trace takes no more memory than before.
    pub fn add(&mut self, step: u32, kind: TraceKind, code: impl Into<Cow<'static, str>>, detail: &str) {
        self.push(step, kind, code.into(), detail, None);
    }

    /// Adds a tool line: `name` as the detail, and the call's arguments (redacted, then
    /// clipped to [`ARGS_CHARS`]) kept beside it for a report.
    pub fn add_tool(&mut self, step: u32, code: impl Into<Cow<'static, str>>, name: &str, args: &serde_json::Value) {
        let args = ARGS_JSON.with(|buf| match buf.try_borrow_mut() {
            Ok(mut buf) => {
                // the compact JSON is written into this thread's buffer (no allocation per
                // line): only the redacted, clipped arguments are kept
                buf.clear();
                let kept =
                    match serde_json::to_writer(&mut *buf, args).ok().and_then(|()| std::str::from_utf8(&buf).ok()) {
                        Some(text) => CompactString::from(clip(&redact(text), ARGS_CHARS)),
                        None => args_line(args),
                    };
                if buf.capacity() > ARGS_BUFFER_KEPT {
                    *buf = Vec::new();
                }
                kept
            }
            Err(_) => args_line(args),
        });
        self.push(step, TraceKind::Tool, code.into(), name, Some(args));
    }

    fn push(&mut self, step: u32, kind: TraceKind, code: Cow<'static, str>, detail: &str, args: Option<CompactString>) {
        let red = redact(detail);
        tracing::info!(
            target: "rolegate::trace",
            run = %self.run_id,
            role = self.role.as_deref().unwrap_or(""),
            step,
            kind = kind.as_str(),
            code = %code,
            detail = %red,
            args = args.as_deref().unwrap_or(""),
            "decision"
        );
        let detail = CompactString::from(clip(&red, DETAIL_CHARS));
        self.lines.push(TraceLine { step, kind, code, detail, args });
    }

    /// The printable lines.
    pub fn lines(&self) -> Vec<String> {
        self.lines.iter().map(ToString::to_string).collect()
    }

    /// The codes of one kind, in order.
    pub fn codes(&self, kind: TraceKind) -> Vec<&str> {
        self.lines.iter().filter(|l| l.kind == kind).map(|l| l.code.as_ref()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_redacted_clipped_and_aligned() {
        let mut t = Trace::new("r1");
        t.add(
            1,
            TraceKind::Model,
            "ok",
            r#"{"action": "call", "tool": "send_email_draft", "arguments": {"to": "kwame@gmail.com"}}"#,
        );
        t.add(1, TraceKind::Memory, "ok", "");
        t.add(3, TraceKind::Stop, "done", "status=done");
        let lines = t.lines();
        assert_eq!(lines[1], " 1 memory ok");
        assert_eq!(lines[2], " 3 stop   done               status=done");
        assert!(!lines[0].contains("gmail"));
        assert_eq!(t.lines[0].detail.chars().count(), DETAIL_CHARS);
        assert_eq!(t.codes(TraceKind::Model), ["ok"]);
    }

    #[test]
    fn a_tool_line_keeps_the_compact_redacted_arguments() {
        let mut t = Trace::new("r1");
        let args = serde_json::json!({"to": "kwame@gmail.com", "subject": "Ré: \"T-601\"", "n": 2});
        t.add_tool(2, "ok", "send_email_draft", &args);
        let expected = clip(&redact(&args.to_string()), ARGS_CHARS).to_string();
        assert_eq!(t.lines[0].args.as_deref(), Some(expected.as_str()));
        assert!(!expected.contains("gmail"), "{expected}");
        assert_eq!(t.lines[0].detail, "send_email_draft");
    }

    #[test]
    fn tool_arguments_through_the_thread_buffer_are_the_fresh_string_ones() {
        let long = "x".repeat(2 * ARGS_BUFFER_KEPT);
        let cases = [
            serde_json::json!({"ticket_id": "T-601"}),
            serde_json::json!({"to": "kwame@gmail.com", "body": "é \"q\" \n\u{1F600}", "n": [1, 2.5, null, true]}),
            serde_json::json!({"k": long}),
            serde_json::json!({}),
            serde_json::json!({"api_key": "sk-test-4f9a2c71e0b84d5f9a3c", "nested": {"phone": "+44 20 7946 0958"}}),
            serde_json::json!({"after_large": "short again"}),
        ];
        let mut t = Trace::new("r1");
        for (i, args) in cases.iter().enumerate() {
            t.add_tool(1, "ok", "get_ticket", args);
            assert_eq!(t.lines[i].args.as_deref(), Some(args_line(args).as_str()), "{args}");
        }
        assert_eq!(t.lines[0].args.as_deref(), Some(r#"{"ticket_id":"T-601"}"#));
        assert!(ARGS_JSON.with(|b| b.borrow().capacity() <= ARGS_BUFFER_KEPT));
    }

    /// The form of a trace line before details became [`CompactString`]s.
    #[derive(Serialize)]
    struct StringLine<'a> {
        step: u32,
        kind: TraceKind,
        code: &'a str,
        detail: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        args: Option<String>,
    }

    #[test]
    fn inline_details_serialise_and_read_back_as_the_string_ones() {
        let corpus = [
            "",
            "remember",
            "call get_ticket",
            "exactly twenty-four byte",
            "exactly twenty-five bytes",
            "é \"quoted\" \\ back\nslash \u{1F600}",
            "\u{0}\u{1f} control and tab\t",
            "ünïcödé ünïcödé ünïcödé ünïcödé ünïcödé ünïcödé ünïcödé ünïcödé",
            "kwame@gmail.com wrote {\"to\": \"x\"}",
        ];
        let mut t = Trace::new("r1");
        for (i, text) in corpus.iter().enumerate() {
            t.add(1, TraceKind::Check, "ok", text);
            t.add_tool(2, "ok", text, &serde_json::json!({ "k": text }));
            for line in &t.lines[2 * i..] {
                let old = StringLine {
                    step: line.step,
                    kind: line.kind,
                    code: &line.code,
                    detail: clip(&redact(text), DETAIL_CHARS).to_string(),
                    args: line.args.as_deref().map(str::to_string),
                };
                let json = serde_json::to_string(line).unwrap();
                assert_eq!(json, serde_json::to_string(&old).unwrap(), "{text:?}");
                let back: TraceLine = serde_json::from_str(&json).unwrap();
                assert_eq!(&back, line);
            }
            let expected = args_line(&serde_json::json!({ "k": text }));
            assert_eq!(t.lines[2 * i + 1].args.as_deref(), Some(expected.as_str()));
        }
        let unknown = r#"{"step":1,"kind":"check","code":"ok","detail":"x","extra":1}"#;
        assert!(serde_json::from_str::<TraceLine>(unknown).is_err(), "unknown fields are still rejected");
    }
}
