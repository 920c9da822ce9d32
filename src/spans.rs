//! The spans of a run, named and attributed after the OpenTelemetry GenAI conventions, so
//! a `tracing` subscriber that exports spans (the binary's `--otlp`) shows a run as a tree:
//!
//! ```text
//! run {design}                                    root, one per run
//! └─ invoke_agent {role}                          one per role turn (or the single agent)
//!    ├─ chat {model}                              one per model call: tokens, finish reasons
//!    ├─ execute_tool {tool}                       one per call the gate decided
//!    │  └─ apply_guardrail {guardian} tool_call   the gate refused it or parked it
//!    └─ apply_guardrail {guardian} tool_call      the role's own check refused it
//! └─ apply_guardrail {guardian} message           the coordinator refused a message
//! ```
//!
//! The library depends only on `tracing` for this. Every span has the target
//! [`SPAN_TARGET`]; with no subscriber interested in it a span is a no-op, and no attribute
//! is formatted or allocated (the helpers take borrowed text and numbers, and anything that
//! costs more is computed only for an enabled span). Attribute values are the crate's own
//! names and codes; an exporter must still redact every string it sends (the binary does).

use std::fmt;
use tracing::Span;
use tracing::field::Empty;

/// The `tracing` target of every span the crate opens.
pub const SPAN_TARGET: &str = "rolegate::span";

/// `gen_ai.security.decision.type` of every guardrail span: the check refused.
pub const DECISION_DENY: &str = "deny";

/// The words of a span's display name (`otel.name`), joined by spaces when the span is
/// recorded, never before.
struct Named<'a>(&'a [&'a str]);

impl fmt::Display for Named<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, word) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            f.write_str(word)?;
        }
        Ok(())
    }
}

/// The root span of one run of `design` (no parent, whatever span is current).
pub(crate) fn run(run_id: &str, design: &str) -> Span {
    tracing::info_span!(
        target: SPAN_TARGET,
        parent: None,
        "run",
        otel.name = %Named(&["run", design]),
        rolegate.run.id = run_id,
        rolegate.design = design,
        gen_ai.conversation.id = run_id,
        rolegate.run.reason = Empty,
    )
}

/// Records why the run ended on its root span.
pub(crate) fn run_ended(span: &Span, reason: &str) {
    span.record("rolegate.run.reason", reason);
}

/// One turn of `role` (`invoke_agent`), a child of `parent` (the run's span, handed to the
/// role's task with its assignment: an actor's own task has no current span of the run).
pub(crate) fn agent(parent: &Span, role: &str, round: u32) -> Span {
    tracing::info_span!(
        target: SPAN_TARGET,
        parent: parent,
        "invoke_agent",
        otel.name = %Named(&["invoke_agent", role]),
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = role,
        rolegate.round = round,
    )
}

/// One model call (`chat`) under the current span.
pub(crate) fn chat(model: &str) -> Span {
    tracing::info_span!(
        target: SPAN_TARGET,
        "chat",
        otel.name = %Named(&["chat", model]),
        gen_ai.operation.name = "chat",
        gen_ai.request.model = model,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.response.finish_reasons = Empty,
        error.r#type = Empty,
        otel.status_code = Empty,
    )
}

/// Records an answered model call: `tokens` (input, output) is asked only for an enabled
/// span; the finish reason is `tool_calls` when the reply called tools, `stop` otherwise.
pub(crate) fn chat_answered(span: &Span, tokens: impl FnOnce() -> (u64, u64), called_tools: bool) {
    if span.is_disabled() {
        return;
    }
    let (input, output) = tokens();
    span.record("gen_ai.usage.input_tokens", input);
    span.record("gen_ai.usage.output_tokens", output);
    span.record("gen_ai.response.finish_reasons", if called_tools { "tool_calls" } else { "stop" });
}

/// Records a model call that failed with `code` (`timeout`, `truncated`, …).
pub(crate) fn failed(span: &Span, code: &str) {
    span.record("error.type", code);
    span.record("otel.status_code", "ERROR");
}

/// One tool call the gate decides (`execute_tool`) under the current span.
pub(crate) fn tool(name: &str, call_id: &str) -> Span {
    tracing::info_span!(
        target: SPAN_TARGET,
        "execute_tool",
        otel.name = %Named(&["execute_tool", name]),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.call.id = call_id,
        rolegate.code = Empty,
        error.r#type = Empty,
        otel.status_code = Empty,
    )
}

/// Records the gate's outcome code on a tool span.
pub(crate) fn tool_outcome(span: &Span, code: &str, ok: bool) {
    span.record("rolegate.code", code);
    if !ok {
        failed(span, code);
    }
}

/// What a guardrail judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// A tool call (the tool's name).
    ToolCall,
    /// A message between roles (the sender's role).
    Message,
    /// A model's reply read as a proposal.
    LlmOutput,
}

impl Target {
    fn as_str(self) -> &'static str {
        match self {
            Self::ToolCall => "tool_call",
            Self::Message => "message",
            Self::LlmOutput => "llm_output",
        }
    }
}

/// A check that refused something (`apply_guardrail`), under the current span: `guardian`
/// names the check (`gate`, `approval`, `scope_check`, `loop_check`, `intake`,
/// `instruction_filter`, `claim_support`), `code` the rejection code, `subject` the tool
/// (for a tool call) or the sending role (for a message). The span opens and closes here.
pub(crate) fn refused(guardian: &str, target: Target, code: &str, subject: &str) {
    let (tool, sender) = match target {
        Target::ToolCall => (Some(subject), None),
        Target::Message | Target::LlmOutput => (None, Some(subject)),
    };
    let target = target.as_str();
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        "apply_guardrail",
        otel.name = %Named(&["apply_guardrail", guardian, target]),
        gen_ai.operation.name = "apply_guardrail",
        gen_ai.guardian.name = guardian,
        gen_ai.security.target.type = target,
        gen_ai.security.decision.type = DECISION_DENY,
        gen_ai.security.decision.reason = code,
        rolegate.code = code,
        gen_ai.tool.name = tool,
        rolegate.sender = sender,
    );
    drop(span);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_join_without_allocating_and_a_span_without_a_subscriber_is_disabled() {
        assert_eq!(Named(&["chat", "fake:planner"]).to_string(), "chat fake:planner");
        assert_eq!(Named(&["apply_guardrail", "gate", "tool_call"]).to_string(), "apply_guardrail gate tool_call");
        // no subscriber in this test: every helper is a no-op and asks for nothing
        let span = chat("m");
        assert!(span.is_disabled());
        chat_answered(&span, || unreachable!("tokens are asked only for an enabled span"), false);
        refused("gate", Target::ToolCall, "not_allowed", "send_email_draft");
    }
}
