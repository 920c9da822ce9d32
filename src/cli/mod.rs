//! The command line. Subcommands only parse arguments and call the library; exit codes
//! are 0 (all as expected), 1 (a row or check did not match) and 2 (unusable input).

mod bench;
mod compare;
pub mod run_multi;
mod suite;

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

/// Formats of a single report (`compare`, `bench`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// Aligned text.
    Table,
    /// One JSON object.
    Json,
}

/// How a `run` is carried out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Design {
    /// One agent, one gate.
    #[default]
    Single,
    /// Planner, researcher and reviewer as actors behind a coordinator.
    Multi,
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
        /// The model, `fake:<kind>` (sensible, obey, loop, wander, hallucinate, garbage, early_finish).
        #[arg(long, default_value = "fake:sensible")]
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
        /// `single` (default) or `multi` (three roles; `--model`, `--task` and `--grant` do
        /// not apply).
        #[arg(long, value_enum, default_value_t = Design::Single)]
        design: Design,
        /// The planner's fake behaviour (multi): sensible, grant, delegate.
        #[arg(long, default_value = "sensible")]
        planner: crate::multi::PlannerKind,
        /// The researcher's fake behaviour (multi): sensible, relay, paraphrase, obey,
        /// forge_sender, spawn, made_up_source.
        #[arg(long, default_value = "sensible")]
        researcher: crate::multi::ResearcherKind,
        /// The reviewer's fake behaviour (multi): sensible, obey, never_approve.
        #[arg(long, default_value = "sensible")]
        reviewer: crate::multi::ReviewerKind,
        /// Claims (multi): strict or free.
        #[arg(long, default_value = "strict")]
        claims: crate::multi::ClaimMode,
    },
    /// One task as a single agent and as three roles, with the role scopes and routes.
    Compare {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
        format: ReportFormat,
    },
    /// Throughput and memory of three-role runs, with ratios against the peers.
    Bench(bench::BenchArgs),
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
            Command::Run { goal, design: Design::Multi, user, planner, researcher, reviewer, claims, .. } => {
                let roles = crate::multi::Behaviours { planner, researcher, reviewer };
                run_multi::run(&goal, run_multi::MultiFlags { user, roles, claims }).await
            }
            Command::Run { goal, model, user, task, grant, .. } => {
                suite::run_one(&goal, &model, &user, &task, &grant).await
            }
            Command::Compare { format } => compare::run(format).await,
            Command::Bench(args) => bench::run(args).await,
        }
    });
    ExitCode::from(code)
}
