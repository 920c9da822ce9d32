//! The OpenAI-compatible chat-completions wire format: the request body built from an
//! [`LlmRequest`], and an answer read back into an [`LlmResponse`] whose text is a
//! proposal the agent loop parses strictly.
//!
//! The mapping of a reply:
//! - tool calls present: the first one becomes the proposal — `finish` with its
//!   arguments becomes `{"action":"finish", …arguments}`, any other name becomes
//!   `{"action":"call","tool":name,"arguments":…}`; every call stays in
//!   [`LlmResponse::tool_calls`] for designs that run several calls per reply;
//! - otherwise the text is the proposal (one surrounding code fence is removed);
//! - `finish_reason` first: `length` is `truncated`, `content_filter` is
//!   `refused_by_server`, whatever the reply holds;
//! - neither: `empty_reply`. Arguments that are not a JSON object:
//!   `invalid_tool_arguments`. A body without `choices[0].message`: `malformed_json`.
//!   Each of these failures carries what the answered call cost (its `usage`).
//!
//! The server's answer may carry fields this module does not know (servers add many);
//! only what is needed is read. Our own proposal format stays strict: the loop rejects
//! unknown fields in what this module produces.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::HttpCode;
use super::HttpFailure;
use super::config::{Endpoint, ToolMode};
use crate::cost::estimate_tokens;
use crate::model::{Answered, LlmRequest, LlmResponse, MessageRole, RequestedCall, Usage};

/// The name of the function a model calls to finish (native tool calling).
pub(crate) const FINISH_TOOL: &str = "finish";

/// Most tool calls read from one reply.
pub(crate) const MAX_TOOL_CALLS: usize = 16;

#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    stream: bool,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

fn role_name(role: MessageRole) -> &'static str {
    match role {
        MessageRole::System => "system",
        MessageRole::User => "user",
        MessageRole::Assistant => "assistant",
        MessageRole::Tool => "tool",
    }
}

/// The `finish` function offered in native mode.
pub(crate) fn finish_function() -> Value {
    json!({
        "type": "function",
        "function": {
            "name": FINISH_TOOL,
            "description": "Finish the task: a short answer and the ids of the successful observations (o1, o2, ...) it rests on.",
            "parameters": {
                "type": "object",
                "properties": {
                    "answer": {"type": "string", "description": "The short answer."},
                    "sources": {"type": "array", "items": {"type": "string"}, "description": "Observation ids, e.g. [\"o1\", \"o2\"]."}
                },
                "required": ["answer", "sources"],
                "additionalProperties": false
            }
        }
    })
}

/// The JSON body of a chat-completions request for `request` at `ep`: in native mode the
/// request's tools and the `finish` function with `tool_choice`, or no functions at all
/// when the request offers no tool (a design that wants a message, not a call: the plan,
/// the planner); the endpoint's `temperature` and `seed` when set.
///
/// # Errors
/// `reserved_tool_name` when, in native mode, a tool of the request is called `finish`
/// (the name of the finishing function).
pub(crate) fn request_body(default_model: &str, ep: &Endpoint, request: &LlmRequest) -> Result<Vec<u8>, HttpFailure> {
    let mode = ep.tool_mode;
    let model = if request.model.is_empty() { default_model } else { &request.model };
    let messages = request
        .messages
        .iter()
        .map(|m| WireMessage {
            role: role_name(m.role),
            content: &m.content,
            tool_calls: m
                .tool_calls
                .iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments.to_string()}
                    })
                })
                .collect(),
            tool_call_id: m.tool_call_id.as_deref(),
        })
        .collect();
    let tools = match mode {
        ToolMode::Native if request.tools.is_empty() => Vec::new(),
        ToolMode::Text => Vec::new(),
        ToolMode::Native => {
            if request.tools.iter().any(|t| t.name == FINISH_TOOL) {
                return Err(HttpFailure::new(
                    HttpCode::ReservedToolName,
                    format!("a tool may not be called {FINISH_TOOL:?} in native mode"),
                ));
            }
            let mut tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "type": "function",
                        "function": {"name": t.name, "description": t.description, "parameters": &*t.parameters}
                    })
                })
                .collect();
            tools.push(finish_function());
            tools
        }
    };
    let tool_choice = (!tools.is_empty()).then_some(ep.tool_choice.as_str());
    let body = ChatRequest {
        model,
        messages,
        max_tokens: request.max_tokens,
        tools,
        tool_choice,
        temperature: ep.temperature.map(super::config::Temperature::get),
        seed: ep.seed,
        stream: false,
    };
    serde_json::to_vec(&body).map_err(|e| HttpFailure::new(HttpCode::ClientInit, format!("request body: {e}")))
}

