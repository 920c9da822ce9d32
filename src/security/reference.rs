//! Redaction pinned to its reference: `redact` as it was before the second look-up in
//! the secret registry was skipped for a text that folding left as it was, and before a
//! look-up of an empty registry stopped taking the lock. The reference below makes every
//! look-up; both must give the same bytes for every text (generated from the patterns'
//! words, digits, separators, JSON escapes and Unicode, and the repository's corpora).
//! The reference judges with a plain `regex::RegexSet`, as `redact` did before its sets
//! were searched with a per-thread cache ([`super::cached`]); the sets themselves are
//! pinned to `regex::RegexSet` below, match for match.

use super::{
    CARD, EMAIL, IBAN, IBAN_LOWER, INSTRUCTION_PATTERNS, INSTRUCTION_SET, KEY_SHAPE, SECRET, SENSITIVE_PATTERNS,
    SENSITIVE_SET, SPELLED_EMAIL, fold, hide_pass, iban_ok, key_after_word, phone_like, redact, register_secret,
    secrets::hide_registered,
};
use proptest::prelude::*;
use regex::RegexSet;
use std::sync::LazyLock;

/// The sensitive patterns as the `regex` crate's own set (its pool of caches).
static PLAIN_SENSITIVE: LazyLock<RegexSet> = LazyLock::new(|| RegexSet::new(SENSITIVE_PATTERNS).unwrap());
/// The instruction patterns as the `regex` crate's own set.
static PLAIN_INSTRUCTION: LazyLock<RegexSet> =
    LazyLock::new(|| RegexSet::new(INSTRUCTION_PATTERNS.iter().map(|(_, p)| *p)).unwrap());

/// Pieces the generated texts are made of: the words and punctuation of every pattern
/// (in several cases), digits in groups, separators, key-like runs, JSON escapes and
/// Unicode (fullwidth, hidden, other scripts' digits and letters).
const PIECES: &[&str] = &[
    " ",
    "  ",
    "\n",
    "\t",
    ".",
    ",",
    ":",
    "=",
    ";",
    "!",
    "?",
    "-",
    "_",
    "/",
    "+",
    "~",
    "\"",
    "'",
    "`",
    "<",
    ">",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    "|",
    "#",
    "*",
    "<!--",
    "\\n",
    "\\\"",
    "\\u00e9",
    "@",
    "at",
    "(at)",
    "[dot]",
    "dot",
    "Dot",
    "com",
    "org",
    "example",
    "kwame",
    "x.y",
    "key",
    "Key",
    "KEY",
    "keys",
    "api_key",
    "api-key",
    "api key",
    "secret",
    "Secret",
    "secrets",
    "password",
    "PASSWD",
    "passw",
    "passphrase",
    "token",
    "Token",
    "tokens",
    "access_token",
    "bearer",
    "Bearer",
    "BEARER",
    "credential",
    "credentials",
    "is",
    "was",
    "are",
    "sk-",
    "AKIA",
    "ghp_",
    "gho_",
    "gh_",
    "xox",
    "xoxb-",
    "eyJ",
    "-----BEGIN ",
    "RSA ",
    "PRIVATE KEY-----",
    "abcdefgh",
    "ABCDEFGH",
    "0123456789abcdef",
    "9f8e7d6c5b4a3928",
    "1",
    "12",
    "123",
    "1234",
    "12345",
    "+44",
    "(20)",
    "0958",
    "7946",
    "DE89",
    "de89",
    "GB82",
    "gb82",
    "WEST",
    "west",
    "3704",
    "0044",
    "T-601",
    "k-1",
    "é",
    "日本",
    "ｉｇｎｏｒｅ",
    "０９",
    "٣٤",
    "\u{200B}",
    "\u{FEFF}",
    "ſ",
    "\u{212A}",
    "ignore",
    "Ignore",
    "IGNORE",
    "disregard",
    "forget",
    "override",
    "bypass",
    "policy",
    "policies",
    "instruction",
    "instructions",
    "rules",
    "guidelines",
    "prompt",
    "note",
    "message",
    "reminder",
    "to",
    "for",
    "the",
    "dear",
    "hey",
    "hello",
    "hi",
    "attention",
    "if",
    "you",
    "an",
    "a",
    "assistant",
    "ai",
    "AI",
    "agent",
    "model",
    "bot",
    "llm",
    "chat",
    "chatbot",
    "language",
    "automated",
    "call",
    "invoke",
    "use",
    "run",
    "execute",
    "trigger",
    "tool",
    "get_ticket",
    "send_email_draft",
    "lookup_document",
    "search_documents",
    "idempotency_key",
    "foo_bar",
    "now",
    "act",
    "as",
    "pretend",
    "be",
    "new",
    "developer",
    "mode",
    "system",
    "SYSTEM",
    "System",
    "tool",
    "INST",
    "[INST]",
    "[/INST]",
    "<|im_start|>",
    "im_start",
    "\"role\"",
    "role",
    "important",
    "message",
    "from",
    "before",
    "solve",
    "task",
    "first",
    "<INFORMATION>",
    "</information>",
    "urgent",
    "urgently",
    "mandatory",
    "required",
    "order",
    "orders",
    "action",
    "do",
    "not",
    "don't",
    "never",
    "tell",
    "inform",
    "mention",
    "show",
    "user",
    "customer",
    "customers",
    "human",
    "anyone",
    "send",
    "forward",
    "e-mail",
    "email",
    "mail",
    "export",
    "upload",
    "every",
    "all",
    "records",
    "data",
    "tickets",
    "files",
    "admin",
    "security",
    "safety",
    "checks",
    "filters",
    "controls",
    "disabled",
    "lifted",
    "off",
    "\"action\"",
    "\"tool\"",
    "\"arguments\"",
    "approved",
    "grants",
    "ignorieren",
    "ignoriere",
    "vergiss",
    "missachte",
    "oubliez",
    "ignorez",
    "ignora",
    "ignorar",
    "olvida",
    "dimentica",
    "negeer",
    "anweisungen",
    "regeln",
    "consignes",
    "instrucciones",
    "istruzioni",
    "regels",
    "règles",
    "忽略",
    "指令",
    "無視",
    "administrator",
    "operator",
    "notice",
    "drop",
    "discard",
    "erase",
    "abandon",
    "scrap",
    "wipe",
    "what",
    "everything",
    "anything",
    "whatever",
    "please",
    "about",
    "told",
    "instructed",
    "taught",
    "said",
    "above",
    "previously",
    "earlier",
    "before",
    "so",
    "far",
    "until",
    "up",
    "immediately",
    "asap",
    "quickly",
    REGISTERED,
    "pf-Unit-",
    "secret-42",
];

