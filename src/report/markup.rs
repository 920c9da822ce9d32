//! Escaping for the XML and HTML this crate writes (JUnit files, the HTML report and its
//! SVG diagrams). Every text that came from a row, a model or a payload goes through
//! [`escape`] before it is written, in element text and in attribute values alike.

use std::borrow::Cow;

/// True for the characters XML 1.0 allows in a document.
fn allowed(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || (c >= ' ' && !matches!(c, '\u{FFFE}' | '\u{FFFF}'))
}

/// `text` safe as XML or HTML element text or a quoted attribute value: the five special
/// characters become entities and characters XML does not allow (most control
/// characters) become U+FFFD.
pub(crate) fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| matches!(c, '&' | '<' | '>' | '"' | '\'') || !allowed(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if !allowed(c) => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_control_characters_cannot_get_through() {
        assert_eq!(escape("plain"), "plain");
        assert_eq!(escape(r#"<a href="x">'&'</a>"#), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
        assert_eq!(escape("a\u{0}b\u{1b}c\td"), "a\u{FFFD}b\u{FFFD}c\td");
    }
}
