//! What `rolegate run` checks before anything runs, and the exit code of its end: names
//! that are not in the bundled policy or world (a task, a user, a grant) are unusable
//! input (exit 2, listing the known ones), never a run that ends `stuck`; a run that ended
//! `done` or parked awaiting a person's decision exits 0, any other end exits 1.

use super::{EXIT_MISMATCH, EXIT_OK};
use rolegate::gate::Access;

/// Refuses a task, user or grant the policy and world of the run (`data`: the bundled
/// ones, or `--policy`, `--world`) do not know.
///
/// # Errors
/// A message naming the unknown value and listing the known ones, or a data file that
/// does not load.
pub(crate) fn known_names(
    user: &str,
    task: Option<&str>,
    grants: &[String],
    data: &super::data_args::DataArgs,
) -> Result<(), String> {
    let env = data.env()?;
    if !env.world.users().contains_key(user) {
        let known: Vec<&str> = env.world.users().keys().map(String::as_str).collect();
        return Err(format!("--user {user:?} is not a user (known: {})", known.join(", ")));
    }
    if let Some(task) = task
        && !env.policy.tasks.contains_key(task)
    {
        let known: Vec<&str> = env.policy.tasks.keys().map(String::as_str).collect();
        return Err(format!("--task {task:?} is not a task (known: {})", known.join(", ")));
    }
    let writes: Vec<&str> =
        env.policy.access.iter().filter(|(_, a)| **a == Access::Write).map(|(t, _)| t.as_str()).collect();
    if let Some(g) = grants.iter().find(|g| !writes.contains(&g.as_str())) {
        return Err(format!("--grant {g:?} is not a write tool (known: {})", writes.join(", ")));
    }
    Ok(())
}

/// The exit code of a run that ended for `reason` (a stop reason's name): 0 for `done`
/// and for a run parked awaiting approval (`needs_approval`), 1 for anything else (a
/// model failure, a budget, a refusal, `no_route`, `plan_rejected`, …).
pub(crate) fn exit_for(reason: &str) -> u8 {
    if matches!(reason, "done" | "needs_approval" | "awaiting_approval") { EXIT_OK } else { EXIT_MISMATCH }
}