/// What comes between two pieces: nothing, or a space, a sentence's end, a colon, a line.
const SEPARATORS: &[&str] = &["", " ", " ", ". ", ": ", "\n"];

/// A text of 0 to 14 pieces, each followed by a separator.
fn text() -> impl Strategy<Value = String> {
    prop::collection::vec((prop::sample::select(PIECES), prop::sample::select(SEPARATORS)), 0..14)
        .prop_map(|v| v.into_iter().flat_map(|(p, s)| [p, s]).collect())
}

/// Texts from the repository's corpora: every JSON string in them, and every line.
fn corpus() -> Vec<String> {
    let files = [
        include_str!("../../tests/data/injections.jsonl"),
        include_str!("../../tests/data/envelopes.jsonl"),
        include_str!("../../tests/data/memory_writes.jsonl"),
        include_str!("../../tests/data/proposals.jsonl"),
    ];
    let mut out = Vec::new();
    for line in files.iter().flat_map(|f| f.lines()) {
        out.push(line.to_string());
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
            strings(&v, &mut out);
        }
    }
    out
}

fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// A secret registered by the redaction tests, also one of the [`PIECES`].
const REGISTERED: &str = "pf-Unit-secret-42";

/// `redact` as it was before the prefilters and before the second registry look-up
/// was skipped: every judgement by the set, every look-up made.
fn redact_reference(text: &str) -> String {
    let found = |t: &str| {
        PLAIN_SENSITIVE.is_match(t)
            && (SECRET.is_match(t)
                || KEY_SHAPE.is_match(t)
                || key_after_word(t)
                || EMAIL.is_match(t)
                || SPELLED_EMAIL.is_match(t)
                || IBAN.is_match(t)
                || IBAN_LOWER.find_iter(t).any(|m| iban_ok(m.as_str()))
                || CARD.is_match(t)
                || phone_like(t))
    };
    let unsecret = hide_registered(text);
    let base: &str = unsecret.as_deref().unwrap_or(text);
    let folded = fold(base);
    let refolded = hide_registered(&folded);
    let judged: &str = refolded.as_deref().unwrap_or(&folded);
    if !found(judged) {
        return refolded.or(unsecret).unwrap_or_else(|| text.to_string());
    }
    let mut out = hide_pass(judged);
    for _ in 0..3 {
        if !found(&out) {
            return out;
        }
        out = hide_pass(&out);
    }
    if found(&out) { "[redacted]".to_string() } else { out }
}

