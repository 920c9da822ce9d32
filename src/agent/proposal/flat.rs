//! The direct reader of a proposal's usual shape: one JSON object holding some of the five
//! members, each named without escapes and present at most once, whose values are strings,
//! a list of strings (`sources`) or an object of strings (`arguments`). It reads the bytes
//! once (a string with escapes twice: to find its end, then to decode it), borrows what it
//! can and decodes the short escapes (`\" \\ \/ \b \f \n \r \t`) itself. Every other
//! text (a `\u` escape, a number, `null`, `true`, deeper nesting, an unknown, repeated or
//! escaped member name, a repeated argument, anything malformed) is left to `serde_json`,
//! so where this reader answers, its [`Raw`] is the very one `serde_json::from_str::<Raw>`
//! reads from the same text (pinned on a generated corpus by
//! `reads_every_proposal_as_serde_json_does`).

use serde_json::{Map, Value};

use super::{Action, Raw};
use crate::agent::json_reader::JsonReader;

/// `text` read as [`Raw`] when it has the usual shape (see the module), else `None`.
pub(super) fn read(text: &str) -> Option<Raw> {
    let mut r = JsonReader::new(text);
    r.byte(b'{')?;
    let mut action = None;
    let mut raw = Raw { action: Action::Other, tool: None, arguments: None, answer: None, sources: None };
    loop {
        let name = next_member(&mut r)?;
        r.byte(b':')?;
        // a repeated member fails serde's read: serde decides
        match name {
            Member::Action if action.is_none() => action = Some(action_value(&mut r)?),
            Member::Tool if raw.tool.is_none() => raw.tool = Some(r.string()?.into_owned()),
            Member::Arguments if raw.arguments.is_none() => raw.arguments = Some(string_object(&mut r)?),
            Member::Answer if raw.answer.is_none() => raw.answer = Some(r.string()?.into_owned()),
            Member::Sources if raw.sources.is_none() => raw.sources = Some(r.strings()?),
            _ => return None,
        }
        if r.object_closed()? {
            break;
        }
    }
    if !r.at_end() {
        return None;
    }
    raw.action = action?;
    Some(raw)
}

/// The members of a proposal.
#[derive(Clone, Copy)]
enum Member {
    Action,
    Tool,
    Arguments,
    Answer,
    Sources,
}

