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

/// Most bytes of one prompt given at run time.
pub const MAX_PROMPT_BYTES: usize = 64 * 1024;

/// The prompts given at run time (`--prompts DIR`), installed once per process before
/// any run; every prompt not given stays the bundled one.
static INSTALLED: std::sync::OnceLock<Vec<(&'static str, String)>> = std::sync::OnceLock::new();

/// Why prompts given at run time were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PromptError {
    /// Not one of the prompts' names.
    #[error("no prompt is called {0:?} (known: single, planner, researcher, reviewer, plan, policypal)")]
    Unknown(String),
    /// Empty, or longer than [`MAX_PROMPT_BYTES`].
    #[error("prompt {0}: must be 1 to {MAX_PROMPT_BYTES} bytes")]
    Size(String),
    /// It holds an untrusted block: a system prompt is trusted text only.
    #[error("prompt {0}: holds a <{1}> block; untrusted blocks go into the user message, never a prompt")]
    Block(String, String),
    /// Prompts were installed already in this process.
    #[error("prompts are installed once per process, before any run")]
    Installed,
}

/// Checks one prompt given at run time as the bundled ones are: a known name, 1 to
/// [`MAX_PROMPT_BYTES`] bytes, no untrusted block in it.
///
/// # Errors
/// [`PromptError`] naming the prompt.
pub fn check_prompt(name: &str, text: &str) -> Result<(), PromptError> {
    if by_name(name).is_none() {
        return Err(PromptError::Unknown(name.to_string()));
    }
    if text.trim().is_empty() || text.len() > MAX_PROMPT_BYTES {
        return Err(PromptError::Size(name.to_string()));
    }
    if let Some(b) = super::blocks::parse_blocks(text).first() {
        return Err(PromptError::Block(name.to_string(), b.tag.clone()));
    }
    Ok(())
}

/// Installs `prompts` (name, text) for the rest of the process, each checked by
/// [`check_prompt`]; the others stay bundled.
///
/// # Errors
/// The first [`PromptError`]; [`PromptError::Installed`] when called twice.
pub fn install(prompts: Vec<(String, String)>) -> Result<(), PromptError> {
    let mut set = Vec::new();
    for (name, text) in prompts {
        check_prompt(&name, &text)?;
        let name = ALL.iter().map(|(n, _)| *n).find(|n| *n == name).ok_or(PromptError::Unknown(name))?;
        set.push((name, text));
    }
    INSTALLED.set(set).map_err(|_| PromptError::Installed)
}

/// The prompt called `name` for this process: installed at run time, or bundled.
pub fn current(name: &str) -> Option<&'static str> {
    let installed = INSTALLED.get().and_then(|set| set.iter().find(|(n, _)| *n == name)).map(|(_, t)| t.as_str());
    installed.or_else(|| by_name(name))
}

/// Every prompt of this process by name, in the order of [`ALL`].
pub fn current_all() -> Vec<(&'static str, &'static str)> {
    ALL.iter().map(|(n, p)| (*n, current(n).unwrap_or(p))).collect()
}

/// The single-agent loop's prompt of this process.
pub fn single() -> &'static str {
    current("single").unwrap_or(SINGLE)
}

/// The planner role's prompt of this process.
pub fn planner() -> &'static str {
    current("planner").unwrap_or(PLANNER)
}

/// The researcher role's prompt of this process.
pub fn researcher() -> &'static str {
    current("researcher").unwrap_or(RESEARCHER)
}

/// The reviewer role's prompt of this process.
pub fn reviewer() -> &'static str {
    current("reviewer").unwrap_or(REVIEWER)
}

/// Plan-then-execute's planner prompt of this process.
pub fn plan() -> &'static str {
    current("plan").unwrap_or(PLAN)
}

/// The PolicyPal loop's prompt of this process.
pub fn policypal() -> &'static str {
    current("policypal").unwrap_or(POLICYPAL)
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

    #[test]
    fn a_prompt_given_at_run_time_is_checked_like_the_bundled_ones() {
        assert_eq!(check_prompt("planner", "Answer with exactly one JSON object."), Ok(()));
        assert_eq!(check_prompt("boss", "x"), Err(PromptError::Unknown("boss".into())));
        assert_eq!(check_prompt("single", "  "), Err(PromptError::Size("single".into())));
        assert_eq!(check_prompt("single", &"x".repeat(MAX_PROMPT_BYTES + 1)), Err(PromptError::Size("single".into())));
        let with_block = "Do this.\n<observation source=\"tool:get_ticket\" ok=\"true\">\nsend it\n</observation>\n";
        assert!(matches!(check_prompt("single", with_block), Err(PromptError::Block(..))), "{with_block}");
        // nothing installed in the unit tests: every prompt is the bundled one
        assert_eq!(current_all(), ALL.to_vec());
        assert_eq!((single(), planner(), plan()), (SINGLE, PLANNER, PLAN));
    }
}
