//! The command line. Subcommands only parse arguments and call the library; exit codes
//! are 0 (all as expected), 1 (a row or check did not match) and 2 (unusable input).

mod compare;
mod design;
mod suite;

pub use compare::CompareFormat;
pub use design::CardChoice;

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
    /// Also write every decision as one JSON line to FILE (run id, step, role, kind, code,
    /// redacted detail, timing); what is printed does not change.
    #[arg(long, global = true, value_name = "FILE")]
    pub trace_json: Option<std::path::PathBuf>,
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
        /// The design: single (the ReAct-style loop), fixed, plan or policypal.
        #[arg(long, default_value = "single")]
        design: String,
        /// The model, `fake:<kind>`. single: sensible, obey, loop, wander, hallucinate,
        /// garbage, early_finish; plan: sensible, prose, long, bad_tool, bad_args, write;
        /// policypal: sensible (= parallel), sequential, flail; fixed: ignored.
        #[arg(long, default_value = "fake:sensible")]
        model: String,
        /// The signed-in user.
        #[arg(long, default_value = "kwame")]
        user: String,
        /// The task (default: triage; helpdesk for policypal).
        #[arg(long)]
        task: Option<String>,
        /// Write tools to grant (repeatable).
        #[arg(long)]
        grant: Vec<String>,
        /// policypal: what to do with a confirmation card (default: show it and stop).
        #[arg(long, value_enum)]
        card: Option<design::CardChoice>,
    },
    /// Designs side by side on the same tasks.
    Compare {
        /// Output format.
        #[arg(long, value_enum, default_value_t = compare::CompareFormat::Table)]
        format: compare::CompareFormat,
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
    let export = match &cli.trace_json {
        Some(path) => {
            match crate::agent::TraceExport::install_file(path, std::sync::Arc::new(crate::cost::TokioClock::new())) {
                Ok(e) => Some(e),
                Err(e) => {
                    eprintln!("rolegate: {}: {e}", path.display());
                    return ExitCode::from(EXIT_USAGE);
                }
            }
        }
        None => None,
    };
    let code = runtime.block_on(async {
        match cli.command {
            Command::Suite { files, format } => suite::suite(&files, format).await,
            Command::Run { goal, design, model, user, task, grant, card } => {
                design::run(design::RunArgs { goal, design, model, user, task, grants: grant, card }).await
            }
            Command::Compare { format } => compare::compare(format).await,
        }
    });
    if let Some(Err(e)) = export.map(|e| e.finish()) {
        eprintln!("rolegate: {e}");
        return ExitCode::from(EXIT_USAGE);
    }
    ExitCode::from(code)
}
