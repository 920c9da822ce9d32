//! Tools: their specs, typed argument structs (unknown fields rejected), the help desk's
//! registry and its execution against the [`World`](crate::world::World), and the
//! [`Environment`] seam the gate holds (`environment.rs`).
//!
//! A tool call from a model is a request: the environment ([`Registry::validate`] for the
//! help desk) turns its JSON arguments into a typed [`ToolArgs`] or an [`ArgError`]; only
//! the gate executes. A gate holds a [`ToolSet`]: its environment's tools plus any [`Tool`]
//! added to that gate (`added.rs`) and any MCP server's (`mcp/`).

mod added;
mod calculator;
mod data;
mod environment;
pub mod mcp;
mod search;

use crate::codes::codes;
use compact_str::CompactString;
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use crate::world::World;

pub(crate) use added::Started;
pub(crate) use added::{AddToolError, ToolSet};
pub use added::{AddedArgs, Tool};
pub(crate) use calculator::evaluate;
pub use data::ToolData;
pub use data::{Output, Record};
#[cfg(test)]
pub(crate) use environment::any_string;
#[cfg(test)]
pub(crate) use environment::helpdesk_label;
pub use environment::{
    Cited, ClaimProblem, Environment, FactKind, FinalState, JudgeError, NoTools, RecordFact, RunEnd,
};
pub(crate) use environment::{helpdesk_confidentiality, helpdesk_fact, helpdesk_fact_of};
pub(crate) use search::search;

/// A proposed or executed tool call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// Call id, `<run>-c<step>`.
    pub id: String,
    /// Tool name as proposed (may name a tool that does not exist).
    pub name: String,
    /// Arguments as proposed (a JSON object).
    pub arguments: Value,
}

impl ToolCall {
    /// A call.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        Self { id: id.into(), name: name.into(), arguments }
    }

    /// A stable fingerprint of tool name and arguments (key order does not matter): the
    /// first 16 hex digits of SHA-256. Used for repeats and audit lines instead of the
    /// arguments themselves.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.name, &self.arguments)
    }
}

/// See [`ToolCall::fingerprint`].
pub fn fingerprint(name: &str, arguments: &Value) -> String {
    fingerprint_inline(name, arguments).into_string()
}

/// [`fingerprint`] as a [`CompactString`]: its 16 hex digits are held inline, so taking
/// it allocates nothing.
pub(crate) fn fingerprint_inline(name: &str, arguments: &Value) -> CompactString {
    // serde_json's Map is ordered by key, so this text is canonical. It is written straight
    // into the hash; writing to a hasher cannot fail, and a failure would only mean the
    // same digest as an empty text, as before.
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([0u8]);
    let _ = serde_json::to_writer(&mut h, arguments);
    let mut out = [0u8; 16];
    for (pair, b) in out.chunks_exact_mut(2).zip(&h.finalize()[..8]) {
        pair.copy_from_slice(&hex_pair(*b));
    }
    // hex digits are ASCII, so this is never the empty fallback
    std::str::from_utf8(&out).map(CompactString::new).unwrap_or_default()
}

/// The two lower-case hex digits of `b`.
fn hex_pair(b: u8) -> [u8; 2] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 0x0f)]]
}

/// The pieces written one after the other into one text, sized first: inline up to 24
/// bytes, one allocation of the joined length past that.
pub(crate) fn concat_compact(pieces: &[&str]) -> CompactString {
    let mut out = CompactString::with_capacity(pieces.iter().map(|p| p.len()).sum());
    for piece in pieces {
        out.push_str(piece);
    }
    out
}

/// Lower-case hex of `bytes`, without a formatting call per byte.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.extend(hex_pair(*b).map(char::from));
    }
    out
}

/// Arguments of `get_ticket`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetTicketArgs {
    /// Ticket id such as `T-601` (held inline up to 24 bytes: reading the arguments of a
    /// well-formed call allocates nothing; its JSON is the string's).
    pub(crate) ticket_id: CompactString,
}

impl GetTicketArgs {
    /// The ticket id.
    pub fn ticket_id(&self) -> &str {
        &self.ticket_id
    }
}

/// Arguments of `lookup_document`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LookupDocumentArgs {
    /// Document id such as `kc-returns-v3` (inline up to 24 bytes, as a ticket id).
    pub(crate) doc_id: CompactString,
}

impl LookupDocumentArgs {
    /// The document id.
    pub fn doc_id(&self) -> &str {
        &self.doc_id
    }
}