#[derive(Deserialize)]
struct ChatResponse {
    choices: Vec<Choice>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    message: Option<ReplyMessage>,
    #[serde(default)]
    finish_reason: Option<Value>,
}

#[derive(Deserialize)]
struct ReplyMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<ReplyCall>>,
}

#[derive(Deserialize)]
struct ReplyCall {
    #[serde(default)]
    id: Option<String>,
    function: ReplyFunction,
}

#[derive(Deserialize)]
struct ReplyFunction {
    name: String,
    #[serde(default)]
    arguments: Value,
}

fn malformed(message: impl Into<String>) -> HttpFailure {
    HttpFailure::new(HttpCode::MalformedJson, message)
}

/// What the text of a response is read as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reading {
    /// A proposal for the agent loop: the first tool call, else the reply's text.
    Proposal,
    /// A message for another role (a brief, a verdict): the reply's own text, else the
    /// `answer` of a `finish` call; a reply with only other tool calls carries no message
    /// (empty text, which the coordinator refuses as `not_json`).
    Message,
}

/// Reads a successful answer body; `reading` says what its text is. The tool calls are
/// the same either way.
///
/// # Errors
/// `malformed_json`, `empty_reply` or `invalid_tool_arguments`.
/// A failure of an answer the server gave (cut off, withheld, unreadable) carries what the
/// call cost ([`Answered`]): the usage the body reports, if any can be read from it.
pub(crate) fn read_reply_as(body: &[u8], default_model: &str, reading: Reading) -> Result<LlmResponse, HttpFailure> {
    read_reply(body, default_model, reading).map_err(|mut f| {
        f.answered = answered_of(body, default_model).map(Box::new);
        f
    })
}

/// What an answer whose reading failed cost, when the body is a chat-completions answer a
/// model worked on (JSON with a `usage` object or at least one choice): its `usage` and
/// `model`, and the estimated tokens of its first choice's text and tool calls for a
/// server that reported no usage. `None` for a body that is no such answer (a proxy's
/// error page, an `{"error": …}` object, no choice and no usage): no model is known to
/// have worked on it.
fn answered_of(body: &[u8], default_model: &str) -> Option<Answered> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let chose = value.get("choices").and_then(Value::as_array).is_some_and(|c| !c.is_empty());
    if !chose && !value.get("usage").is_some_and(Value::is_object) {
        return None;
    }
    let usage = value.get("usage").and_then(read_usage);
    let model = value.get("model").and_then(Value::as_str).filter(|m| !m.is_empty()).unwrap_or(default_model);
    let message = value.pointer("/choices/0/message");
    let content = message.and_then(|m| m.get("content")).and_then(Value::as_str).unwrap_or_default();
    let calls = message.and_then(|m| m.get("tool_calls")).map(Value::to_string).unwrap_or_default();
    let output_estimate = estimate_tokens(content) + estimate_tokens(&calls);
    Some(Answered { model: model.to_string().into(), usage, output_estimate })
}

