//! One `--format` vocabulary for every command: [`OutputFormat`] (`table`, `json`,
//! `jsonl`, `csv`, `junit`). Each command takes the subset that makes sense for what it
//! prints and refuses the others with an error naming the ones it takes (exit 2); the
//! narrow enums the commands match on ([`ListFormat`](super::ListFormat), …) are reached
//! only through [`takes`].

use clap::ValueEnum;

/// Output formats, shared by every command that prints tables or JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Aligned text with a header row (and a legend under the experiment tables).
    Table,
    /// One JSON document.
    Json,
    /// One JSON object per line.
    Jsonl,
    /// RFC 4180 comma-separated values with a header row.
    Csv,
    /// A JUnit XML document (one test case per row or configuration).
    Junit,
}

impl OutputFormat {
    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Table => "table",
            Self::Json => "json",
            Self::Jsonl => "jsonl",
            Self::Csv => "csv",
            Self::Junit => "junit",
        }
    }
}

/// `a, b or c`.
fn or_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// Checks that `command` takes `given` among `taken`; the error names the ones it takes,
/// e.g. `compare takes --format table, json or csv, not jsonl`.
///
/// # Errors
/// The message above when `given` is not among `taken`.
pub(crate) fn takes(command: &str, given: OutputFormat, taken: &[OutputFormat]) -> Result<(), String> {
    if taken.contains(&given) {
        return Ok(());
    }
    let names: Vec<&str> = taken.iter().map(|f| f.as_str()).collect();
    Err(format!("{command} takes --format {}, not {}", or_list(&names), given.as_str()))
}

/// The formats of the listing commands (`runs list`, `approvals list`, `approvers list`,
/// `outbox`, `store check`) and of `bench`.
pub(crate) const LISTING: [OutputFormat; 2] = [OutputFormat::Table, OutputFormat::Json];

/// The formats of `compare`.
pub(crate) const COMPARE: [OutputFormat; 3] = [OutputFormat::Table, OutputFormat::Json, OutputFormat::Csv];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_format_names_the_ones_taken() {
        assert!(takes("compare", OutputFormat::Csv, &COMPARE).is_ok());
        let e = takes("compare", OutputFormat::Jsonl, &COMPARE).unwrap_err();
        assert_eq!(e, "compare takes --format table, json or csv, not jsonl");
        let e = takes("outbox", OutputFormat::Csv, &LISTING).unwrap_err();
        assert_eq!(e, "outbox takes --format table or json, not csv");
    }
}
