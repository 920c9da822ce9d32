//! Text shown on a terminal. Untrusted text (a model's answer, a results file's lines, a
//! file's contents quoted in an error) may hold escape sequences that move the cursor,
//! erase lines, set the window title or write the clipboard (OSC 52), and characters
//! that render as nothing. [`terminal_safe`] writes every such character as a visible
//! escape (`\u{1b}`), so what a person reads is every character that was there; line feeds
//! and tabs stay. The binary prints everything through it.

use std::borrow::Cow;
use std::fmt::Write;

/// True for a character a terminal must not be handed as it is: a control character
/// (C0 but line feed and tab, DEL, C1), a line or paragraph separator, or a character
/// that renders as nothing ([`super::is_hidden`]).
fn unsafe_for_terminal(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || matches!(c, '\u{2028}' | '\u{2029}') || super::is_hidden(c)
}

/// `text` with every control, separator and hidden character written as a visible
/// escape (`\u{1b}`); borrowed when there is none (one pass over the bytes for ASCII).
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    let plain = |b: u8| (0x20..0x7f).contains(&b) || b == b'\n' || b == b'\t';
    if text.bytes().all(plain) || !text.chars().any(unsafe_for_terminal) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_for_terminal(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_controls_separators_and_hidden_characters_and_keeps_lines() {
        let hostile =
            "ok\u{1b}[2J\u{1b}]0;title\u{7}\u{1b}]52;c;ZXZpbA==\u{7}\u{9b}31m\u{202e}x\u{e0041}\r\n\tnext\u{2028}";
        let shown = terminal_safe(hostile);
        assert_eq!(
            shown,
            "ok\\u{1b}[2J\\u{1b}]0;title\\u{7}\\u{1b}]52;c;ZXZpbA==\\u{7}\\u{9b}31m\\u{202e}x\\u{e0041}\\u{d}\n\tnext\\u{2028}"
        );
        assert!(!shown.chars().any(unsafe_for_terminal));
        assert!(matches!(terminal_safe("plain text\nand é, 中文"), Cow::Borrowed(_)));
    }
}