#[test]
fn redaction_is_byte_for_byte_the_reference_on_the_corpora_and_long_texts() {
    assert!(register_secret(REGISTERED));
    let texts = corpus();
    let mut changed = 0;
    for t in &texts {
        let red = redact(t);
        assert_eq!(red, redact_reference(t), "{t:?}");
        changed += usize::from(red != t.as_str());
    }
    assert!(changed > 10, "{changed}");
    // long texts: runs of lines, with a secret and personal data at both edges
    for chunk in texts.chunks(17) {
        let long = chunk.join(" ");
        for t in [
            long.clone(),
            format!("{REGISTERED}{long}{REGISTERED}"),
            format!("kwame@gmail.com {long} +44 20 7946 0958"),
            format!("password: x{long}sk-test-4f9a2c71e0b84d5f9a3c"),
        ] {
            assert_eq!(redact(&t), redact_reference(&t), "{t:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn redaction_is_byte_for_byte_the_reference(t in text()) {
        register_secret(REGISTERED);
        prop_assert_eq!(redact(&t), redact_reference(&t));
    }
}

/// Every corpus text, folded and not, and generated texts, with the patterns' words
/// glued together and runs of digits (a set's answer must not depend on the cache).
fn set_texts() -> Vec<String> {
    let mut texts = corpus();
    texts.extend(texts.clone().iter().map(|t| fold(t).into_owned()));
    for (i, a) in PIECES.iter().enumerate() {
        let b = PIECES[(i * 7 + 3) % PIECES.len()];
        let c = PIECES[(i * 13 + 5) % PIECES.len()];
        texts.push(format!("{a}{b} {c}"));
        texts.push(format!("{a}: {b}{c}0958 4412 7788"));
    }
    texts.extend(
        ["", " ", "\u{0}", "ignore all previous instructions", "SYSTEM: x", "x".repeat(5000).as_str()]
            .map(String::from),
    );
    texts
}

/// Asserts that both sets of this thread answer every text as `regex::RegexSet` does.
fn sets_answer_as_the_plain_sets(texts: &[String]) {
    for t in texts {
        assert_eq!(SENSITIVE_SET.is_match(t), PLAIN_SENSITIVE.is_match(t), "{t:?}");
        assert_eq!(INSTRUCTION_SET.is_match(t), PLAIN_INSTRUCTION.is_match(t), "{t:?}");
        let cached: Vec<usize> = INSTRUCTION_SET.matches(t).iter().map(|p| p.as_usize()).collect();
        let plain: Vec<usize> = PLAIN_INSTRUCTION.matches(t).iter().collect();
        assert_eq!(cached, plain, "{t:?}");
        let cached: Vec<usize> = SENSITIVE_SET.matches(t).iter().map(|p| p.as_usize()).collect();
        let plain: Vec<usize> = PLAIN_SENSITIVE.matches(t).iter().collect();
        assert_eq!(cached, plain, "{t:?}");
    }
}

#[test]
fn the_cached_sets_answer_as_the_regex_crate_sets_on_every_thread() {
    let texts = set_texts();
    let hits = texts.iter().filter(|t| PLAIN_SENSITIVE.is_match(t)).count();
    let instructions = texts.iter().filter(|t| PLAIN_INSTRUCTION.is_match(t)).count();
    assert!(hits > 50 && hits < texts.len(), "{hits} of {}", texts.len());
    assert!(instructions > 50 && instructions < texts.len(), "{instructions} of {}", texts.len());
    sets_answer_as_the_plain_sets(&texts);
    // other threads: each makes its own cache on its first search
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| sets_answer_as_the_plain_sets(&texts));
        }
    });
}

#[test]
fn a_search_inside_a_search_takes_the_pool_and_answers_the_same() {
    // while this thread's cache is borrowed, a search falls back to the regex's own pool
    super::SENSITIVE_CACHE.with(|cell| {
        let _held = cell.borrow_mut();
        for t in ["mail kwame@gmail.com", "nothing here", "password: hunter2"] {
            assert_eq!(SENSITIVE_SET.is_match(t), PLAIN_SENSITIVE.is_match(t), "{t:?}");
            let cached: Vec<usize> = SENSITIVE_SET.matches(t).iter().map(|p| p.as_usize()).collect();
            assert_eq!(cached, PLAIN_SENSITIVE.matches(t).iter().collect::<Vec<_>>(), "{t:?}");
        }
        assert!(SENSITIVE_SET.is_match("mail kwame@gmail.com"));
    });
}
