//! [`Text`]: a message's text, which a request may share instead of copying.
//!
//! A request's system message is the same for every run of an environment (the prompt
//! and the tool lines), and a run waiting on its model holds its request: lent rather than
//! copied, one text serves every run in flight. A built-in prompt is lent as `'static`
//! text, a system message an environment wrote once as a shared `Arc<str>`, and every
//! other text (the untrusted blocks, a model's answer) is the message's own.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A message's text: lent (`'static`), shared (`Arc<str>`) or owned. It reads, compares,
/// prints and serialises as the string it holds.
#[derive(Clone, Default)]
pub struct Text {
    /// The lent or shared text, when this one is not owned.
    not_owned: Option<NotOwned>,
    /// The text, when it is owned (empty otherwise).
    owned: String,
}

#[derive(Clone)]
enum NotOwned {
    Lent(&'static str),
    Shared(Arc<str>),
}

impl Text {
    /// The text as a string it can change (a lent or shared text is copied first).
    pub fn to_mut(&mut self) -> &mut String {
        if let Some(text) = self.not_owned.take() {
            self.owned = match text {
                NotOwned::Lent(s) => s.to_string(),
                NotOwned::Shared(s) => s.to_string(),
            };
        }
        &mut self.owned
    }

    /// The string.
    pub fn as_str(&self) -> &str {
        match &self.not_owned {
            Some(NotOwned::Lent(s)) => s,
            Some(NotOwned::Shared(s)) => s,
            None => &self.owned,
        }
    }

    /// True when the text is lent or shared (not copied into this one).
    pub fn is_shared(&self) -> bool {
        self.not_owned.is_some()
    }
}

impl Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl From<&'static str> for Text {
    fn from(s: &'static str) -> Self {
        Self { not_owned: Some(NotOwned::Lent(s)), owned: String::new() }
    }
}

impl From<String> for Text {
    fn from(owned: String) -> Self {
        Self { not_owned: None, owned }
    }
}

impl From<Arc<str>> for Text {
    fn from(s: Arc<str>) -> Self {
        Self { not_owned: Some(NotOwned::Shared(s)), owned: String::new() }
    }
}

impl From<std::borrow::Cow<'static, str>> for Text {
    fn from(s: std::borrow::Cow<'static, str>) -> Self {
        match s {
            std::borrow::Cow::Borrowed(s) => Self::from(s),
            std::borrow::Cow::Owned(s) => Self::from(s),
        }
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_text_reads_compares_and_serialises_as_its_string() {
        let shared: Arc<str> = Arc::from("a prompt\nTools:\n");
        let texts = [Text::from("a prompt\nTools:\n"), Text::from(shared.clone()), Text::from(shared.to_string())];
        for t in &texts {
            assert_eq!(t.as_str(), "a prompt\nTools:\n");
            assert_eq!(*t, "a prompt\nTools:\n");
            assert_eq!(t, &texts[2]);
            assert_eq!(serde_json::to_string(t).unwrap(), serde_json::to_string(&*shared).unwrap());
            let back: Text = serde_json::from_str(&serde_json::to_string(t).unwrap()).unwrap();
            assert_eq!(back, *t);
            assert_eq!(format!("{t}|{t:?}"), format!("{}|{:?}", &*shared, &*shared));
        }
        assert!(texts[0].is_shared() && texts[1].is_shared() && !texts[2].is_shared());
    }

    #[test]
    fn changing_a_lent_or_shared_text_copies_it_and_leaves_the_others_alone() {
        let shared: Arc<str> = Arc::from("system");
        let mut a = Text::from(shared.clone());
        let mut b = Text::from("lent");
        a.to_mut().push_str(" and more");
        b.to_mut().push('!');
        assert_eq!((a.as_str(), b.as_str(), &*shared), ("system and more", "lent!", "system"));
        assert!(!a.is_shared() && !b.is_shared());
    }
}
