//! The tasks designs are compared on, `data/design_tasks.jsonl`: an id, a group (the
//! design table or the PolicyPal section), a goal and the tools the task needs. "Covered"
//! means every needed tool was called; a `done` that skipped one is not covered. A task may
//! also say what a correct answer contains (`expect`, [`Expect`]): a covered run whose
//! answer lacks it is not useful.

use serde::{Deserialize, Serialize};

use super::DesignError;
use super::expect::Expect;

/// The bundled task table.
pub(crate) const BUNDLED_TASKS: &str = include_str!("../../data/design_tasks.jsonl");

/// Which section of `rolegate compare` a task belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskGroup {
    /// The design table (fixed, plan, react, …).
    Designs,
    /// Only the PolicyPal section.
    Policypal,
}

/// One task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DesignTask {
    /// Id such as `t1`.
    pub id: String,
    /// The section it belongs to.
    pub group: TaskGroup,
    /// What the task shows.
    #[serde(default)]
    pub note: String,
    pub goal: String,
    /// Tools the task needs called.
    pub needs: Vec<String>,
    /// What a correct answer contains (and whether the trace grader grades the run);
    /// graded utility counts the runs that pass.
    #[serde(default, skip_serializing_if = "Expect::is_empty")]
    pub expect: Expect,
}

impl DesignTask {
    /// True when every needed tool is among `calls`.
    pub fn covered(&self, calls: &[String]) -> bool {
        self.needs.iter().all(|n| calls.contains(n))
    }
}

/// Parses a task table (JSON Lines; blank lines and `#` lines skipped).
///
/// # Errors
/// [`DesignError::Tasks`] naming the line: bad JSON, unknown fields, an empty or repeated
/// id, a goal of the wrong length, no needed tool.
pub fn parse_tasks(text: &str, file: &str) -> Result<Vec<DesignTask>, DesignError> {
    let mut tasks: Vec<DesignTask> = Vec::new();
    // ids seen so far: one hash lookup a row, so a long table is checked in linear time
    let mut ids = std::collections::HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let err = |message: String| DesignError::Tasks { file: file.to_string(), line: line_no, message };
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if trimmed.len() > 4096 {
            return Err(err("longer than 4096 bytes".into()));
        }
        let task: DesignTask = serde_json::from_str(trimmed).map_err(|e| err(e.to_string()))?;
        if task.id.is_empty() || task.id.len() > 16 || !task.id.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(err("id must be 1 to 16 letters or digits".into()));
        }
        if !ids.insert(task.id.clone()) {
            return Err(err(format!("id {} is used twice", task.id)));
        }
        if task.goal.trim().is_empty() || task.goal.chars().count() > crate::agent::MAX_GOAL_CHARS {
            return Err(err("goal must be 1 to 300 characters".into()));
        }
        if task.needs.is_empty() {
            return Err(err("needs must name at least one tool".into()));
        }
        tasks.push(task);
    }
    Ok(tasks)
}

/// The bundled tasks.
///
/// # Errors
/// Only if the bundled file were broken (a test guards it).
pub fn bundled_tasks() -> Result<Vec<DesignTask>, DesignError> {
    parse_tasks(BUNDLED_TASKS, "data/design_tasks.jsonl")
}
