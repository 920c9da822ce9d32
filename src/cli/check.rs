//! `rolegate check envelopes|proposals|memory [FILE]`: one JSON verdict line per input
//! line, from the library's own checks ([`rolegate::suite::checkers`]). Exit code 0 when every
//! line was accepted, 1 when a line was refused or could not be read (the others are still
//! checked), 2 when the input itself cannot be read (a missing file).

use clap::{Args, ValueEnum};
use std::io::Read;
use std::path::PathBuf;

use super::{EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, out};
use rolegate::suite::{CheckKind, Checker};

/// What to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum What {
    /// `{sender, recipient, text, observations?, strict_claims?}` per line.
    Envelopes,
    /// `{text, task?}` per line.
    Proposals,
    /// `{key, text, source, about?}` per line.
    Memory,
}

/// The arguments of `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// What the lines are.
    #[arg(value_enum)]
    pub what: What,
    /// JSON Lines to check (standard input when absent).
    pub file: Option<PathBuf>,
    /// memory: the user whose memory the writes go to.
    #[arg(long, default_value = "kwame")]
    pub user: String,
}

/// Runs the checker and prints one line per input line.
pub(crate) fn run(args: &CheckArgs) -> u8 {
    let input = match &args.file {
        Some(f) => std::fs::read(f).map_err(|e| format!("{}: {e}", f.display())),
        None => {
            let mut buf = Vec::new();
            std::io::stdin().lock().read_to_end(&mut buf).map(|_| buf).map_err(|e| format!("standard input: {e}"))
        }
    };
    let input = match input {
        Ok(i) => i,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let kind = match args.what {
        What::Envelopes => CheckKind::Envelopes,
        What::Proposals => CheckKind::Proposals,
        What::Memory => CheckKind::Memory,
    };
    let mut checker = match Checker::new(kind, &args.user) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let verdicts = checker.check_all(&input);
    for v in &verdicts {
        if !out(&serde_json::to_string(v).unwrap_or_default()) {
            break;
        }
    }
    if verdicts.iter().all(|v| v.accepted()) { EXIT_OK } else { EXIT_MISMATCH }
}
