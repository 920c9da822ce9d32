//! Reading what a fact is built from (`id`, `status`, `title`) out of a tool result's JSON
//! text. Every tool result is a flat object of strings, so that shape is read directly, in
//! one pass over the bytes with the agent's [`JsonReader`] (the reader of proposals and
//! role messages); any other text (`\u` escapes, numbers, `null`, nested values, arrays, a
//! repeated or missing field, anything malformed) goes to `serde_json`, so the answer is
//! `serde_json::from_str`'s for every text.

use serde::Deserialize;
use std::borrow::Cow;

use crate::agent::JsonReader;

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
    flat(text).or_else(|| serde_json::from_str(text).ok())
}

/// `text` read as [`Seen`] when it is an object whose keys and values are all strings
/// whose escapes are short ones (`\" \\ \/ \b \f \n \r \t`), with no repeated field and
/// `id` present; `None` for every other text (then `serde_json` decides). Where it
/// answers, `serde_json` answers the same: the text is valid JSON it reads field by field
/// (no short escape decodes to a letter, so a key read as `id` was written `id`).
fn flat(text: &str) -> Option<Seen<'_>> {
    let mut r = JsonReader::new(text);
    r.byte(b'{')?;
    let (mut id, mut status, mut title) = (None, None, None);
    loop {
        let key = r.string()?;
        r.byte(b':')?;
        let value = r.string()?;
        let field = match key.as_ref() {
            "id" => Some(&mut id),
            "status" => Some(&mut status),
            "title" => Some(&mut title),
            _ => None,
        };
        if let Some(field) = field {
            // a repeated field is an error: serde decides
            if field.is_some() {
                return None;
            }
            *field = Some(value);
        }
        if r.object_closed()? {
            break;
        }
    }
    if !r.at_end() {
        return None;
    }
    Some(Seen { id: id?, status, title })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Texts like every tool's results, and texts around that shape.
    fn corpus() -> Vec<String> {
        let mut texts: Vec<String> = [
            r#"{"id":"T-602","owner":"bob","status":"open","subject":"Refund","text":"NOTE: x"}"#,
            r#"{"id":"kc-returns-v3","text":"Returns within 30 days.\nKeep the receipt.","title":"Returns (v3)"}"#,
            r#"{"id":"kc-x","snippet":"a \"quoted\" \\ path \/ \b\f\n\r\t end","title":"Garantie, l'été 😀"}"#,
            r#" { "id" : "T-1" , "status" : "closed_won" } "#,
            "{\n\t\"id\":\"T-1\",\r\n\"status\":\"open\"\n}\n",
            r#"{"id":"","status":"","title":""}"#,
            r#"{"id":"T-1"}"#,
            r#"{"status":"open"}"#,
            r#"{}"#,
            r#"{"id":"T-1","id":"T-2"}"#,
            r#"{"id":"T-1","status":"open","status":"closed"}"#,
            r#"{"id":"T-1","x":"a","x":"b"}"#,
            r#"{"id":"T-\u0031"}"#,
            r#"{"\u0069d":"T-1"}"#,
            r#"{"i\nd":"T-1"}"#,
            r#"{"id":"T-1","status":"op\"en"}"#,
            r#"{"id":"T-1","title":"a\\b"}"#,
            r#"{"id":"T-1","text":"\ud83d\ude00"}"#,
            r#"{"id":"T-1","text":"\ud83d"}"#,
            r#"{"id":"T-1","text":"\ude00"}"#,
            r#"{"id":"T-1","text":"\uZZZZ"}"#,
            r#"{"id":"T-1","text":"\x"}"#,
            r#"{"id":"T-1","text":"\'"}"#,
            "{\"id\":\"T-1\",\"text\":\"a\u{1}b\"}",
            "{\"id\":\"T-1\",\"text\":\"tab\there\"}",
            "{\"id\":\"T-1\",\"text\":\"del\u{7f}é\u{80}\u{10FFFF}\"}",
            r#"{"id":"T-1","status":null}"#,
            r#"{"id":null}"#,
            r#"{"id":7}"#,
            r#"{"id":"T-1","n":-1.5e3,"b":true,"f":false,"z":null}"#,
            r#"{"id":"T-1","nested":{"id":"T-9","status":"x"},"list":["a",{"b":[1,2]}]}"#,
            r#"{"id":"T-1","status":["open"]}"#,
            r#"["T-1","open","Title"]"#,
            r#"["T-1"]"#,
            r#"["T-1","open","Title","extra"]"#,
            r#"[]"#,
            r#""T-1""#,
            r#"null"#,
            r#"42"#,
            "",
            "   ",
            r#"{"id":"T-1",}"#,
            r#"{,"id":"T-1"}"#,
            r#"{"id":"T-1""status":"open"}"#,
            r#"{"id" "T-1"}"#,
            r#"{"id":"T-1"}}"#,
            r#"{"id":"T-1"} x"#,
            r#"{"id":"T-1"}{"id":"T-2"}"#,
            r#"{"id":'T-1'}"#,
            r#"{id:"T-1"}"#,
            r#"{"id":"T-1"#,
            "\u{feff}{\"id\":\"T-1\"}",
            "{\"id\":\"T-1\"}\u{a0}",
            r#"{"ID":"T-1","Status":"open"}"#,
            r#"{"id":"T-1","status":"open","title":"t","text":"a long text that spans several eight-byte groups, with é and 😀 inside"}"#,
        ]
        .iter()
        .map(|s| (*s).to_string())
        .collect();
        // results as the tools write them: serde_json's own output of varied values
        for value in [
            "plain",
            "quote \" backslash \\ slash /",
            "line\nbreak\ttab\r\u{8}\u{c}",
            "control \u{1}\u{1f} chars",
            "Unicode é ß 😀 \u{2028}",
            "",
        ] {
            let json = serde_json::json!({"id": "T-7", "status": value, "subject": value, "text": value});
            texts.push(json.to_string());
            texts.push(serde_json::to_string_pretty(&json).unwrap_or_default());
            texts.push(serde_json::json!({"id": value, "title": "Doc", "text": value}).to_string());
        }
        texts
    }

    /// Every prefix of `text`, and `text` with each byte replaced by each of a few bytes
    /// that matter to JSON (where the result is still UTF-8).
    fn mutations(text: &str) -> Vec<String> {
        crate::agent::mutations(
            text,
            &[b'{', b'}', b'[', b'"', b'\\', b':', b',', b' ', b'\n', 0x01, b'u', b'0', b'a', b'/'],
        )
    }

    #[test]
    fn reads_every_text_as_serde_json_does() {
        let mut cases = 0;
        let mut direct = 0;
        for base in corpus() {
            for text in std::iter::once(base.clone()).chain(mutations(&base)) {
                let want: Option<Seen<'_>> = serde_json::from_str(&text).ok();
                assert_eq!(read(&text), want, "{text:?}");
                if let Some(seen) = flat(&text) {
                    assert_eq!(Some(seen), want, "the direct reader answered for {text:?}");
                    direct += 1;
                }
                cases += 1;
            }
        }
        assert!(cases > 10_000 && direct > 1_000, "{cases} texts, {direct} read directly");
    }

    #[test]
    fn tool_results_are_read_directly_and_borrowed() {
        let text = r#"{"id":"kc-returns-v3","text":"Returns within 30 days.\nKeep it.","title":"Returns (v3)"}"#;
        let seen = flat(text).expect("a flat object of strings is read directly");
        assert!(matches!(seen.id, Cow::Borrowed("kc-returns-v3")));
        assert_eq!((seen.status, seen.title.as_deref()), (None, Some("Returns (v3)")));
        // a short escape is decoded as serde_json decodes it; a `\u` escape is left to it
        let escaped = flat(r#"{"id":"a\"b\\c\/d\n"}"#).expect("short escapes are read directly");
        assert!(matches!(escaped.id, Cow::Owned(ref id) if id == "a\"b\\c/d\n"));
        assert_eq!(flat(r#"{"\u0069d":"T-1"}"#), None);
        assert_eq!(read(r#"{"\u0069d":"T-1"}"#).map(|s| s.id.into_owned()), Some("T-1".to_string()));
    }
}
