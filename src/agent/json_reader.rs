//! A reader of small, flat JSON texts, for the direct readers of the shapes a model writes
//! most (a proposal, a role's message): one pass over the bytes, strings without escapes
//! borrowed, the short escapes (`\" \\ \/ \b \f \n \r \t`) decoded. Every method answers
//! `None` (or `false`) where the text is not what it reads, and leaves the rest to its
//! caller, which hands such a text to `serde_json`; what it does read, it reads as
//! `serde_json` does (pinned by each caller's corpus test against `serde_json`).

use std::borrow::Cow;

use crate::tools::next_escape;

/// A position in a JSON text being read.
pub(crate) struct JsonReader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> JsonReader<'a> {
    /// A reader at the start of `text`.
    pub(crate) fn new(text: &'a str) -> Self {
        JsonReader { text, bytes: text.as_bytes(), at: 0 }
    }

    /// Whether only white space is left.
    pub(crate) fn at_end(&mut self) -> bool {
        self.space();
        self.at == self.bytes.len()
    }

    /// Moves past JSON white space (space, tab, line feed, carriage return).
    pub(crate) fn space(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after white space, moved past.
    pub(crate) fn next(&mut self) -> Option<u8> {
        self.space();
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    /// Moves past `want` (after white space), or `None` when another byte comes.
    pub(crate) fn byte(&mut self, want: u8) -> Option<()> {
        (self.next()? == want).then_some(())
    }

    /// After an object's member: `Some(true)` past the `}` that closes the object,
    /// `Some(false)` past the `,` before the next member, `None` for anything else.
    pub(crate) fn object_closed(&mut self) -> Option<bool> {
        match self.next()? {
            b'}' => Some(true),
            b',' => Some(false),
            _ => None,
        }
    }

    /// Moves past `want` when it is the next byte after white space.
    pub(crate) fn peek_past(&mut self, want: u8) -> bool {
        self.space();
        let found = self.bytes.get(self.at) == Some(&want);
        self.at += usize::from(found);
        found
    }

    /// Moves past `token` (a JSON string written without escapes, quotes included, or a
    /// literal such as `true`) when it comes next after white space. For a literal the
    /// caller checks the byte after it (`truex` starts with `true`).
    pub(crate) fn literal(&mut self, token: &[u8]) -> bool {
        self.space();
        let found = self.bytes.get(self.at..).is_some_and(|rest| rest.starts_with(token));
        self.at += if found { token.len() } else { 0 };
        found
    }

    /// The JSON string that comes next, decoded: borrowed when it has no escape. `None`
    /// unless it is a well-formed string whose escapes are all short ones (a control
    /// character, a `\u` escape or an unknown escape gives `None`).
    pub(crate) fn string(&mut self) -> Option<Cow<'a, str>> {
        self.byte(b'"')?;
        let start = self.at;
        let mut escapes = 0;
        let mut from = start;
        let end = loop {
            let stop = next_escape(self.bytes, from);
            match self.bytes.get(stop)? {
                b'"' => break stop,
                b'\\'
                    if matches!(self.bytes.get(stop + 1)?, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') =>
                {
                    escapes += 1;
                    from = stop + 2;
                }
                _ => return None,
            }
        };
        self.at = end + 1;
        // `"` is ASCII, so both ends are character boundaries
        let raw = self.text.get(start..end)?;
        if escapes == 0 {
            return Some(Cow::Borrowed(raw));
        }
        self.decoded(start, end, raw.len() - escapes).map(Cow::Owned)
    }

    /// The string between `start` and `end`, whose escapes (all short ones) are decoded,
    /// `len` bytes long once they are.
    #[inline(never)]
    fn decoded(&self, start: usize, end: usize, len: usize) -> Option<String> {
        // the scan stops only at a backslash here (the byte after one is moved past with it)
        let mut out = String::with_capacity(len);
        let mut from = start;
        loop {
            let stop = next_escape(self.bytes, from).min(end);
            out.push_str(self.text.get(from..stop)?);
            if stop == end {
                return Some(out);
            }
            out.push(match self.bytes.get(stop + 1)? {
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                // `"`, `\` or `/`: itself
                &other => char::from(other),
            });
            from = stop + 2;
        }
    }

    /// A JSON array of strings, read as [`JsonReader::string`] reads each.
    pub(crate) fn strings(&mut self) -> Option<Vec<String>> {
        self.byte(b'[')?;
        let mut out = Vec::new();
        if self.peek_past(b']') {
            return Some(out);
        }
        loop {
            out.push(self.string()?.into_owned());
            match self.next()? {
                b',' => {}
                b']' => return Some(out),
                _ => return None,
            }
        }
    }
}

/// Every prefix of `text`, and `text` with each byte replaced by each of `with` (where the
/// result is still UTF-8): the mutated corpora the direct readers are pinned on.
#[cfg(test)]
pub(crate) fn mutations(text: &str, with: &[u8]) -> Vec<String> {
    let mut out: Vec<String> =
        (0..text.len()).filter(|&i| text.is_char_boundary(i)).map(|i| text[..i].to_string()).collect();
    let bytes = text.as_bytes();
    for i in 0..bytes.len() {
        for &b in with {
            let mut changed = bytes.to_vec();
            changed[i] = b;
            if let Ok(s) = String::from_utf8(changed) {
                out.push(s);
            }
        }
    }
    out
}
