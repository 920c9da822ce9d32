//! Strict parsing of a model's proposal: `{action: call|finish, tool, arguments, answer,
//! sources}`. Anything else is refused with a named code, never guessed at.

use crate::codes::codes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::state::MAX_ANSWER_CHARS;

/// Largest proposal text accepted, in bytes.
pub(crate) const MAX_PROPOSAL_BYTES: usize = 16 * 1024;

/// What a model may propose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Proposal {
    /// Run a tool.
    Call {
        /// The tool name (may not exist).
        tool: String,
        /// The arguments object.
        arguments: Value,
    },
    /// Finish with an answer and the observations it rests on.
    Finish {
        /// The answer.
        answer: String,
        /// Cited observation ids.
        sources: Vec<String>,
    },
}

impl Proposal {
    /// `call` or `finish`.
    pub fn action(&self) -> &'static str {
        match self {
            Proposal::Call { .. } => "call",
            Proposal::Finish { .. } => "finish",
        }
    }

    /// The tool, for a call.
    pub fn tool(&self) -> &str {
        match self {
            Proposal::Call { tool, .. } => tool,
            Proposal::Finish { .. } => "",
        }
    }
}

codes! {
    /// Why a proposal text was refused.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum ProposalError {
        /// Not a JSON object (prose, truncated JSON, an array, …).
        NotJson = "not_json",
        /// JSON, but not a proposal: unknown action or field, wrong types, too large (the
        /// text, or a finish answer longer than a state may hold).
        InvalidProposal = "invalid_proposal",
    }
}

/// The `action` member, read without copying it: `call`, `finish`, or any other string
/// (refused after the read, as before; a member that is not a string fails the read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Call,
    Finish,
    Other,
}

impl<'de> Deserialize<'de> for Action {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(ActionVisitor)
    }
}

struct ActionVisitor;

impl serde::de::Visitor<'_> for ActionVisitor {
    type Value = Action;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Action, E> {
        Ok(match v {
            "call" => Action::Call,
            "finish" => Action::Finish,
            _ => Action::Other,
        })
    }
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    action: Action,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default)]
    answer: Option<String>,
    #[serde(default)]
    sources: Option<Vec<String>>,
}

/// A proposal as a model writes it (borrowed): the one writer of the wire form
/// [`parse_proposal`] reads, `{"action": "call", "tool": …, "arguments": {…}}` or
/// `{"action": "finish", "answer": …, "sources": […]}`.
#[derive(Debug, Serialize)]
#[serde(tag = "action", rename_all = "lowercase")]
pub(crate) enum ProposalText<'a, A: Serialize = Value> {
    /// Run `tool` with `arguments` (anything written as a JSON object).
    Call { tool: &'a str, arguments: &'a A },
    /// Finish with `answer`, citing `sources`.
    Finish { answer: &'a str, sources: Vec<&'a str> },
}

