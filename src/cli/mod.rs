//! The command line. Subcommands only parse arguments and call the library; exit codes
//! are 0 (all as expected), 1 (a row or check did not match) and 2 (unusable input).

mod approvals;
mod desk;
mod outbox;
mod parked;
mod suite;

pub use approvals::ApprovalsCommand;
pub use desk::{ListFormat, StoreArg};

use clap::{Parser, Subcommand, ValueEnum};
use std::io::Write;
use std::process::ExitCode;

/// rolegate: agents whose every safeguard is code outside the model.
#[derive(Debug, Parser)]
#[command(name = "rolegate", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned text, one line per row.
    Table,
    /// One JSON object per line.
    Jsonl,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run scenario tables (the bundled ones when no file is given).
    Suite {
        /// Scenario files (JSON Lines).
        files: Vec<std::path::PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Run one goal with a fake model and print its trace.
    Run {
        /// The goal.
        goal: String,
        /// The model: `fake:<kind>` (sensible, obey, loop, wander, hallucinate, garbage,
        /// early_finish), `scripted:research`, or `auto` (the research script for the reply
        /// task, which parks its e-mail for a person; fake:sensible otherwise).
        #[arg(long, default_value = "auto")]
        model: String,
        /// The signed-in user.
        #[arg(long, default_value = "kwame")]
        user: String,
        /// The task.
        #[arg(long, default_value = "triage")]
        task: String,
        /// Write tools to grant (repeatable).
        #[arg(long)]
        grant: Vec<String>,
        /// Keep the run in this store (default for runs that may park: rolegate.db).
        #[arg(long, value_name = "PATH")]
        store: Option<std::path::PathBuf>,
    },
    /// Approval requests in the store: list, approve, deny, cancel.
    Approvals {
        /// What to do.
        #[command(subcommand)]
        command: ApprovalsCommand,
    },
    /// The e-mails really sent, from the store.
    Outbox {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
}

/// Exit code: everything as expected.
pub const EXIT_OK: u8 = 0;
/// Exit code: a row or check did not match.
pub const EXIT_MISMATCH: u8 = 1;
/// Exit code: unusable input.
pub const EXIT_USAGE: u8 = 2;

/// Writes a line to stdout; a closed pipe is not an error.
pub(crate) fn out(line: &str) -> bool {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}").is_ok()
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { EXIT_OK });
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rolegate: cannot start the runtime: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let code = runtime.block_on(async {
        match cli.command {
            Command::Suite { files, format } => suite::suite(&files, format).await,
            Command::Run { goal, model, user, task, grant, store } => {
                let spec = crate::store::RunSpec::new(&model, &user, &task, &grant);
                match store {
                    Some(path) => parked::run_stored(&path, &spec, &goal).await,
                    None if !spec.grants.is_empty() => {
                        parked::run_stored(std::path::Path::new(crate::store::DEFAULT_STORE), &spec, &goal).await
                    }
                    None => suite::run_one(&goal, &spec.model, &user, &task, &grant).await,
                }
            }
            Command::Approvals { command } => approvals::approvals(command).await,
            Command::Outbox { format, store } => outbox::outbox(&store, format),
        }
    });
    ExitCode::from(code)
}