/// Each member's name as a JSON string without escapes, quotes included.
const MEMBERS: [(&[u8], Member); 5] = [
    (br#""action""#, Member::Action),
    (br#""tool""#, Member::Tool),
    (br#""arguments""#, Member::Arguments),
    (br#""answer""#, Member::Answer),
    (br#""sources""#, Member::Sources),
];

/// The member whose name comes next, written without escapes; `None` for any other
/// text (an unknown member fails serde's read; a name with an escape is left to it).
fn next_member(r: &mut JsonReader<'_>) -> Option<Member> {
    let &(_, member) = MEMBERS.iter().find(|(name, _)| r.literal(name))?;
    Some(member)
}

/// The `action` member's value: a string, `call`, `finish` or any other.
fn action_value(r: &mut JsonReader<'_>) -> Option<Action> {
    if r.literal(br#""call""#) {
        return Some(Action::Call);
    }
    if r.literal(br#""finish""#) {
        return Some(Action::Finish);
    }
    // no string with an escape decodes to `call` or `finish`
    r.string().map(|_| Action::Other)
}

/// A JSON object whose values are all strings, each key at most once, as a
/// [`Value::Object`].
fn string_object(r: &mut JsonReader<'_>) -> Option<Value> {
    r.byte(b'{')?;
    let mut map = Map::new();
    if r.peek_past(b'}') {
        return Some(Value::Object(map));
    }
    loop {
        let key = r.string()?.into_owned();
        r.byte(b':')?;
        let value = Value::String(r.string()?.into_owned());
        // serde's value keeps the last of a repeated key: left to serde all the same
        if map.insert(key, value).is_some() {
            return None;
        }
        if r.object_closed()? {
            return Some(Value::Object(map));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{MAX_PROPOSAL_BYTES, ProposalError, by_serde, checked, parse_proposal};
    use super::*;
    use crate::agent::MAX_ANSWER_CHARS;

    /// The parser with `serde_json` alone: the reference the direct reader must agree with.
    fn by_serde_alone(text: &str) -> Result<super::super::Proposal, ProposalError> {
        if text.len() > MAX_PROPOSAL_BYTES {
            return Err(ProposalError::InvalidProposal);
        }
        checked(by_serde(text)?)
    }

    /// Hand-written texts: the usual shapes and every way around them.
    fn edge_cases() -> Vec<String> {
        let mut texts: Vec<String> = [
            r#"{"action":"call","tool":"get_ticket","arguments":{"ticket_id":"T-1001"}}"#,
            r#"{"action":"call","tool":"lookup_document","arguments":{"doc_id":"kc-returns-v3"}}"#,
            r#"{"action":"finish","answer":"T-1001 is open","sources":["o1","o2"]}"#,
            r#"{"action":"finish","answer":"{\"kind\":\"finding\",\"claim\":\"T-1 is \\\"open\\\"\"}","sources":["o1"]}"#,
            r#"{"action":"call","tool":"send_email_draft","arguments":{"to":"a@b.c","subject":"s","body":"b","idempotency_key":"k-1"}}"#,
            r#"{"arguments":{"ticket_id":"T-1"},"tool":"get_ticket","action":"call"}"#,
            r#"{"sources":["o1"],"answer":"x","action":"finish"}"#,
            r#" { "action" : "call" , "tool" : "t" , "arguments" : { "a" : "b" , "c" : "d" } } "#,
            "\n{\n\t\"action\":\"finish\",\r\n\"answer\":\"x\",\n\"sources\":[ \"o1\" ,\t\"o2\" ]\n}\n",
            r#"{"action":"call","tool":"t","arguments":{}}"#,
            r#"{"action":"call","tool":"t","arguments":{ }}"#,
            r#"{"action":"call","tool":"t"}"#,
            r#"{"action":"call","tool":""}"#,
            r#"{"action":"call"}"#,
            r#"{"action":"finish"}"#,
            r#"{"action":"finish","answer":""}"#,
            r#"{"action":"finish","answer":"x","sources":[]}"#,
            r#"{"action":"finish","answer":"x","sources":[ ]}"#,
            r#"{"action":"finish","answer":"x","tool":"","arguments":{}}"#,
            r#"{"action":"finish","answer":"x","tool":"t"}"#,
            r#"{"action":"finish","answer":"x","arguments":{"a":"b"}}"#,
            r#"{"action":"call","tool":"t","answer":"x"}"#,
            r#"{"action":"call","tool":"t","answer":""}"#,
            r#"{"action":"call","tool":"t","sources":["o1"]}"#,
            r#"{"action":"call","tool":"t","sources":[]}"#,
            r#"{"action":"delegate","tool":"t"}"#,
            r#"{"action":"Call","tool":"t"}"#,
            r#"{"action":"","tool":"t"}"#,
            r#"{"action":"c\"all","tool":"t"}"#,
            r#"{"action":"c\u0061ll","tool":"t"}"#,
            r#"{"\u0061ction":"call","tool":"t"}"#,
            r#"{"act\nion":"call","tool":"t"}"#,
            r#"{"action":"call","tool":"t\/u"}"#,
            r#"{"action":"call","tool":"get_ticket","arguments":{"ticket_id":"T-1\"0\\0\/1\b\f\n\r\t"}}"#,
            r#"{"action":"call","tool":"t","arguments":{"k\"ey":"v"}}"#,
            r#"{"action":"call","tool":"t","arguments":{"":""}}"#,
            r#"{"action":"call","tool":"t","arguments":{"__proto__":"x"}}"#,
            r#"{"action":"call","tool":"t","arguments":{"__proto__":{"admin":true}}}"#,
            r#"{"action":"call","tool":"t","arguments":{"constructor":"x","prototype":"y"}}"#,
            r#"{"action":"call","tool":"t","__proto__":{"grant":true}}"#,
            r#"{"__proto__":"x","action":"call","tool":"t"}"#,
            r#"{"action":"call","tool":"t","grant":true}"#,
            r#"{"action":"call","tool":"t","Tool":"u"}"#,
            r#"{"action":"call","action":"finish","answer":"x","sources":["o1"]}"#,
            r#"{"action":"finish","answer":"x","sources":["o1"],"action":"call","tool":"t"}"#,
            r#"{"action":"call","tool":"a","tool":"b"}"#,
            r#"{"action":"call","tool":"a","tool":7}"#,
            r#"{"action":"call","tool":7,"tool":"a"}"#,
            r#"{"action":"call","tool":"t","arguments":{"a":"1"},"arguments":{"b":"2"}}"#,
            r#"{"action":"finish","answer":"x","answer":"y","sources":["o1"]}"#,
            r#"{"action":"finish","answer":"x","sources":["o1"],"sources":["o2"]}"#,
            r#"{"action":"call","tool":"t","arguments":{"a":"1","a":"2"}}"#,
            r#"{"action":"call","tool":"t","arguments":{"a":"1","b":"2","a":"3"}}"#,
            r#"{"action":"call","tool":"t","arguments":{"a":"1","a":2}}"#,
            r#"{"action":"call","tool":"t","arguments":{"n":1}}"#,
            r#"{"action":"call","tool":"t","arguments":{"n":-0}}"#,
            r#"{"action":"call","tool":"t","arguments":{"n":1.5e3}}"#,
            r#"{"action":"call","tool":"t","arguments":{"n":123456789012345678901234567890}}"#,
            r#"{"action":"call","tool":"t","arguments":{"n":1e400}}"#,
            r#"{"action":"call","tool":"t","arguments":{"n":-1e-400}}"#,
            r#"{"action":"call","tool":"t","arguments":{"n":01}}"#,
            r#"{"action":"call","tool":"t","arguments":{"b":true,"f":false,"z":null}}"#,
            r#"{"action":"call","tool":"t","arguments":{"l":["a"],"o":{"p":"q"}}}"#,
            r#"{"action":"call","tool":"t","arguments":null}"#,
            r#"{"action":"call","tool":"t","arguments":[]}"#,
            r#"{"action":"call","tool":"t","arguments":"x"}"#,
            r#"{"action":"call","tool":null}"#,
            r#"{"action":null}"#,
            r#"{"action":7}"#,
            r#"{"action":["call"]}"#,
            r#"{"action":"finish","answer":null,"sources":null}"#,
            r#"{"action":"finish","answer":7}"#,
            r#"{"action":"finish","answer":"x","sources":"o1"}"#,
            r#"{"action":"finish","answer":"x","sources":[1]}"#,
            r#"{"action":"finish","answer":"x","sources":[null]}"#,
            r#"{"action":"finish","answer":"x","sources":[["o1"]]}"#,
            r#"{"action":"finish","answer":"x","sources":["o1",]}"#,
            r#"{"action":"finish","answer":"x","sources":[,"o1"]}"#,
            r#"{"action":"finish","answer":"x","sources":["o1" "o2"]}"#,
            r#"{"action":"finish","answer":"x","sources":["o\"1","o\\2","o\u0033"]}"#,
            r#"{"action":"finish","answer":"Garantie, l'été 😀 \u00e9 ß","sources":["o1"]}"#,
            r#"{"action":"finish","answer":"\ud83d\ude00","sources":["o1"]}"#,
            r#"{"action":"finish","answer":"\ud83d","sources":["o1"]}"#,
            r#"{"action":"finish","answer":"\ude00","sources":["o1"]}"#,
            r#"{"action":"finish","answer":"\uZZZZ","sources":["o1"]}"#,
            r#"{"action":"finish","answer":"\x","sources":["o1"]}"#,
            r#"{"action":"finish","answer":"\'","sources":["o1"]}"#,
            r#"{"action":"finish","answer":"trailing \","sources":["o1"]}"#,
            r#"{"action":"finish","answer":"\\","sources":["o1"]}"#,
            r#"{"action":"finish","answer":"\\\\\"\"","sources":["o1"]}"#,
            "{\"action\":\"finish\",\"answer\":\"a\u{1}b\",\"sources\":[\"o1\"]}",
            "{\"action\":\"finish\",\"answer\":\"tab\there\",\"sources\":[\"o1\"]}",
            "{\"action\":\"finish\",\"answer\":\"del\u{7f}é\u{80}\u{10FFFF}\u{2028}\",\"sources\":[\"o1\"]}",
            r#"{"action":"call","tool":"t",}"#,
            r#"{,"action":"call","tool":"t"}"#,
            r#"{"action":"call""tool":"t"}"#,
            r#"{"action" "call"}"#,
            r#"{"action":"call","tool":"t"}}"#,
            r#"{"action":"call","tool":"t"} x"#,
            r#"{"action":"call","tool":"t"}{"action":"call","tool":"t"}"#,
            r#"{"action":'call',"tool":"t"}"#,
            r#"{action:"call","tool":"t"}"#,
            r#"{"action":"call","tool":"get_ti"#,
            r#"{"action":"call","tool":"t","arguments":{"a":"b"}"#,
            r#"{"action":"call","tool":"t","arguments":{"a":"b",}}"#,
            r#"{"action":"call","tool":"t","arguments":{"a"}}"#,
            r#"{"action":"call","tool":"t","arguments":{"a":}}"#,
            r#"{"action":"call","tool":"t","arguments":{a:"b"}}"#,
            r#"["call","t",{},null,null]"#,
            r#"["finish",null,null,"x",["o1"]]"#,
            r#""call""#,
            "null",
            "42",
            "{}",
            "[]",
            "",
            "   ",
            "Sure, I can help.",
            "\u{feff}{\"action\":\"call\",\"tool\":\"t\"}",
            "{\"action\":\"call\",\"tool\":\"t\"}\u{a0}",
            "\u{b}{\"action\":\"call\",\"tool\":\"t\"}",
            "{\"action\":\"call\",\"tool\":\"t\"}\u{c}",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .collect();
        // sizes around the limits: the tool name, the answer and the text itself
        for n in [63, 64, 65] {
            texts.push(format!(r#"{{"action":"call","tool":"{}"}}"#, "t".repeat(n)));
        }
        for unit in ["a", "é", "\\\"", "\\n"] {
            for n in [MAX_ANSWER_CHARS - 1, MAX_ANSWER_CHARS, MAX_ANSWER_CHARS + 1] {
                texts.push(format!(r#"{{"action":"finish","answer":"{}","sources":["o1"]}}"#, unit.repeat(n)));
            }
        }
        let frame = r#"{"action":"finish","answer":"","sources":["o1"]}"#.len();
        for n in [MAX_PROPOSAL_BYTES - frame - 1, MAX_PROPOSAL_BYTES - frame, MAX_PROPOSAL_BYTES - frame + 1] {
            texts.push(format!(r#"{{"action":"finish","answer":"{}","sources":["o1"]}}"#, "a".repeat(n)));
        }
        let many: Vec<String> = (0..25).map(|i| format!("\"o{i}\"")).collect();
        for n in [20, 21] {
            texts.push(format!(r#"{{"action":"finish","answer":"x","sources":[{}]}}"#, many[..n].join(",")));
        }
        // deep nesting: within serde_json's limit and past it
        for depth in [10, 127, 128, 200] {
            let (open, close) = ("{\"a\":".repeat(depth), "}".repeat(depth));
            texts.push(format!(r#"{{"action":"call","tool":"t","arguments":{open}"x"{close}}}"#));
            texts.push(format!("{}{}", "[".repeat(depth), "]".repeat(depth)));
        }
        // proposals as serde_json writes them, of varied values
        for value in [
            "plain",
            "quote \" backslash \\ slash /",
            "line\nbreak\ttab\r\u{8}\u{c}",
            "control \u{1}\u{1f}",
            "é ß 😀 \u{2028}",
            "",
        ] {
            let call = serde_json::json!({"action": "call", "tool": "t", "arguments": {"k": value, value: "v"}});
            let finish = serde_json::json!({"action": "finish", "answer": value, "sources": [value, "o1"]});
            for v in [call, finish] {
                texts.push(v.to_string());
                texts.push(serde_json::to_string_pretty(&v).unwrap_or_default());
            }
        }
        texts
    }

    /// Every prefix of `text`, and `text` with each byte replaced by each of a few bytes
    /// that matter to JSON (where the result is still UTF-8).
    fn mutations(text: &str) -> Vec<String> {
        crate::agent::mutations(
            text,
            &[b'{', b'}', b'[', b']', b'"', b'\\', b':', b',', b' ', b'\n', 0x01, b'u', b'0', b'n', b'/'],
        )
    }

    /// Texts built member by member: each member in each of a few forms, in two orders,
    /// some repeated.
    fn combinations() -> Vec<String> {
        let actions = [r#""call""#, r#""finish""#, r#""other""#, "null"];
        let tools = ["", r#","tool":"get_ticket""#, r#","tool":"""#, r#","tool":"a\"b""#, r#","tool":1"#];
        let arguments = [
            "",
            r#","arguments":{"ticket_id":"T-1"}"#,
            r#","arguments":{}"#,
            r#","arguments":{"a":"1","b":"x\ny"}"#,
            r#","arguments":{"a":"1","a":"2"}"#,
            r#","arguments":{"a":1}"#,
        ];
        let answers = ["", r#","answer":"x""#, r#","answer":"""#, r#","answer":"say \"hi\"""#, r#","answer":false"#];
        let sources =
            ["", r#","sources":["o1","o2"]"#, r#","sources":[]"#, r#","sources":["o\\1"]"#, r#","sources":{}"#];
        let mut texts = Vec::new();
        for a in actions {
            for t in tools {
                for g in arguments {
                    for w in answers {
                        for s in sources {
                            texts.push(format!(r#"{{"action":{a}{t}{g}{w}{s}}}"#));
                            texts.push(format!(r#"{{"action":{a}{s}{w}{g}{t}{t}}}"#));
                        }
                    }
                }
            }
        }
        texts
    }

    #[test]
    fn reads_every_proposal_as_serde_json_does() {
        let mut cases = 0;
        let mut direct = 0;
        let corpus = edge_cases().into_iter().flat_map(|base| {
            let mutated = if base.len() < 400 { mutations(&base) } else { Vec::new() };
            std::iter::once(base).chain(mutated)
        });
        for text in corpus.chain(combinations()) {
            let want = by_serde(&text);
            if let Some(raw) = read(&text) {
                assert_eq!(Ok(&raw), want.as_ref(), "the direct reader answered for {text:?}");
                direct += 1;
            }
            assert_eq!(parse_proposal(&text), by_serde_alone(&text), "{text:?}");
            cases += 1;
        }
        assert!(cases > 10_000 && direct > 1_000, "{cases} texts, {direct} read directly");
    }

    #[test]
    fn the_usual_proposals_are_read_directly() {
        let call = r#"{"action":"call","tool":"get_ticket","arguments":{"ticket_id":"T-1001"}}"#;
        let raw = read(call).expect("a call with one string argument is read directly");
        assert_eq!(raw.action, Action::Call);
        assert_eq!(raw.arguments, Some(serde_json::json!({"ticket_id": "T-1001"})));
        let finish = r#"{"action":"finish","answer":"{\"kind\":\"finding\",\"note\":\"a\\b\"}","sources":["o1","o2"]}"#;
        let raw = read(finish).expect("a finish whose answer has short escapes is read directly");
        assert_eq!(raw.answer.as_deref(), Some(r#"{"kind":"finding","note":"a\b"}"#));
        assert_eq!(raw.sources, Some(vec!["o1".to_string(), "o2".to_string()]));
        // a `\u` escape, a number, a repeated member: serde_json reads them
        for text in [
            r#"{"action":"finish","answer":"\u00e9","sources":["o1"]}"#,
            r#"{"action":"call","tool":"t","arguments":{"n":1}}"#,
            r#"{"action":"call","tool":"a","tool":"b"}"#,
        ] {
            assert_eq!(read(text), None, "{text}");
            assert!(by_serde(text).is_ok(), "{text}");
        }
    }
}