impl<A: Serialize> ProposalText<'_, A> {
    /// The compact JSON text.
    pub(crate) fn to_text(&self) -> String {
        // strings and JSON values always serialise
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Parses a proposal strictly.
///
/// # Errors
/// [`ProposalError::NotJson`] when the text is not a JSON object;
/// [`ProposalError::InvalidProposal`] when it is one but not a valid proposal.
pub fn parse_proposal(text: &str) -> Result<Proposal, ProposalError> {
    if text.len() > MAX_PROPOSAL_BYTES {
        return Err(ProposalError::InvalidProposal);
    }
    checked(read(text)?)
}

/// `text` read into [`Raw`], or the code of why it cannot be.
fn read(text: &str) -> Result<Raw, ProposalError> {
    // Straight into the proposal's shape, for a text that is an object (serde would also
    // read a struct from an array); when that fails, reading it as a value tells prose or
    // broken JSON (`not_json`) from an object that is no proposal.
    let object = text.trim_start_matches([' ', '\n', '\t', '\r']).starts_with('{');
    if object && let Ok(raw) = serde_json::from_str::<Raw>(text) {
        return Ok(raw);
    }
    let value: Value = serde_json::from_str(text).map_err(|_| ProposalError::NotJson)?;
    if !value.is_object() {
        return Err(ProposalError::NotJson);
    }
    serde_json::from_value(value).map_err(|_| ProposalError::InvalidProposal)
}

/// The proposal `raw` stands for, when its members fit its action.
fn checked(raw: Raw) -> Result<Proposal, ProposalError> {
    match raw.action {
        Action::Call => {
            let tool = raw.tool.filter(|t| !t.is_empty() && t.len() <= 64).ok_or(ProposalError::InvalidProposal)?;
            let arguments = raw.arguments.unwrap_or_else(|| Value::Object(Default::default()));
            let no_finish_fields =
                raw.answer.as_deref().unwrap_or("").is_empty() && raw.sources.as_ref().is_none_or(Vec::is_empty);
            if !arguments.is_object() || !no_finish_fields {
                return Err(ProposalError::InvalidProposal);
            }
            Ok(Proposal::Call { tool, arguments })
        }
        Action::Finish => {
            let no_call_fields = raw.tool.as_deref().unwrap_or("").is_empty()
                && raw.arguments.as_ref().is_none_or(|a| a.as_object().is_some_and(|o| o.is_empty()));
            let sources = raw.sources.unwrap_or_default();
            // a text of at most that many bytes has at most that many characters
            let answer_fits = raw
                .answer
                .as_deref()
                .is_none_or(|a| a.len() <= MAX_ANSWER_CHARS || a.chars().count() <= MAX_ANSWER_CHARS);
            if !no_call_fields || sources.len() > 20 || !answer_fits {
                return Err(ProposalError::InvalidProposal);
            }
            Ok(Proposal::Finish { answer: raw.answer.unwrap_or_default(), sources })
        }
        Action::Other => Err(ProposalError::InvalidProposal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parser as it was with `action` read into a `String`: the reference the
    /// allocation-free `action` read must agree with.
    fn parse_with_string_action(text: &str) -> Result<Proposal, ProposalError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Old {
            action: String,
            #[serde(default)]
            tool: Option<String>,
            #[serde(default)]
            arguments: Option<Value>,
            #[serde(default)]
            answer: Option<String>,
            #[serde(default)]
            sources: Option<Vec<String>>,
        }
        if text.len() > MAX_PROPOSAL_BYTES {
            return Err(ProposalError::InvalidProposal);
        }
        let object = text.trim_start_matches([' ', '\n', '\t', '\r']).starts_with('{');
        let direct = if object { serde_json::from_str::<Old>(text).ok() } else { None };
        let raw = match direct {
            Some(raw) => raw,
            None => {
                let value: Value = serde_json::from_str(text).map_err(|_| ProposalError::NotJson)?;
                if !value.is_object() {
                    return Err(ProposalError::NotJson);
                }
                serde_json::from_value(value).map_err(|_| ProposalError::InvalidProposal)?
            }
        };
        match raw.action.as_str() {
            "call" => {
                let tool = raw.tool.filter(|t| !t.is_empty() && t.len() <= 64).ok_or(ProposalError::InvalidProposal)?;
                let arguments = raw.arguments.unwrap_or_else(|| Value::Object(Default::default()));
                let no_finish_fields =
                    raw.answer.as_deref().unwrap_or("").is_empty() && raw.sources.as_ref().is_none_or(Vec::is_empty);
                if !arguments.is_object() || !no_finish_fields {
                    return Err(ProposalError::InvalidProposal);
                }
                Ok(Proposal::Call { tool, arguments })
            }
            "finish" => {
                let no_call_fields = raw.tool.as_deref().unwrap_or("").is_empty()
                    && raw.arguments.as_ref().is_none_or(|a| a.as_object().is_some_and(|o| o.is_empty()));
                let sources = raw.sources.unwrap_or_default();
                let answer_fits = raw.answer.as_deref().is_none_or(|a| a.chars().count() <= MAX_ANSWER_CHARS);
                if !no_call_fields || sources.len() > 20 || !answer_fits {
                    return Err(ProposalError::InvalidProposal);
                }
                Ok(Proposal::Finish { answer: raw.answer.unwrap_or_default(), sources })
            }
            _ => Err(ProposalError::InvalidProposal),
        }
    }

    #[test]
    fn the_action_read_without_a_copy_decides_as_the_string_read_did() {
        let actions = [
            r#""call""#,
            r#""finish""#,
            r#""c\u0061ll""#,
            r#""fin\u0069sh""#,
            r#""Call""#,
            r#""call ""#,
            r#""""#,
            r#""délégué""#,
            r#""\ud83d\ude00""#,
            r#""\ud83d""#,
            "7",
            "null",
            "true",
            "[\"call\"]",
            "{\"call\":1}",
        ];
        let rests = [
            "",
            r#","tool":"get_ticket","arguments":{"ticket_id":"T-601"}"#,
            r#","tool":"get_ticket""#,
            r#","answer":"T-601 status is \"open\"; é\n","sources":["o1","o2"]"#,
            r#","answer":"x","sources":[]"#,
            r#","answer":"","tool":"","arguments":{}"#,
            r#","tool":"t","arguments":[1]"#,
            r#","tool":"t","grant":true"#,
            r#","action":"finish","answer":"x""#,
            r#","action":"call","tool":"t""#,
            r#","answer":7"#,
        ];
        let mut texts = vec![
            String::new(),
            "Sure.".to_string(),
            "[\"call\",\"t\",{},null,null]".to_string(),
            r#"{"action":"call","tool":"get_ti"#.to_string(),
        ];
        for a in actions {
            for r in rests {
                texts.push(format!(r#"{{"action":{a}{r}}}"#));
                // the action last, after leading white space
                let before = r.strip_prefix(',').map_or(String::new(), |r| format!("{r},"));
                texts.push(format!(" \n{{{before}\"action\":{a}}}"));
                texts.push(format!(r#"{{"action":{a}{r}}} trailing"#));
            }
        }
        for text in &texts {
            assert_eq!(parse_proposal(text), parse_with_string_action(text), "{text}");
        }
    }

    #[test]
    fn the_answer_limit_counts_characters_only_past_as_many_bytes() {
        // around the limit, in one-byte and multi-byte characters: the reference parser
        // counts the characters of every answer
        for unit in ["a", "é", "\u{1F600}", "\\\"", "\\u00e9"] {
            for n in [
                MAX_ANSWER_CHARS / 4,
                MAX_ANSWER_CHARS / 2,
                MAX_ANSWER_CHARS - 1,
                MAX_ANSWER_CHARS,
                MAX_ANSWER_CHARS + 1,
            ] {
                let text = format!(r#"{{"action":"finish","answer":"{}","sources":["o1"]}}"#, unit.repeat(n));
                assert_eq!(parse_proposal(&text), parse_with_string_action(&text), "{unit} x {n}");
            }
        }
        let fits = format!(r#"{{"action":"finish","answer":"{}"}}"#, "é".repeat(MAX_ANSWER_CHARS));
        assert!(matches!(parse_proposal(&fits), Ok(Proposal::Finish { .. })), "characters, not bytes");
        let over = format!(r#"{{"action":"finish","answer":"{}"}}"#, "é".repeat(MAX_ANSWER_CHARS + 1));
        assert_eq!(parse_proposal(&over), Err(ProposalError::InvalidProposal));
    }

    #[test]
    fn proposals_parse_strictly() {
        assert!(matches!(
            parse_proposal(r#"{"action":"call","tool":"get_ticket","arguments":{"ticket_id":"T-601"}}"#),
            Ok(Proposal::Call { .. })
        ));
        assert!(matches!(
            parse_proposal(r#"{"action":"finish","answer":"x","sources":["o1"]}"#),
            Ok(Proposal::Finish { .. })
        ));
        let cases = [
            ("Sure, I can help.", ProposalError::NotJson),
            (r#"{"action":"call","tool":"get_ti"#, ProposalError::NotJson),
            ("[1,2]", ProposalError::NotJson),
            ("", ProposalError::NotJson),
            (r#"{"action":"call","tool":"get_ticket","arguments":{},"grant":true}"#, ProposalError::InvalidProposal),
            (r#"{"action":"delegate","tool":"x"}"#, ProposalError::InvalidProposal),
            (r#"{"action":"call"}"#, ProposalError::InvalidProposal),
            (r#"{"action":"call","tool":"t","arguments":[1]}"#, ProposalError::InvalidProposal),
            (r#"{"action":"finish","answer":"x","tool":"get_ticket"}"#, ProposalError::InvalidProposal),
            (r#"{"action":7}"#, ProposalError::InvalidProposal),
        ];
        for (text, code) in cases {
            assert_eq!(parse_proposal(text), Err(code), "{text}");
        }
        let huge = format!(r#"{{"action":"finish","answer":"{}"}}"#, "a".repeat(MAX_PROPOSAL_BYTES));
        assert_eq!(parse_proposal(&huge), Err(ProposalError::InvalidProposal));
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(parse_proposal(&deep), Err(ProposalError::InvalidProposal));
        // what the one-pass read must leave to the two passes
        let more = [
            (r#"["call","get_ticket",{"ticket_id":"T-601"},null,null]"#, ProposalError::NotJson),
            (r#"{"action":7,"tool":"x""#, ProposalError::NotJson),
            (r#" {"action":"finish","answer":"x","sources":["o1"]} x"#, ProposalError::NotJson),
        ];
        for (text, code) in more {
            assert_eq!(parse_proposal(text), Err(code), "{text}");
        }
        // a repeated member: the last one counts, as when the text is read as a value first
        assert!(matches!(
            parse_proposal(r#"{"action":"call","action":"finish","answer":"x","sources":["o1"]}"#),
            Ok(Proposal::Finish { .. })
        ));
        assert!(matches!(
            parse_proposal("\n {\"action\":\"call\",\"tool\":\"get_ticket\",\"arguments\":{\"ticket_id\":\"T-601\"}}"),
            Ok(Proposal::Call { .. })
        ));
    }
}