/// Arguments of `calculator`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalculatorArgs {
    /// Plain arithmetic.
    pub expression: String,
}

/// Arguments of `send_email_draft`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendEmailDraftArgs {
    /// Recipient address.
    pub to: String,
    /// Subject line.
    pub subject: String,
    /// Body text.
    pub body: String,
    /// Idempotency key (the gate replaces a model's key with one it derives).
    pub idempotency_key: String,
}

/// Arguments of `search_documents`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchDocumentsArgs {
    /// Free-text query, 1 to 200 characters.
    pub query: String,
}

/// Arguments of `remember`: the model only points at one of the run's observations; the
/// application builds the note from it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RememberArgs {
    /// Observation id such as `o1`.
    pub from_observation: String,
}

/// A validated call's typed arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolArgs {
    /// `get_ticket`.
    GetTicket(GetTicketArgs),
    /// `lookup_document`.
    LookupDocument(LookupDocumentArgs),
    /// `calculator`.
    Calculator(CalculatorArgs),
    /// `send_email_draft`.
    SendEmailDraft(SendEmailDraftArgs),
    /// `search_documents`.
    SearchDocuments(SearchDocumentsArgs),
    /// `remember` (an internal effect, applied by the agent's guarded memory).
    Remember(RememberArgs),
    /// A tool added to one gate ([`Tool`]); only that gate runs it.
    Added(AddedArgs),
    /// A tool of an MCP server ([`mcp::McpTool`]); only the gate holding it runs it.
    Mcp(McpArgs),
}

/// The checked arguments of an MCP tool: the declared fields only, each of a declared type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpArgs {
    /// The tool's name (`<server>__<tool>`).
    pub tool: String,
    /// The arguments object.
    pub arguments: serde_json::Map<String, Value>,
}

/// Why arguments were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArgError {
    /// No tool of that name exists.
    #[error("no such tool")]
    UnknownTool,
    /// The arguments do not fit the tool's schema.
    #[error("invalid arguments: {0}")]
    Invalid(String),
}

codes! {
    /// How a tool failed while running.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum ToolFailureCode {
        /// Nothing with that id (or not yours: the two look the same).
        NotFound = "not_found",
        /// The input was well-formed but could not be processed (e.g. division by zero).
        BadInput = "bad_input",
        /// The tool did not answer within the gate's per-call timeout.
        ToolTimeout = "tool_timeout",
        /// The tool panicked; the gate caught it.
        ToolPanicked = "tool_panicked",
        /// A tool server answered that the call failed (an MCP result flagged as an error).
        ToolError = "tool_error",
        /// A tool server could not be reached, or did not answer as MCP says it must.
        ToolUnavailable = "tool_unavailable",
        /// A tool server changed a pinned tool's definition mid-run; nothing was sent.
        ToolChanged = "tool_changed",
    }
}

/// A tool that ran and failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    /// The code.
    pub code: ToolFailureCode,
    /// A short message for the observation.
    pub message: String,
}

/// The description of one tool, as a model is shown it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolSpec {
    /// Name.
    pub name: Cow<'static, str>,
    /// One-line description.
    pub description: Cow<'static, str>,
    /// JSON schema of the arguments object, shared: every request that shows the tool
    /// holds the same schema instead of a deep copy of it.
    #[serde(serialize_with = "shared_value")]
    pub parameters: Arc<Value>,
}

/// Serialises a shared schema as the value itself.
fn shared_value<S: serde::Serializer>(value: &Arc<Value>, s: S) -> Result<S::Ok, S::Error> {
    Value::serialize(value, s)
}

static TICKET_ID: LazyLock<Regex> = LazyLock::new(|| re(r"^T-\d{1,6}$"));
/// The pattern [`doc_id_ok`] answers for (the tests compare the two).
#[cfg(test)]
static DOC_ID: LazyLock<Regex> = LazyLock::new(|| re(r"^[a-z0-9][a-z0-9-]{0,39}$"));
static ADDRESS: LazyLock<Regex> =
    LazyLock::new(|| re(r"^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$"));
static OBSERVATION_ID: LazyLock<Regex> = LazyLock::new(|| re(r"^o\d{1,4}$"));
static IDEM_KEY: LazyLock<Regex> = LazyLock::new(|| re(r"^[A-Za-z0-9_.:-]{1,80}$"));

