//! What every data table shares: the error a row file gets ([`ScenarioError`], with file,
//! line and field) and the longest row a table reads.

use crate::agent::AgentError;

/// Most bytes of one row.
pub(crate) const MAX_ROW_BYTES: usize = 64 * 1024;

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
    /// A multi-agent run could not be carried out.
    #[error("row {id}: {source}")]
    Multi {
        /// Row id.
        id: String,
        /// Why.
        source: crate::multi::MultiError,
    },
}
