//! `rolegate check envelopes|proposals|memory [FILE]`: one JSON verdict line per input
//! line, from the library's own checks ([`rolegate::suite::checkers`]), streamed: a line is
//! read, checked and answered before the next one is read, so memory stays constant
//! whatever the input's size (a line over [`MAX_LINE_BYTES`] gets `line_too_long`
//! unread). Exit code 0 when every line was accepted, 1 when a line was refused or could
//! not be read (the others are still checked), 2 when the input itself cannot be read (a
//! missing file, a FIFO or a device instead of a regular file).

use clap::{Args, ValueEnum};
use std::io::BufReader;
use std::path::PathBuf;

use super::{EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, out};
use rolegate::suite::{CheckKind, Checker, MAX_LINE_BYTES};

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
    /// JSON Lines to check (standard input when absent; a file must be a regular file).
    pub file: Option<PathBuf>,
    /// memory: the user whose memory the writes go to.
    #[arg(long, default_value = "kwame")]
    pub user: String,
}

/// Runs the checker and prints one line per input line as it goes.
pub(crate) fn run(args: &CheckArgs) -> u8 {
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
    let emit = |v: &rolegate::suite::LineVerdict| out(&serde_json::to_string(v).unwrap_or_default());
    let (tally, name) = match &args.file {
        Some(f) => {
            let file = match super::input::regular_file(f) {
                Ok(file) => file,
                Err(e) => {
                    eprintln!("rolegate: {e}");
                    return EXIT_USAGE;
                }
            };
            (checker.check_stream(BufReader::new(file), MAX_LINE_BYTES, emit), f.display().to_string())
        }
        None => (checker.check_stream(std::io::stdin().lock(), MAX_LINE_BYTES, emit), "standard input".to_string()),
    };
    match tally {
        Ok(t) if t.refused == 0 => EXIT_OK,
        Ok(_) => EXIT_MISMATCH,
        Err(e) => {
            eprintln!("rolegate: {name}: {e}");
            EXIT_USAGE
        }
    }
}