#[allow(clippy::expect_used)] // literal patterns, covered by tests
fn re(p: &str) -> Regex {
    Regex::new(p).expect("literal pattern compiles")
}

/// `TICKET_ID.is_match(s)` without running the regex for an ASCII id (every well-formed
/// one): in ASCII, `\d` is exactly `0-9`. Other text is left to the regex, whose `\d`
/// also takes the decimal digits of other scripts.
fn ticket_id_ok(s: &str) -> bool {
    if !s.is_ascii() {
        return TICKET_ID.is_match(s);
    }
    s.strip_prefix("T-").is_some_and(|d| (1..=6).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_digit()))
}

/// `DOC_ID.is_match(s)` without running the regex: the pattern's classes are ASCII bytes.
fn doc_id_ok(s: &str) -> bool {
    let slug = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = s.as_bytes();
    (1..=40).contains(&bytes.len())
        && bytes.first().is_some_and(slug)
        && bytes[1..].iter().all(|b| slug(b) || *b == b'-')
}

/// The known tools. Immutable; one static instance is enough.
#[derive(Debug, Default, Clone, Copy)]
pub struct Registry;

/// Names of every tool the registry knows, in a fixed order.
pub const TOOL_NAMES: [&str; 6] =
    ["get_ticket", "lookup_document", "calculator", "send_email_draft", "search_documents", "remember"];

/// Every spec, built once (a request lists them at every step).
pub(crate) static SPECS: LazyLock<Vec<ToolSpec>> =
    LazyLock::new(|| TOOL_NAMES.iter().filter_map(|n| Registry::build_spec(n)).collect());

pub(crate) fn str_schema(fields: &[&str]) -> Value {
    let props: serde_json::Map<String, Value> =
        fields.iter().map(|f| ((*f).to_string(), json!({"type": "string"}))).collect();
    json!({"type": "object", "properties": props, "required": fields, "additionalProperties": false})
}

fn parse<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, ArgError> {
    if !v.is_object() {
        return Err(ArgError::Invalid("arguments must be an object".into()));
    }
    T::deserialize(v).map_err(|e| ArgError::Invalid(e.to_string()))
}

fn check(ok: bool, what: &str) -> Result<(), ArgError> {
    if ok { Ok(()) } else { Err(ArgError::Invalid(what.to_string())) }
}

impl Registry {
    /// True when a tool of this name exists.
    pub fn has(&self, name: &str) -> bool {
        TOOL_NAMES.contains(&name)
    }

    /// The spec of a tool, if it exists.
    pub fn spec(&self, name: &str) -> Option<ToolSpec> {
        SPECS.iter().find(|s| s.name == name).cloned()
    }

    fn build_spec(name: &str) -> Option<ToolSpec> {
        let (name, description, fields): (&'static str, &'static str, &[&str]) = match name {
            "get_ticket" => ("get_ticket", "Read one of the user's support tickets by id.", &["ticket_id"]),
            "lookup_document" => ("lookup_document", "Read a policy document by id.", &["doc_id"]),
            "calculator" => ("calculator", "Evaluate plain arithmetic exactly.", &["expression"]),
            "search_documents" => ("search_documents", "Search the policy documents by keywords.", &["query"]),
            "send_email_draft" => (
                "send_email_draft",
                "Send an e-mail to a customer (needs a human approval).",
                &["to", "subject", "body", "idempotency_key"],
            ),
            "remember" => (
                "remember",
                "Keep a fact from one of your observations; the application writes the note.",
                &["from_observation"],
            ),
            _ => return None,
        };
        Some(ToolSpec {
            name: Cow::Borrowed(name),
            description: Cow::Borrowed(description),
            parameters: Arc::new(str_schema(fields)),
        })
    }

