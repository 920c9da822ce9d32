//! Risk classes: which effect a tool has, which review that effect needs, and whether it
//! can be taken back. A tool missing from the table is destructive: the same fail-closed
//! default as the gate's "missing means write".

use crate::codes::codes;
use serde::{Deserialize, Serialize};

use crate::gate::{Access, Policy};

codes! {
    /// What a tool does to the world.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    pub enum Effect {
        /// Reads only.
        Read = "read",
        /// Changes only the application's own state (e.g. memory).
        Internal = "internal",
        /// Changes the world in a way the application can undo.
        ReversibleWrite = "reversible_write",
        /// Reaches outside (an e-mail is read once sent).
        External = "external",
        /// Destroys or cannot be classified.
        Destructive = "destructive",
    }
}

codes! {
    /// How much review an effect needs.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    pub enum Level {
        /// Runs without a person.
        Auto = "auto",
        /// Runs, and is logged for review.
        Log = "log",
        /// Needs a person's approval first.
        Approve = "approve",
    }
}

/// A tool's classification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Risk {
    pub effect: Effect,
    /// The review it needs.
    pub level: Level,
    /// True when the application cannot take the effect back.
    pub irreversible: bool,
}

/// The known tools and their effects, in a fixed order.
pub const EFFECTS: [(&str, Effect); 7] = [
    ("lookup_document", Effect::Read),
    ("get_ticket", Effect::Read),
    ("calculator", Effect::Read),
    ("remember", Effect::Internal),
    ("set_ticket_status", Effect::ReversibleWrite),
    ("send_email_draft", Effect::External),
    ("search_documents", Effect::Read),
];

/// The effect of `tool`, if the table knows it.
pub(crate) fn known_effect(tool: &str) -> Option<Effect> {
    EFFECTS.iter().find(|(t, _)| *t == tool).map(|(_, e)| *e)
}

/// Classifies `tool`; an unknown tool is destructive, needs approval and is irreversible.
pub fn classify(tool: &str) -> Risk {
    let effect = known_effect(tool).unwrap_or(Effect::Destructive);
    let level = match effect {
        Effect::Read => Level::Auto,
        Effect::Internal => Level::Log,
        Effect::ReversibleWrite | Effect::External | Effect::Destructive => Level::Approve,
    };
    Risk { effect, level, irreversible: matches!(effect, Effect::External | Effect::Destructive) }
}

/// Problems a policy has before any run: a tool whose effect needs approval labelled
/// `read` or `internal`, a tool labelled `internal` that the table does not class as an
/// internal effect, and a tool a task uses that the risk table does not know. Ordered and deduplicated.
pub fn policy_problems(policy: &Policy) -> Vec<String> {
    let mut problems = std::collections::BTreeSet::new();
    for (tool, access) in &policy.access {
        let risk = classify(tool);
        if *access != Access::Write && risk.level == Level::Approve {
            let label = if *access == Access::Read { "read" } else { "internal" };
            problems.insert(format!("{tool}: {} but access is {label}", risk.effect.as_str()));
        }
        if *access == Access::Internal && risk.effect != Effect::Internal {
            problems.insert(format!("{tool}: {} but access is internal", risk.effect.as_str()));
        }
    }
    for tool in policy.tasks.values().flatten() {
        if known_effect(tool).is_none() {
            problems.insert(format!("{tool}: not classified (treated as destructive)"));
        }
    }
    problems.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_tools_are_destructive_and_the_mislabelled_tool_is_found() {
        let r = classify("refund_customer");
        assert_eq!((r.effect, r.level, r.irreversible), (Effect::Destructive, Level::Approve, true));
        let mut p = Policy::bundled().unwrap();
        assert!(policy_problems(&p).is_empty(), "{:?}", policy_problems(&p));
        p.access.insert("send_email_draft".into(), Access::Read);
        assert_eq!(policy_problems(&p), ["send_email_draft: external but access is read"]);
    }
}
