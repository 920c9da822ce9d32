//! The usage and answer lines `run` prints for every design, in one wording: model calls,
//! input and output tokens and credits per decider (the agent, the planner, each role),
//! then the final answer, redacted and marked as agent output.

use rolegate::cost::Summary;

/// `usage    WHO: calls N | input tokens N | output tokens N | credits X`.
pub(crate) fn usage_line(who: &str, s: &Summary) -> String {
    format!(
        "usage    {who}: calls {} | input tokens {} | output tokens {} | credits {}",
        s.calls, s.input_tokens, s.output_tokens, s.cost
    )
}

/// `answer (agent output, shown as data): …`, redacted; the first line of a multi-line
/// answer carries the label.
pub(crate) fn answer_line(answer: &str) -> String {
    format!("answer (agent output, shown as data): {}", rolegate::security::redact(answer))
}