    /// Checks a call's arguments against the tool's schema and content rules.
    ///
    /// # Errors
    /// [`ArgError::UnknownTool`] or [`ArgError::Invalid`] (unknown fields included).
    pub fn validate(&self, name: &str, arguments: &Value) -> Result<ToolArgs, ArgError> {
        match name {
            "get_ticket" => {
                let a: GetTicketArgs = parse(arguments)?;
                check(ticket_id_ok(&a.ticket_id), "ticket_id must look like T-601")?;
                Ok(ToolArgs::GetTicket(a))
            }
            "lookup_document" => {
                let a: LookupDocumentArgs = parse(arguments)?;
                check(doc_id_ok(&a.doc_id), "doc_id must be a lower-case slug")?;
                Ok(ToolArgs::LookupDocument(a))
            }
            "calculator" => {
                let a: CalculatorArgs = parse(arguments)?;
                check(
                    !a.expression.trim().is_empty() && a.expression.len() <= 200,
                    "expression must be 1 to 200 characters",
                )?;
                Ok(ToolArgs::Calculator(a))
            }
            "search_documents" => {
                let a: SearchDocumentsArgs = parse(arguments)?;
                check(
                    !a.query.trim().is_empty() && a.query.chars().count() <= 200,
                    "query must be 1 to 200 characters",
                )?;
                Ok(ToolArgs::SearchDocuments(a))
            }
            "send_email_draft" => {
                let a: SendEmailDraftArgs = parse(arguments)?;
                check(ADDRESS.is_match(&a.to), "to must be one e-mail address")?;
                check(
                    !a.subject.trim().is_empty() && a.subject.chars().count() <= 150,
                    "subject must be 1 to 150 characters",
                )?;
                check(
                    !a.body.trim().is_empty() && a.body.chars().count() <= 4000,
                    "body must be 1 to 4000 characters",
                )?;
                check(IDEM_KEY.is_match(&a.idempotency_key), "idempotency_key must be 1 to 80 safe characters")?;
                Ok(ToolArgs::SendEmailDraft(a))
            }
            "remember" => {
                let a: RememberArgs = parse(arguments)?;
                check(OBSERVATION_ID.is_match(&a.from_observation), "from_observation must look like o1")?;
                Ok(ToolArgs::Remember(a))
            }
            _ => Err(ArgError::UnknownTool),
        }
    }

    /// Runs a validated call for `caller` against `world`.
    ///
    /// # Errors
    /// [`ToolFailure`] when the tool ran and failed; asking for another user's ticket
    /// fails exactly like asking for a missing one.
    pub fn execute(&self, world: &World, caller: &str, args: &ToolArgs) -> Result<Value, ToolFailure> {
        self.run(world, caller, args).map(Output::into_value)
    }