fn read_reply(body: &[u8], default_model: &str, reading: Reading) -> Result<LlmResponse, HttpFailure> {
    let reply: ChatResponse = serde_json::from_slice(body).map_err(|e| malformed(e.to_string()))?;
    let Some(choice) = reply.choices.into_iter().next() else {
        return Err(malformed("no choices in the answer"));
    };
    // why the server stopped comes first: a cut-off reply is truncated whatever it holds
    match choice.finish_reason.as_ref().and_then(Value::as_str) {
        Some("length") => {
            return Err(HttpFailure::new(
                HttpCode::Truncated,
                "the server stopped the reply at max_tokens (finish_reason length): raise --max-tokens",
            ));
        }
        Some("content_filter") => {
            return Err(HttpFailure::new(
                HttpCode::RefusedByServer,
                "the server withheld the reply (finish_reason content_filter)",
            ));
        }
        _ => {}
    }
    let Some(message) = choice.message else {
        return Err(malformed("no message in the first choice"));
    };
    let usage = reply.usage.as_ref().and_then(read_usage);
    let model = reply.model.filter(|m| !m.is_empty()).unwrap_or_else(|| default_model.to_string());
    let calls = read_calls(message.tool_calls.unwrap_or_default())?;
    let text = match (reading, calls.first()) {
        (Reading::Proposal, Some(first)) => proposal_of(first),
        (Reading::Message, Some(first)) => {
            let content = read_content(message.content)?;
            let own = strip_fence(&content).trim();
            if own.is_empty() { message_of(first) } else { own.to_string() }
        }
        (_, None) => {
            let content = read_content(message.content)?;
            let text = strip_fence(&content).trim();
            if text.is_empty() {
                return Err(HttpFailure::new(HttpCode::EmptyReply, "the reply has neither text nor a tool call"));
            }
            text.to_string()
        }
    };
    Ok(LlmResponse { text, model: model.into(), usage, tool_calls: calls })
}

/// The message a tool call carries: a `finish` call's `answer` text, nothing otherwise.
fn message_of(call: &RequestedCall) -> String {
    match call.arguments.get("answer").and_then(Value::as_str) {
        Some(answer) if call.name == FINISH_TOOL => strip_fence(answer).trim().to_string(),
        _ => String::new(),
    }
}

fn read_usage(v: &Value) -> Option<Usage> {
    let input = v.get("prompt_tokens")?.as_u64()?;
    let output = v.get("completion_tokens")?.as_u64()?;
    Some(Usage { input_tokens: input, output_tokens: output })
}

fn read_content(content: Option<Value>) -> Result<String, HttpFailure> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s),
        // the newer "content parts" form: concatenate the text parts
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for p in &parts {
                match p.get("text").and_then(Value::as_str) {
                    Some(t) => text.push_str(t),
                    None => return Err(malformed("a content part without text")),
                }
            }
            Ok(text)
        }
        Some(_) => Err(malformed("content is neither text nor a list of parts")),
    }
}

fn read_calls(raw: Vec<ReplyCall>) -> Result<Vec<RequestedCall>, HttpFailure> {
    if raw.len() > MAX_TOOL_CALLS {
        return Err(malformed(format!("more than {MAX_TOOL_CALLS} tool calls in one reply")));
    }
    let mut calls = Vec::with_capacity(raw.len());
    for (i, c) in raw.into_iter().enumerate() {
        let arguments = match c.function.arguments {
            Value::Null => Value::Object(Map::new()),
            Value::String(s) if s.trim().is_empty() => Value::Object(Map::new()),
            Value::String(s) => serde_json::from_str(&s).map_err(|e| {
                HttpFailure::new(
                    HttpCode::InvalidToolArguments,
                    format!("{}: arguments are not JSON: {e}", c.function.name),
                )
            })?,
            other => other,
        };
        if !arguments.is_object() {
            return Err(HttpFailure::new(
                HttpCode::InvalidToolArguments,
                format!("{}: arguments are not a JSON object", c.function.name),
            ));
        }
        let id = c.id.filter(|id| !id.is_empty()).unwrap_or_else(|| format!("call-{}", i + 1));
        calls.push(RequestedCall { id, name: c.function.name, arguments });
    }
    Ok(calls)
}

