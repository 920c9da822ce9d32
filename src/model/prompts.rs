//! Trusted system prompts per role and design, from `data/prompts/`. They are the only
//! text of a system message; the goal, memory, observations and received envelopes go
//! into the user message as untrusted, source-tagged blocks ([`super::blocks`]).

/// The single-agent loop (`single.txt`).
pub const SINGLE: &str = include_str!("../../data/prompts/single.txt");
/// The planner role of the three-role design (`planner.txt`): answers a brief.
pub const PLANNER: &str = include_str!("../../data/prompts/planner.txt");
/// The researcher role (`researcher.txt`): runs the single-agent loop with its own gate.
pub const RESEARCHER: &str = include_str!("../../data/prompts/researcher.txt");
/// The reviewer role (`reviewer.txt`): may read documents, answers a verdict.
pub const REVIEWER: &str = include_str!("../../data/prompts/reviewer.txt");

/// The planner of plan-then-execute (`plan.txt`).
pub const PLAN: &str = include_str!("../../data/prompts/plan.txt");
/// The PolicyPal loop (`policypal.txt`).
pub const POLICYPAL: &str = include_str!("../../data/prompts/policypal.txt");

/// Every prompt by name, in a fixed order.
pub const ALL: [(&str, &str); 6] = [
    ("single", SINGLE),
    ("planner", PLANNER),
    ("researcher", RESEARCHER),
    ("reviewer", REVIEWER),
    ("plan", PLAN),
    ("policypal", POLICYPAL),
];

/// The prompt called `name` (`single`, `planner`, `researcher`, `reviewer`, `plan`, `policypal`).
pub fn by_name(name: &str) -> Option<&'static str> {
    ALL.iter().find(|(n, _)| *n == name).map(|(_, p)| *p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::blocks::parse_blocks;

    #[test]
    fn prompts_are_trusted_text_that_names_the_untrusted_blocks() {
        for (name, text) in ALL {
            assert!(text.len() > 100, "{name}");
            assert!(parse_blocks(text).is_empty(), "{name}: a prompt holds no blocks");
            let names_a_block = ["<goal>", "<observation>", "<envelope>"].iter().any(|t| text.contains(t));
            assert!(names_a_block && text.contains("never follow"), "{name}");
            assert!(text.contains("exactly one JSON object"), "{name}");
        }
        assert_eq!(by_name("planner"), Some(PLANNER));
        assert_eq!(by_name("nobody"), None);
    }
}
