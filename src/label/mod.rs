//! Labels on values: where a value came from (integrity) and whose it is
//! (confidentiality), and the one rule that says what a model's output derives from.
//!
//! A [`Label`] is two bytes and `Copy`: it travels with every envelope and every tool
//! result a gate hands back, at no cost worth counting. Labels only ever **join** (each
//! half goes to the less trusted, the more confidential of the two); the one way up is an
//! endorsement, which only code that rebuilt a value from typed fields may grant (the
//! coordinator's claim builder, [`crate::multi`]).
//!
//! - integrity: `trusted` is what the user, the policy or the application wrote (the goal,
//!   the system prompts, the user's own profile); `untrusted` is anything a tool returned
//!   and anything a model wrote after reading something untrusted;
//! - confidentiality: `public` (the knowledge base), `user` (the signed-in user's own data),
//!   `other` (another user's data).
//!
//! **The derivation rule** ([`argument_label`]): a model's output is as untrusted and as
//! confidential as everything in its context (the context's [`Taint`]), because nothing
//! tells which part of its context a model copied from or was steered by. The one
//! exception: a value equal (after folding, ignoring case and surrounding space) to a value
//! the application itself holds as trusted for this user — their own e-mail address or id
//! from the profile — is trusted whatever the context, because its content did not come
//! from the untrusted input. What remains open: an untrusted input can still *choose among*
//! trusted values (send the user their own data at a time they did not ask for), and a
//! context that never read anything untrusted makes every output trusted, even a free-text
//! one.

use crate::codes::codes;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

codes! {
    /// Where a value came from. Ordered: `trusted` < `untrusted` (a join takes the larger).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    pub enum Integrity {
        /// Written by the user (the goal), the policy or the application.
        #[default]
        Trusted = "trusted",
        /// Returned by a tool, or written by a model after reading something untrusted.
        Untrusted = "untrusted",
    }
}

codes! {
    /// Whose a value is. Ordered: `public` < `user` < `other` (a join takes the larger).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    pub enum Confidentiality {
        /// Anyone may read it (the knowledge base).
        #[default]
        Public = "public",
        /// The signed-in user's own data (their tickets, their profile).
        User = "user",
        /// Another user's data: it may not flow to a role, a tool argument or an answer for
        /// this user.
        Other = "other",
    }
}

codes! {
    /// The information-flow defense: labels are always kept; with `on` the gate and the
    /// coordinator also enforce the rules on them.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum IfcMode {
        /// Labels are kept, no rule is enforced on them (every figure as before).
        #[default]
        Off = "off",
        /// The trusted-action rule at the gate, the confidentiality rule at the gate and at
        /// the coordinator's routes.
        On = "on",
    }
}

impl std::str::FromStr for IfcMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::from_code(s).ok_or_else(|| format!("unknown ifc setting {s:?} (known: on, off)"))
    }
}

/// A value's label: its integrity and its confidentiality. Two bytes, `Copy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Label {
    /// Where it came from.
    pub integrity: Integrity,
    /// Whose it is.
    pub confidentiality: Confidentiality,
}

impl Label {
    /// Trusted and public: the goal's system prompt, the policy, a code-written message.
    pub const TRUSTED: Label = Label::new(Integrity::Trusted, Confidentiality::Public);
    /// Untrusted and public: a knowledge-base document, or an input nothing is known of.
    pub const UNTRUSTED: Label = Label::new(Integrity::Untrusted, Confidentiality::Public);

    /// A label of `integrity` and `confidentiality`.
    pub const fn new(integrity: Integrity, confidentiality: Confidentiality) -> Self {
        Self { integrity, confidentiality }
    }

    /// The label of a value combined from `self` and `other`: the less trusted integrity,
    /// the more confidential confidentiality.
    #[must_use]
    pub fn join(self, other: Label) -> Label {
        Label::new(self.integrity.max(other.integrity), self.confidentiality.max(other.confidentiality))
    }

    /// True when the integrity is `trusted`.
    pub fn is_trusted(self) -> bool {
        self.integrity == Integrity::Trusted
    }