/// The proposal text for a requested call.
pub(crate) fn proposal_of(call: &RequestedCall) -> String {
    if call.name == FINISH_TOOL {
        let mut obj = Map::new();
        obj.insert("action".into(), Value::String("finish".into()));
        let mut smuggled = false;
        for (k, v) in call.arguments.as_object().into_iter().flatten() {
            if k == "action" {
                smuggled = true;
            } else {
                obj.insert(k.clone(), v.clone());
            }
        }
        // Any other field the model added stays, so the loop's strict parser rejects it;
        // an "action" of its own is marked with a tool name, which a finish may not have.
        if smuggled {
            obj.insert("tool".into(), Value::String(FINISH_TOOL.into()));
        }
        Value::Object(obj).to_string()
    } else {
        json!({"action": "call", "tool": call.name, "arguments": call.arguments}).to_string()
    }
}

/// Removes one surrounding Markdown code fence (```` ```json … ``` ````), if present.
pub(crate) fn strip_fence(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else { return t };
    let Some(inner) = rest.strip_suffix("```") else { return t };
    // drop the info string (e.g. `json`) up to the first newline
    match inner.find('\n') {
        Some(nl) if inner[..nl].trim().chars().all(|c| c.is_ascii_alphanumeric()) => inner[nl + 1..].trim(),
        _ => inner.trim(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{Proposal, parse_proposal};
    use crate::model::Message;

    fn read_reply(body: &[u8], default_model: &str) -> Result<LlmResponse, HttpFailure> {
        read_reply_as(body, default_model, Reading::Proposal)
    }

    fn reply(message: Value) -> Vec<u8> {
        json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}}).to_string().into_bytes()
    }

    #[test]
    fn tool_calls_become_proposals_and_stay_in_the_response() {
        let body = reply(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_ticket", "arguments": "{\"ticket_id\":\"T-601\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "lookup_document", "arguments": {"doc_id": "kc-returns-v3"}}}
        ]}));
        let r = read_reply(&body, "m").unwrap();
        assert_eq!(r.text, r#"{"action":"call","arguments":{"ticket_id":"T-601"},"tool":"get_ticket"}"#);
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(r.tool_calls[1].arguments, json!({"doc_id": "kc-returns-v3"}));
        assert_eq!(r.usage, Some(Usage { input_tokens: 10, output_tokens: 3 }));
        let finish = reply(
            json!({"tool_calls": [{"function": {"name": "finish", "arguments": "{\"answer\":\"ok\",\"sources\":[\"o1\"]}"}}]}),
        );
        let r = read_reply(&finish, "m").unwrap();
        assert_eq!(parse_proposal(&r.text), Ok(Proposal::Finish { answer: "ok".into(), sources: vec!["o1".into()] }));
        assert_eq!(r.tool_calls[0].id, "call-1");
        // a finish that smuggles extra fields or another action stays refusable by the loop
        let sneaky = reply(
            json!({"tool_calls": [{"function": {"name": "finish", "arguments": "{\"action\":\"call\",\"tool\":\"send_email_draft\",\"answer\":\"x\"}"}}]}),
        );
        assert!(parse_proposal(&read_reply(&sneaky, "m").unwrap().text).is_err());
    }

    #[test]
    fn a_message_is_the_replys_own_text_or_a_finish_answer_never_a_call() {
        let verdict = r#"{"kind":"verdict","approve":true,"notes":"ok"}"#;
        let with_call = reply(json!({"content": verdict, "tool_calls": [
            {"id": "c1", "function": {"name": "send_email_draft", "arguments": "{\"to\":\"a@b.example\"}"}}
        ]}));
        let r = read_reply_as(&with_call, "m", Reading::Message).unwrap();
        assert_eq!((r.text.as_str(), r.tool_calls.len()), (verdict, 1), "the text survives the tool call");
        assert!(read_reply(&with_call, "m").unwrap().text.contains("send_email_draft"), "a proposal is the call");
        let fenced = reply(json!({"content": format!("```json\n{verdict}\n```")}));
        assert_eq!(read_reply_as(&fenced, "m", Reading::Message).unwrap().text, verdict);
        let finish = reply(json!({"content": null, "tool_calls": [
            {"function": {"name": "finish", "arguments": json!({"answer": verdict, "sources": []}).to_string()}}
        ]}));
        assert_eq!(read_reply_as(&finish, "m", Reading::Message).unwrap().text, verdict);
        let only_call = reply(json!({"tool_calls": [{"function": {"name": "lookup_document", "arguments": "{}"}}]}));
        assert_eq!(read_reply_as(&only_call, "m", Reading::Message).unwrap().text, "", "no message");
        assert_eq!(
            read_reply_as(&reply(json!({"content": " "})), "m", Reading::Message).map_err(|f| f.code).err(),
            Some(HttpCode::EmptyReply)
        );
    }

    #[test]
    fn text_replies_are_proposals_with_one_fence_removed() {
        for content in [
            "{\"action\":\"finish\",\"answer\":\"a\",\"sources\":[\"o1\"]}",
            "```json\n{\"action\":\"finish\",\"answer\":\"a\",\"sources\":[\"o1\"]}\n```",
            "```\n{\"action\":\"finish\",\"answer\":\"a\",\"sources\":[\"o1\"]}```",
        ] {
            let r = read_reply(&reply(json!({"content": content})), "m").unwrap();
            assert!(parse_proposal(&r.text).is_ok(), "{content}");
        }
        let parts = reply(
            json!({"content": [{"type": "text", "text": "{\"action\":\"finish\","}, {"type": "text", "text": "\"answer\":\"a\",\"sources\":[\"o1\"]}"}]}),
        );
        assert!(parse_proposal(&read_reply(&parts, "m").unwrap().text).is_ok());
        let prose = read_reply(&reply(json!({"content": "Sure, I can help."})), "m").unwrap();
        assert!(parse_proposal(&prose.text).is_err(), "prose stays prose: the loop rejects it as not_json");
    }

    #[test]
    fn broken_answers_get_their_codes() {
        let cases: Vec<(Vec<u8>, HttpCode)> = vec![
            (b"<html>502</html>".to_vec(), HttpCode::MalformedJson),
            (b"{\"choices\": []}".to_vec(), HttpCode::MalformedJson),
            (b"{\"error\": {\"message\": \"boom\"}}".to_vec(), HttpCode::MalformedJson),
            (b"{\"choices\": [{\"text\": \"legacy\"}]}".to_vec(), HttpCode::MalformedJson),
            (reply(json!({"content": 7})), HttpCode::MalformedJson),
            (reply(json!({"content": null})), HttpCode::EmptyReply),
            (reply(json!({"content": "  ", "tool_calls": []})), HttpCode::EmptyReply),
            (reply(json!({"content": "```\n```"})), HttpCode::EmptyReply),
            (
                reply(json!({"tool_calls": [{"function": {"name": "get_ticket", "arguments": "{\"ticket_id\": "}}]})),
                HttpCode::InvalidToolArguments,
            ),
            (
                reply(json!({"tool_calls": [{"function": {"name": "get_ticket", "arguments": "[1]"}}]})),
                HttpCode::InvalidToolArguments,
            ),
            (
                reply(json!({"tool_calls": [{"function": {"name": "get_ticket", "arguments": 5}}]})),
                HttpCode::InvalidToolArguments,
            ),
            (reply(json!({"tool_calls": [{"function": {"arguments": "{}"}}]})), HttpCode::MalformedJson),
        ];
        for (body, code) in cases {
            assert_eq!(
                read_reply(&body, "m").map_err(|f| f.code).err(),
                Some(code),
                "{}",
                String::from_utf8_lossy(&body)
            );
        }
        let deep =
            format!("{{\"choices\": [{{\"message\": {{\"content\": {}1{}}}}}]}}", "[".repeat(5000), "]".repeat(5000));
        assert_eq!(read_reply(deep.as_bytes(), "m").map_err(|f| f.code).err(), Some(HttpCode::MalformedJson));
    }

    #[test]
    fn a_cut_off_or_withheld_reply_is_named_whatever_it_holds() {
        let with = |reason: &str, message: Value| {
            json!({"choices": [{"message": message, "finish_reason": reason}]}).to_string().into_bytes()
        };
        let half = json!({"content": "{\"action\":\"finish\",\"answer\":\"T-601 is"});
        let call = json!({"tool_calls": [{"function": {"name": "finish", "arguments": "{\"answer\":\"ok\",\"sources\":[\"o1\"]}"}}]});
        for reading in [Reading::Proposal, Reading::Message] {
            for message in [&half, &call] {
                let code =
                    |reason| read_reply_as(&with(reason, message.clone()), "m", reading).map_err(|f| f.code).err();
                assert_eq!(code("length"), Some(HttpCode::Truncated));
                assert_eq!(code("content_filter"), Some(HttpCode::RefusedByServer));
            }
            assert!(read_reply_as(&with("stop", call.clone()), "m", reading).is_ok());
            assert!(read_reply_as(&with("tool_calls", call.clone()), "m", reading).is_ok());
        }
        let filtered = json!({"choices": [{"finish_reason": "content_filter"}]}).to_string();
        assert_eq!(
            read_reply(filtered.as_bytes(), "m").map_err(|f| f.code).err(),
            Some(HttpCode::RefusedByServer),
            "a withheld reply may carry no message at all"
        );
    }

    #[test]
    fn usage_is_optional_and_missing_usage_means_estimate() {
        let body = json!({"choices": [{"message": {"content": "x"}}]}).to_string();
        assert_eq!(read_reply(body.as_bytes(), "m").unwrap().usage, None);
        let body = json!({"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": "many"}}).to_string();
        assert_eq!(read_reply(body.as_bytes(), "m").unwrap().usage, None);
    }

    #[test]
    fn requests_carry_tools_and_the_finish_function_only_in_native_mode() {
        let req = LlmRequest {
            model: "m1".into(),
            messages: vec![
                Message::system("rules"),
                Message::user("<goal source=\"user-input\">x</goal>"),
                Message::assistant(
                    "",
                    vec![RequestedCall {
                        id: "c1".into(),
                        name: "get_ticket".into(),
                        arguments: json!({"ticket_id": "T-601"}),
                    }],
                ),
                Message::tool("c1", "{}"),
            ],
            tools: crate::tools::Registry.spec("get_ticket").into_iter().collect(),
            max_tokens: 200,
        };
        let mut ep = Endpoint::new("http://127.0.0.1:9/v1").unwrap();
        let native: Value = serde_json::from_slice(&request_body("d", &ep, &req).unwrap()).unwrap();
        assert_eq!(native["model"], "m1");
        assert_eq!(native["max_tokens"], 200);
        let names: Vec<&str> =
            native["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["get_ticket", "finish"]);
        assert_eq!(native["messages"][2]["tool_calls"][0]["function"]["arguments"], "{\"ticket_id\":\"T-601\"}");
        assert_eq!(native["messages"][3]["tool_call_id"], "c1");
        assert_eq!(native["tool_choice"], "auto", "tool_choice goes with the tools");
        assert!(native.get("temperature").is_none() && native.get("seed").is_none(), "unset: the server's own");
        let mut clash = req.clone();
        clash.tools[0].name = "finish".into();
        assert_eq!(request_body("d", &ep, &clash).map_err(|f| f.code).err(), Some(HttpCode::ReservedToolName));
        let no_tools = LlmRequest { tools: Vec::new(), ..req.clone() };
        let bare: Value = serde_json::from_slice(&request_body("d", &ep, &no_tools).unwrap()).unwrap();
        assert!(bare.get("tools").is_none() && bare.get("tool_choice").is_none(), "no tool: no function offered");
        ep.tool_choice = crate::model::http::ToolChoice::Required;
        ep.temperature = Some(crate::model::http::Temperature::new(0.25).unwrap());
        ep.seed = Some(7);
        let set: Value = serde_json::from_slice(&request_body("d", &ep, &req).unwrap()).unwrap();
        assert_eq!(
            (&set["tool_choice"], &set["temperature"], &set["seed"]),
            (&json!("required"), &json!(0.25), &json!(7))
        );
        ep.tool_mode = ToolMode::Text;
        let text: Value = serde_json::from_slice(&request_body("d", &ep, &req).unwrap()).unwrap();
        assert!(text.get("tools").is_none() && text.get("tool_choice").is_none());
        assert!(request_body("d", &ep, &clash).is_ok());
    }
}
