//! [`ShortText`]: a short text built on the stack, for the labels and trace details the
//! coordinator and the roles write once per hand-off (`coordinator:m2`,
//! `m2 researcher->reviewer finding`) and only read, never keep. A text longer than the
//! stack room moves to the heap, so any length gives the same text.

use std::fmt;

/// Up to `N` bytes of text on the stack; past that, on the heap. Written with
/// [`fmt::Write`] (`write!` or [`ShortText::push`]), read with [`ShortText::as_str`].
pub(crate) struct ShortText<const N: usize> {
    buf: [u8; N],
    len: usize,
    /// The whole text once it outgrew `buf`.
    heap: Option<String>,
}

impl<const N: usize> ShortText<N> {
    /// An empty text.
    pub(crate) fn new() -> Self {
        Self { buf: [0; N], len: 0, heap: None }
    }

    /// The text of `parts`, one after the other.
    pub(crate) fn concat(parts: &[&str]) -> Self {
        let mut t = Self::new();
        for p in parts {
            t.push(p);
        }
        t
    }

    /// Appends `s`.
    pub(crate) fn push(&mut self, s: &str) {
        if let Some(h) = &mut self.heap {
            h.push_str(s);
            return;
        }
        let end = self.len.saturating_add(s.len());
        match self.buf.get_mut(self.len..end) {
            Some(room) => {
                room.copy_from_slice(s.as_bytes());
                self.len += s.len();
            }
            None => {
                let mut h = String::with_capacity(self.len + s.len() + N);
                h.push_str(self.stacked());
                h.push_str(s);
                self.heap = Some(h);
            }
        }
    }

    /// The text so far.
    pub(crate) fn as_str(&self) -> &str {
        match &self.heap {
            Some(h) => h,
            None => self.stacked(),
        }
    }

    /// The part on the stack: whole `&str`s copied end to end, so always UTF-8.
    fn stacked(&self) -> &str {
        self.buf.get(..self.len).and_then(|b| std::str::from_utf8(b).ok()).unwrap_or_default()
    }
}

impl<const N: usize> fmt::Write for ShortText<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(s);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write;

    #[test]
    fn a_short_text_is_the_concatenation_at_any_length() {
        let pieces = ["", "coordinator:", "m12", " ", "é", "\u{1F600}", "->", "a\"b\\c\n", &"x".repeat(40)];
        // every sequence of up to three pieces, on a stack of 16 bytes: short ones stay on
        // the stack, longer ones move to the heap part way, at any boundary
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    let want = [a, b, c].concat();
                    assert_eq!(ShortText::<16>::concat(&[a, b, c]).as_str(), want);
                    let mut t = ShortText::<16>::new();
                    write!(t, "{a}{b}{c}").unwrap();
                    assert_eq!(t.as_str(), want);
                }
            }
        }
        let mut n = ShortText::<8>::new();
        write!(n, "tool:r{}", 123_456_789_u64).unwrap();
        assert_eq!(n.as_str(), "tool:r123456789");
        assert_eq!(ShortText::<0>::concat(&["a", "é"]).as_str(), "aé");
    }
}