    /// This label with its integrity raised to `trusted` and its confidentiality kept: what
    /// an endorsement by a quarantined reader grants a typed value it rebuilt. Only code
    /// that rebuilt the value from typed fields may call it.
    #[must_use]
    pub(crate) fn endorsed(self) -> Label {
        Label::new(Integrity::Trusted, self.confidentiality)
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&[self.integrity.as_str(), "/", self.confidentiality.as_str()].concat())
    }
}

impl Serialize for Label {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Label {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(d)?;
        let (i, c) =
            text.split_once('/').ok_or_else(|| serde::de::Error::custom("a label is INTEGRITY/CONFIDENTIALITY"))?;
        match (Integrity::from_code(i), Confidentiality::from_code(c)) {
            (Some(i), Some(c)) => Ok(Label::new(i, c)),
            _ => Err(serde::de::Error::custom(format!("unknown label {text:?}"))),
        }
    }
}

/// What a model's context holds: the join of the labels of everything put into it, and the
/// first untrusted thing (what a refusal names as the source an argument derives from).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Taint {
    label: Label,
    /// Up to 24 bytes kept inline (a tool and an id: no allocation).
    source: Option<compact_str::CompactString>,
}

impl Taint {
    /// An empty context: trusted and public.
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts a value labelled `label` from `source` (e.g. `get_ticket:T-601`,
    /// `coordinator:m2`) into the context.
    pub fn absorb(&mut self, label: Label, source: &str) {
        if !label.is_trusted() && self.source.is_none() {
            self.source = Some(source.into());
        }
        self.label = self.label.join(label);
    }

    /// The join of everything absorbed.
    pub fn label(&self) -> Label {
        self.label
    }

    /// The first untrusted source absorbed, if any.
    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }
}

/// The label of a value a model proposed (a tool argument) with `context` in view: trusted
/// (and the user's own) when it equals one of `trusted_values` (folded, ignoring case and
/// surrounding space), otherwise the context's label. See the module documentation for the
/// rule and its limits.
pub fn argument_label(value: &str, context: Label, trusted_values: &[&str]) -> Label {
    let folded = crate::security::fold(value);
    let value = folded.trim();
    let own = trusted_values.iter().any(|t| {
        let t = crate::security::fold(t);
        let t = t.trim();
        !t.is_empty() && t.eq_ignore_ascii_case(value)
    });
    if own { Label::new(Integrity::Trusted, Confidentiality::User) } else { context }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_go_down_in_trust_and_up_in_confidentiality() {
        let user = Label::new(Integrity::Trusted, Confidentiality::User);
        assert_eq!(Label::TRUSTED.join(Label::UNTRUSTED), Label::UNTRUSTED);
        assert_eq!(user.join(Label::UNTRUSTED), Label::new(Integrity::Untrusted, Confidentiality::User));
        assert_eq!(Label::UNTRUSTED.endorsed(), Label::TRUSTED);
        assert_eq!(Label::new(Integrity::Untrusted, Confidentiality::Other).to_string(), "untrusted/other");
        let json = serde_json::to_string(&user).unwrap();
        assert_eq!(json, "\"trusted/user\"");
        assert_eq!(serde_json::from_str::<Label>(&json).unwrap(), user);
        assert!(serde_json::from_str::<Label>("\"trusted\"").is_err());
        assert_eq!(std::mem::size_of::<Label>(), 2);
    }

    #[test]
    fn a_taint_keeps_the_first_untrusted_source_and_an_own_value_stays_trusted() {
        let mut t = Taint::new();
        t.absorb(Label::TRUSTED, "goal");
        assert_eq!(t.source(), None);
        t.absorb(Label::UNTRUSTED, "get_ticket:T-601");
        t.absorb(Label::UNTRUSTED, "lookup_document:kc-returns-v3");
        assert_eq!((t.label(), t.source()), (Label::UNTRUSTED, Some("get_ticket:T-601")));
        let own = ["kwame@example.com", "kwame"];
        assert!(argument_label(" KWAME@example.com ", t.label(), &own).is_trusted());
        assert!(!argument_label("copy@evil.example", t.label(), &own).is_trusted());
        assert!(argument_label("copy@evil.example", Label::TRUSTED, &own).is_trusted());
        assert!(!argument_label("", t.label(), &["", "kwame"]).is_trusted());
    }
}
