//! What every data table shares: the error a row file gets ([`ScenarioError`], with file,
//! line and field), the longest row a table reads, and the one reader of JSON Lines tables
//! ([`read_table`]): blank and `#` lines skipped, ids unique, every bad row reported (up
//! to [`MAX_REPORTED_ROWS`]), a table without rows refused.

use crate::agent::AgentError;
use std::collections::HashSet;

/// Most bytes of one row.
pub(crate) const MAX_ROW_BYTES: usize = 64 * 1024;

/// Most bad rows one error lists; the others are counted.
pub const MAX_REPORTED_ROWS: usize = 20;

/// Errors loading or running a table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioError {
    /// A row that does not fit the schema.
    #[error("{file}:{line}: field `{field}`: {message}")]
    Row {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// The field path (`expect.reason`), or `(row)` for the whole row.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The file could not be read.
    #[error("{file}: {message}")]
    Io {
        /// The file.
        file: String,
        /// What went wrong.
        message: String,
    },
    /// A run could not be carried out.
    #[error("row {id}: {source}")]
    Run {
        /// Row id.
        id: String,
        /// Why.
        source: AgentError,
    },
    /// The run's environment could not check the state it left behind.
    #[error("row {id}: {source}")]
    Judge {
        /// Row id.
        id: String,
        /// Why.
        source: crate::tools::JudgeError,
    },
    /// Several rows of one file are bad: each is listed (at most [`MAX_REPORTED_ROWS`]), the
    /// rest counted.
    #[error("{file}: {} bad rows:{}{}", .errors.len() + .more, list(.errors), more_line(*.more))]
    Rows {
        /// The file.
        file: String,
        /// The bad rows, in file order.
        errors: Vec<ScenarioError>,
        /// Bad rows past the listed ones.
        more: usize,
    },
    /// The file holds no row: only blank lines and comments, or nothing.
    #[error("{file}: no {what} in the file (only blank lines and `#` comments)")]
    Empty {
        /// The file.
        file: String,
        /// What the rows are (`rows`, `tasks`, `attacks`).
        what: &'static str,
    },
    /// A multi-agent run could not be carried out.
    #[error("row {id}: {source}")]
    Multi {
        /// Row id.
        id: String,
        /// Why.
        source: crate::multi::MultiError,
    },
    /// Cells whose run ended before its first model call was answered (out of time or
    /// cancelled, typically while waiting for a connection): they measure the queue, not
    /// the model, so none is kept as a result; running the same command again with the same
    /// results file runs them.
    #[error(
        "{count} cell(s) never got to run (ended {reason} before a model answered; first: {first}): none is a \
         result, and running the same command again with the same --out runs them"
    )]
    NotRun {
        /// How many.
        count: usize,
        /// The first one's cell id.
        first: String,
        /// How the first one ended (`time_budget`, `cancelled`).
        reason: String,
    },
}

fn list(errors: &[ScenarioError]) -> String {
    errors.iter().map(|e| format!("\n  {e}")).collect()
}

fn more_line(more: usize) -> String {
    if more == 0 { String::new() } else { format!("\n  … and {more} more") }
}

/// The error of a row serde could not read: a syntax error names the row and says it is
/// not JSON; a schema error names the field's path. serde's `at line 1 column N` is
/// dropped (the row is one line; the field says where).
pub(crate) fn serde_row_error(
    e: serde_path_to_error::Error<serde_json::Error>,
    file: &str,
    line: usize,
) -> ScenarioError {
    let path = e.path().to_string();
    let inner = e.into_inner();
    let syntax = matches!(inner.classify(), serde_json::error::Category::Syntax | serde_json::error::Category::Eof);
    let mut message = inner.to_string();
    if let Some(at) = message.rfind(" at line ") {
        message.truncate(at);
    }
    let (field, message) = if syntax {
        ("(row)".to_string(), format!("not valid JSON: {message}"))
    } else if path.is_empty() || path == "." || path == "?" {
        ("(row)".to_string(), message)
    } else {
        (path, message)
    };
    ScenarioError::Row { file: file.into(), line, field, message }
}

/// Reads a JSON Lines table of `what` (`rows`, `tasks`, …): blank lines and lines starting
/// with `#` are skipped, `parse` reads each other line (text, 1-based line number), and an
/// id (`id` of a row) used twice is an error on the later line. Every bad line is
/// reported, not only the first.
///
/// # Errors
/// The one bad row's error; [`ScenarioError::Rows`] when there are several;
/// [`ScenarioError::Empty`] when the file holds no row at all.
pub(crate) fn read_table<T>(
    text: &str,
    file: &str,
    what: &'static str,
    mut parse: impl FnMut(&str, usize) -> Result<T, ScenarioError>,
    id: impl Fn(&T) -> &str,
) -> Result<Vec<T>, ScenarioError> {
    let mut rows: Vec<T> = Vec::new();
    let mut errors: Vec<ScenarioError> = Vec::new();
    let mut more = 0;
    // ids seen so far: one hash lookup a row, so a long table is checked in linear time
    let mut ids: HashSet<String> = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let result = parse(trimmed, i + 1).and_then(|row| {
            if ids.insert(id(&row).to_string()) {
                Ok(row)
            } else {
                let message = format!("{} is used twice", id(&row));
                Err(ScenarioError::Row { file: file.into(), line: i + 1, field: "id".into(), message })
            }
        });
        match result {
            Ok(row) => rows.push(row),
            Err(e) if errors.len() < MAX_REPORTED_ROWS => errors.push(e),
            Err(_) => more += 1,
        }
    }
    match (errors.len(), more) {
        (0, _) if rows.is_empty() => Err(ScenarioError::Empty { file: file.into(), what }),
        (0, _) => Ok(rows),
        (1, 0) => Err(errors.remove(0)),
        _ => Err(ScenarioError::Rows { file: file.into(), errors, more }),
    }
}