    /// As [`Registry::execute`], with the two record reads (`get_ticket`,
    /// `lookup_document`) answered as the record itself: its text is written straight
    /// from the world, and the gate labels it from the same members.
    pub(crate) fn run<'w>(&self, world: &'w World, caller: &str, args: &ToolArgs) -> Result<Output<'w>, ToolFailure> {
        let value = |v: Value| Ok(Output::Value(v));
        match args {
            // members in key order, as the `json!` object they stand for lists them
            ToolArgs::GetTicket(a) => match world.data.tickets().get(a.ticket_id.as_str()) {
                Some(t) if t.owner == caller => Ok(Output::Record(
                    Record::new([
                        ("id", t.id.as_str()),
                        ("status", &t.status),
                        ("subject", &t.subject),
                        ("text", &t.text),
                    ])
                    .of(&world.data, world.data.index().ticket(&t.id)),
                )),
                _ => {
                    Err(ToolFailure { code: ToolFailureCode::NotFound, message: format!("no ticket {}", a.ticket_id) })
                }
            },
            ToolArgs::LookupDocument(a) => match world.data.documents().get(a.doc_id.as_str()) {
                Some(d) => {
                    let record = Record::new([("id", d.id.as_str()), ("text", &d.text), ("title", &d.title)]);
                    Ok(Output::Record(record.of(&world.data, world.data.index().document(&d.id))))
                }
                None => {
                    Err(ToolFailure { code: ToolFailureCode::NotFound, message: format!("no document {}", a.doc_id) })
                }
            },
            ToolArgs::Calculator(a) => match evaluate(&a.expression) {
                Ok(v) => value(json!({"expression": a.expression, "value": v.to_string()})),
                Err(m) => Err(ToolFailure { code: ToolFailureCode::BadInput, message: m }),
            },
            ToolArgs::SendEmailDraft(a) => {
                let (id, sent_now) = world.outbox.send(&a.to, &a.subject, &a.body, &a.idempotency_key);
                value(json!({"sent": true, "email_id": id, "replayed": !sent_now}))
            }
            ToolArgs::SearchDocuments(a) => value(search(&world.data, &a.query)),
            // an internal effect: only the gate applies it, through the agent's memory
            ToolArgs::Remember(_) => Err(ToolFailure {
                code: ToolFailureCode::BadInput,
                message: "remember is applied by the agent's guarded memory, not by the registry".into(),
            }),
            // an added tool answers only through the gate that holds it
            ToolArgs::Added(AddedArgs { tool, .. }) | ToolArgs::Mcp(McpArgs { tool, .. }) => Err(ToolFailure {
                code: ToolFailureCode::BadInput,
                message: format!("{tool} runs only through the gate it was added to"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::WorldData;
    use std::sync::Arc;

    fn world() -> World {
        World::new(Arc::new(WorldData::bundled().unwrap()))
    }

    #[test]
    fn unknown_fields_and_bad_shapes_are_invalid_arguments() {
        let r = Registry;
        assert!(r.validate("get_ticket", &json!({"ticket_id": "T-601"})).is_ok());
        for bad in [
            json!({"ticket_id": "T-601", "owner": "lena"}),
            json!({"ticket_id": 601}),
            json!({}),
            json!(["T-601"]),
            json!({"ticket_id": "../etc/passwd"}),
        ] {
            assert!(matches!(r.validate("get_ticket", &bad), Err(ArgError::Invalid(_))), "{bad}");
        }
        assert_eq!(r.validate("rm_rf", &json!({})), Err(ArgError::UnknownTool));
        let mail = json!({"to": "a@b.example", "subject": "s", "body": "b", "idempotency_key": "k-1"});
        assert!(r.validate("send_email_draft", &mail).is_ok());
        let two = json!({"to": "a@b.example, c@d.example", "subject": "s", "body": "b", "idempotency_key": "k"});
        assert!(r.validate("send_email_draft", &two).is_err());
    }

    #[test]
    fn inline_id_arguments_validate_serialise_and_fail_as_the_string_ones_did() {
        // the argument structs of `get_ticket` and `lookup_document` as they were, with
        // `String` ids: the reference for the `CompactString` ones (answer, JSON, error text)
        #[derive(Debug, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct OldTicket {
            ticket_id: String,
        }
        #[derive(Debug, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct OldDoc {
            doc_id: String,
        }
        fn old(name: &str, v: &Value) -> Result<String, ArgError> {
            match name {
                "get_ticket" => {
                    let a: OldTicket = parse(v)?;
                    check(ticket_id_ok(&a.ticket_id), "ticket_id must look like T-601")?;
                    Ok(serde_json::to_string(&a).unwrap())
                }
                _ => {
                    let a: OldDoc = parse(v)?;
                    check(doc_id_ok(&a.doc_id), "doc_id must be a lower-case slug")?;
                    Ok(serde_json::to_string(&a).unwrap())
                }
            }
        }
        let mut ids: Vec<Value> =
            ["T-601", "T-٦٠١", "T-1234567", "kc-returns-v3", "", "é\"\\\n\u{0}", "\u{1F600}", "T-601 ", "Kc", "-kc"]
                .iter()
                .map(|s| json!(s))
                .collect();
        for n in [23, 24, 25, 40, 41, 300] {
            ids.push(json!("a".repeat(n)));
            ids.push(json!(format!("T-{}", "1".repeat(n))));
        }
        ids.extend([json!(601), json!(null), json!(true), json!(["T-601"]), json!({"id": "T-601"}), json!(1.5)]);
        let r = Registry;
        for (name, field) in [("get_ticket", "ticket_id"), ("lookup_document", "doc_id")] {
            let mut args: Vec<Value> = ids.iter().map(|id| json!({ field: id })).collect();
            args.extend([
                json!({}),
                json!({field: "T-601", "owner": "lena"}),
                json!({"owner": "lena", field: "kc"}),
                json!(["T-601"]),
                json!("T-601"),
                json!(null),
            ]);
            for v in &args {
                let now = r.validate(name, v).map(|a| match a {
                    ToolArgs::GetTicket(a) => serde_json::to_string(&a).unwrap(),
                    ToolArgs::LookupDocument(a) => serde_json::to_string(&a).unwrap(),
                    other => panic!("{other:?}"),
                });
                assert_eq!(now, old(name, v), "{name} {v}");
                if let Ok(text) = &now {
                    // and back: the wire form reads as the same arguments
                    assert_eq!(text, &v.to_string(), "{name} {v}");
                    let back = r.validate(name, &serde_json::from_str(text).unwrap()).unwrap();
                    assert_eq!(back, r.validate(name, v).unwrap());
                }
            }
        }
    }

    #[test]
    fn another_users_ticket_looks_exactly_like_a_missing_one() {
        let (r, w) = (Registry, world());
        let theirs = r.execute(&w, "kwame", &ToolArgs::GetTicket(GetTicketArgs { ticket_id: "T-603".into() }));
        let missing = r.execute(&w, "kwame", &ToolArgs::GetTicket(GetTicketArgs { ticket_id: "T-999".into() }));
        let (a, b) = (theirs.unwrap_err(), missing.unwrap_err());
        assert_eq!(a.code, b.code);
        assert_eq!(a.message.replace("T-603", "X"), b.message.replace("T-999", "X"));
        assert!(r.execute(&w, "lena", &ToolArgs::GetTicket(GetTicketArgs { ticket_id: "T-603".into() })).is_ok());
    }

    #[test]
    fn id_checks_without_the_regex_answer_what_the_regex_answers() {
        let mut texts: Vec<String> = [
            "",
            "T",
            "T-",
            "T-6",
            "T-601",
            "T-000000",
            "T-1234567",
            "t-601",
            "T_601",
            "T-60a",
            "T-601\n",
            " T-601",
            "T-601 ",
            "TT-601",
            "T--601",
            "T-٦٠١",
            "T-６０１",
            "T-6٠",
            "T-𝟘",
            "T-²",
            "T-Ⅻ",
            "é",
            "kc-returns-v3",
            "-kc",
            "kc-",
            "Kc-returns",
            "kc_returns",
            "kc returns",
            "0",
            "a",
            "a-",
            "9-9",
            "kc-retürns",
            "ｋｃ",
            "kc-returns-v3\n",
            "kc\u{0}",
            "\"kc\"",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .collect();
        for n in 0..=45 {
            texts.push("a".repeat(n));
            texts.push(format!("k{}", "-".repeat(n)));
            texts.push(format!("T-{}", "7".repeat(n)));
        }
        for t in &texts {
            assert_eq!(ticket_id_ok(t), TICKET_ID.is_match(t), "ticket {t:?}");
            assert_eq!(doc_id_ok(t), DOC_ID.is_match(t), "doc {t:?}");
        }
        assert!(ticket_id_ok("T-٦٠١") && ticket_id_ok("T-601") && !ticket_id_ok("T-1234567"));
        assert!(doc_id_ok(&"a".repeat(40)) && !doc_id_ok(&"a".repeat(41)) && !doc_id_ok("-kc"));
    }

    #[test]
    fn the_inline_fingerprint_is_the_string_one() {
        let names = ["", "get_ticket", "send_email_draft", "ünï\u{0}\"tool\"", "x y"];
        let arguments = [
            json!({}),
            json!(null),
            json!({"ticket_id": "T-601"}),
            json!({"b": [1, 2.5, -3e300, true, null], "a": {"z": "\n\t\"\\ 😀 \u{2028}", "y": {}}}),
            json!("a bare string"),
            json!([{"to": "lena@example.com", "body": "é".repeat(300)}]),
        ];
        let mut seen = std::collections::BTreeSet::new();
        for name in names {
            for args in &arguments {
                let (inline, string) = (fingerprint_inline(name, args), fingerprint(name, args));
                assert_eq!(inline, string, "{name:?} {args}");
                // the digits as they were written before: the digest of the name, a zero
                // byte and the compact JSON, a formatting call per byte
                let h = Sha256::new().chain_update(name.as_bytes()).chain_update([0u8]).chain_update(args.to_string());
                let old: String = h.finalize()[..8].iter().map(|b| format!("{b:02x}")).collect();
                assert_eq!(string, old, "{name:?} {args}");
                assert_eq!(inline.len(), 16);
                assert!(!inline.is_heap_allocated(), "held inline");
                assert!(string.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
                seen.insert(string);
            }
        }
        assert_eq!(seen.len(), names.len() * arguments.len(), "no two calls share a fingerprint");
        // the digits as they were written before (a formatting call per byte)
        let h = Sha256::new().chain_update(b"t\0").chain_update(br#"{"a":1}"#).finalize();
        let old: String = h[..8].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(fingerprint_inline("t", &json!({"a": 1})), old);
    }

    #[test]
    fn fingerprint_ignores_key_order() {
        let a = fingerprint("t", &json!({"a": 1, "b": 2}));
        let b: Value = serde_json::from_str(r#"{"b": 2, "a": 1}"#).unwrap();
        assert_eq!(a, fingerprint("t", &b));
        assert_ne!(a, fingerprint("u", &b));
    }
}
