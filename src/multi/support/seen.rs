//! Reading what a fact is built from (`id`, `status`, `title`) out of a tool result's JSON
//! text. Every tool result is a flat object of strings, so that shape is read directly, in
//! one pass over the bytes; any other text (escaped keys or fields, `\u` escapes, numbers,
//! `null`, nested values, arrays, a repeated or missing field, anything malformed) goes to
//! `serde_json`, so the answer is `serde_json::from_str`'s for every text.

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
    flat(text).or_else(|| serde_json::from_str(text).ok())
}

/// `text` read as [`Seen`] when it is an object whose keys and values are all strings,
/// with no escape in a key or in the three fields, no `\u` escape and no repeated field,
/// and `id` present; `None` for every other text (then `serde_json` decides). Where it
/// answers, `serde_json` answers the same: the text is valid JSON it reads field by field.
fn flat(text: &str) -> Option<Seen<'_>> {
    let bytes = text.as_bytes();
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_space(bytes, at + 1);
    let (mut id, mut status, mut title) = (None, None, None);
    loop {
        let (key, plain, end) = string(text, at)?;
        if !plain {
            return None;
        }
        at = skip_space(bytes, end);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        let (value, plain, end) = string(text, skip_space(bytes, at + 1))?;
        let field = match key {
            "id" => Some(&mut id),
            "status" => Some(&mut status),
            "title" => Some(&mut title),
            _ => None,
        };
        if let Some(field) = field {
            // an escaped field would be decoded, a repeated one is an error: serde decides
            if !plain || field.is_some() {
                return None;
            }
            *field = Some(value);
        }
        at = skip_space(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_space(bytes, at + 1),
            Some(b'}') => break,
            _ => return None,
        }
    }
    if skip_space(bytes, at + 1) != bytes.len() {
        return None;
    }
    Some(Seen { id: Cow::Borrowed(id?), status: status.map(Cow::Borrowed), title: title.map(Cow::Borrowed) })
}

/// The first byte at or after `at` that is not JSON whitespace (or the length).
fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\t' | b'\r') = bytes.get(at) {
        at += 1;
    }
    at
}

/// The JSON string that starts at byte `at` of `text`: its raw contents (between the
/// quotes, escapes not decoded), whether it has no escape, and where it ends (after the
/// closing quote). `None` unless it is a well-formed string whose escapes are all one
/// of `\" \\ \/ \b \f \n \r \t` (a control character or a `\u` escape gives `None`).
fn string(text: &str, at: usize) -> Option<(&str, bool, usize)> {
    let bytes = text.as_bytes();
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut plain = true;
    let mut from = at + 1;
    loop {
        let stop = next_stop(bytes, from)?;
        match bytes.get(stop)? {
            // `"` is ASCII, so both ends are character boundaries
            b'"' => return Some((text.get(at + 1..stop)?, plain, stop + 1)),
            b'\\' if matches!(bytes.get(stop + 1)?, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                plain = false;
                from = stop + 2;
            }
            _ => return None,
        }
    }
}

/// Where the first `"`, `\` or control character (below 0x20) at or after `from` is: the
/// bytes a JSON string escapes, found by the tools' scan that writes tool results.
fn next_stop(bytes: &[u8], from: usize) -> Option<usize> {
    let at = crate::tools::next_escape(bytes, from);
    (at < bytes.len()).then_some(at)
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
        let mut out: Vec<String> =
            (0..text.len()).filter(|&i| text.is_char_boundary(i)).map(|i| text[..i].to_string()).collect();
        let bytes = text.as_bytes();
        for i in 0..bytes.len() {
            for b in [b'{', b'}', b'[', b'"', b'\\', b':', b',', b' ', b'\n', 0x01, b'u', b'0', b'a', b'/'] {
                let mut changed = bytes.to_vec();
                changed[i] = b;
                if let Ok(s) = String::from_utf8(changed) {
                    out.push(s);
                }
            }
        }
        out
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
        // an escaped field is left to serde_json, which decodes it
        assert_eq!(flat(r#"{"id":"a\"b"}"#), None);
        assert_eq!(read(r#"{"id":"a\"b"}"#).map(|s| s.id.into_owned()), Some("a\"b".to_string()));
    }

    #[test]
    fn the_stop_scan_finds_the_first_quote_backslash_or_control_byte() {
        let stops = |b: u8| matches!(b, b'"' | b'\\' | 0..=0x1f);
        let alphabet =
            [b'a', b'"', b'\\', 0x00, 0x1f, 0x20, 0x21, 0x7f, 0x80, 0x9f, 0xa2, 0xdc, 0xff, b'#', b'[', b']'];
        // a fixed pseudo-random sequence of texts: sparse and dense stops, high bytes
        let mut seed = 0x9e37_79b9_u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 16) as usize
        };
        for _ in 0..5_000 {
            let len = next() % 40;
            let dense = next() % 4 == 0;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    if dense || next() % 8 == 0 {
                        alphabet[next() % alphabet.len()]
                    } else {
                        b'a' + (next() % 26) as u8
                    }
                })
                .collect();
            for from in 0..=len + 1 {
                let want = bytes.get(from..).and_then(|rest| rest.iter().position(|&c| stops(c))).map(|i| i + from);
                assert_eq!(next_stop(&bytes, from), want, "{bytes:?} from {from}");
            }
        }
    }
}
