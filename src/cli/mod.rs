//! The command line. Subcommands only parse arguments and call the library; exit codes
//! are 0 (all as expected), 1 (a row or check did not match; for `run`: the run stopped
//! for any reason but `done` or a parked approval) and 2 (unusable input).

/// Every line the binary prints goes through [`rolegate::security::terminal_safe`]: these
/// shadow the standard macros for this module and every module below it (declared after
/// them), so no untrusted text (a model's answer, a results file's lines, a file quoted in
/// an error) reaches a terminal with its escape sequences or hidden characters live.
macro_rules! println {
    () => { std::println!() };
    ($($arg:tt)*) => { std::println!("{}", rolegate::security::terminal_safe(&format!($($arg)*))) };
}

/// As [`println!`], on standard error.
macro_rules! eprintln {
    () => { std::eprintln!() };
    ($($arg:tt)*) => { std::eprintln!("{}", rolegate::security::terminal_safe(&format!($($arg)*))) };
}

mod agentdojo;
mod approvals;
mod approvers;
mod bench;
mod bench_http;
mod check;
mod compare;
mod data_args;
mod design;
mod desk;
mod durable;
mod durable_http;
mod experiment;
mod format;
mod input;
mod mcp;
mod merge;
mod model_args;
#[cfg(feature = "otlp")]
mod otlp;
mod outbox;
mod parked;
mod report;
mod run;
mod run_checks;
pub mod run_multi;
pub mod run_row;
mod store_check;
mod suite;

pub use approvals::ApprovalsCommand;
pub use approvers::ApproversCommand;
pub use desk::StoreArg;
pub use durable::{DurabilityArg, RunsCommand};
pub use model_args::{ModelArgs, RoleModelArgs};
pub use store_check::StoreCommand;

use clap::{Parser, Subcommand};
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
    /// Export the run's spans (run, invoke_agent per role turn, chat per model call,
    /// execute_tool per call, apply_guardrail per refusal; every attribute redacted) over
    /// OTLP/HTTP to the collector at URL (`/v1/traces` is added); without it the standard
    /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT are read.
    #[arg(long, global = true, value_name = "URL")]
    pub otlp: Option<String>,
}

pub use format::OutputFormat;

/// Formats of a single report (`bench`): `table` or `json` of the shared vocabulary
/// ([`OutputFormat`]; `bench` refuses the others before it runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportFormat {
    /// Aligned text.
    Table,
    /// One JSON object.
    Json,
}

impl ReportFormat {
    /// `json` for [`OutputFormat::Json`], `table` otherwise (the caller checked the value).
    pub(crate) fn of(f: OutputFormat) -> Self {
        if f == OutputFormat::Json { Self::Json } else { Self::Table }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run scenario tables (the bundled ones when no file is given).
    Suite {
        /// Scenario files (JSON Lines).
        files: Vec<std::path::PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
        /// Run every row with this model instead of the row's fake: `fake:KIND` or
        /// `openai:NAME`. An openai: model also replaces the role behaviours of the
        /// multi rows (every role asks it); a fake: kind leaves those on their behaviours.
        /// With --matrix: the model decides instead of the compromised fakes (the single
        /// agent, and every role for an openai: model).
        #[arg(long)]
        model: Option<String>,
        /// How to reach an openai: model.
        #[command(flatten)]
        model_args: ModelArgs,
        /// A model per role for the multi rows (default: --model).
        #[command(flatten)]
        role_models: RoleModelArgs,
        /// Run the defense matrix instead: every benign task, as it is and with each
        /// payload of the catalog planted, under every defense configuration.
        #[arg(long)]
        matrix: bool,
        /// The attack catalog (default: the bundled data/attacks.jsonl).
        #[arg(long, value_name = "FILE")]
        attacks: Option<std::path::PathBuf>,
        /// --matrix: the benign tasks (default: the bundled data/benign_tasks.jsonl).
        #[arg(long, value_name = "FILE")]
        tasks: Option<std::path::PathBuf>,
        /// --matrix: add after each payload its variants under these transforms
        /// (comma-separated: base64, rot13, leetspeak, homoglyphs, zero_width, split), each
        /// a payload of its own with the id `ID~NAME`.
        #[arg(long, value_name = "LIST")]
        transforms: Option<String>,
        /// --matrix: also run payloads made from attack templates (AgentDojo's styles, in
        /// this project's words): `all`, or names separated by commas (important_instructions,
        /// tool_knowledge, ignore_previous, injecagent, direct); one payload per template and
        /// catalog payload, filled per task, user and model, with figures per template.
        #[arg(long, value_name = "NAMES")]
        templates: Option<String>,
        /// Run each cell (matrix: task x payload x configuration; rows: row) N times;
        /// every rate is then printed with its 95% Wilson interval.
        #[arg(long, value_name = "N")]
        repeat: Option<u32>,
        /// Append each finished cell as one JSON line to FILE (after a header naming the
        /// experiment); running again with the same FILE skips the cells it holds.
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
        /// With --out: start FILE over instead of resuming it.
        #[arg(long)]
        force: bool,
        /// Run only shard I of N (0-based) of the cells, chosen by a SHA-256 of each cell's
        /// id; `env/N` reads I from JOB_COMPLETION_INDEX (Kubernetes Indexed Job) or
        /// SLURM_ARRAY_TASK_ID (Slurm array). Needs --out; `rolegate merge` combines the
        /// files.
        #[arg(long, value_name = "I/N")]
        shard: Option<String>,
        /// Most cells (matrix cells or rows) in flight at once (default: with an openai:
        /// model, its --max-connections, so that no cell spends its time budget waiting for a
        /// connection; else 64)
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
        cells_in_flight: Option<u16>,
        /// Each cell's time budget in seconds, instead of the designs' own 60 (a slow local
        /// model may need more)
        #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u32).range(1..=86400))]
        time_budget: Option<u32>,
    },
    /// Combine the --out files of shards (or of any runs of one experiment) into the
    /// tables one run prints; refuses overlapping, missing or mismatched cells by name.
    Merge(merge::MergeArgs),
    /// Check JSON Lines of envelopes, proposals or memory writes with the library's own
    /// checks; one JSON verdict line per input line.
    Check(check::CheckArgs),
    /// Run the suite and the defense matrix and write one self-contained HTML page.
    Report(report::ReportArgs),
    /// Run one goal and print its trace.
    Run(run::RunArgs),
    /// Continue a durable run whose process died, from its last durable step (a run that
    /// ended is shown as it ended; nothing runs twice).
    Resume {
        /// The run id, e.g. run-3 (see `rolegate runs list`).
        run: String,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
    /// The runs in the store: `runs list`.
    Runs {
        /// What to do.
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// Approval requests in the store: list, approve, deny, cancel.
    Approvals {
        /// What to do.
        #[command(subcommand)]
        command: ApprovalsCommand,
    },
    /// The approver registry: add an approver (a key pair; the private key to a file), list.
    Approvers {
        /// What to do.
        #[command(subcommand)]
        command: ApproversCommand,
    },
    /// The e-mails really sent, from the store.
    Outbox {
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
    /// The store file itself: `store check` lists every row set aside.
    Store {
        /// What to do.
        #[command(subcommand)]
        command: StoreCommand,
    },
    /// Designs side by side on the same tasks.
    Compare {
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
        /// Run the model-driven designs (single agent, plan's planner, ReAct, PolicyPal and
        /// every role) with `openai:NAME` instead of their fakes; the plan checks and the
        /// guard rows keep their fakes.
        #[arg(long)]
        model: Option<String>,
        /// How to reach an openai: model.
        #[command(flatten)]
        model_args: ModelArgs,
        /// A model per role for the three-role design (default: --model).
        #[command(flatten)]
        role_models: RoleModelArgs,
        /// The tasks to compare the designs on (default: the bundled
        /// data/design_tasks.jsonl); same format, checked the same way.
        #[arg(long, value_name = "FILE")]
        tasks: Option<std::path::PathBuf>,
    },
    /// Throughput and memory of three-role runs, with ratios against the peers.
    Bench(bench::BenchArgs),
    /// Run an AgentDojo suite (user tasks x injection tasks x designs x defenses) through
    /// its tools served over MCP, graded by AgentDojo's own checks (docs/agentdojo.md).
    Agentdojo(agentdojo::AgentDojoArgs),
    /// MCP tool servers: list a server's tools with the digests a policy pins them by.
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
}

/// Exit code: everything as expected.
pub const EXIT_OK: u8 = 0;
/// Exit code: a row or check did not match.
pub const EXIT_MISMATCH: u8 = 1;
/// Exit code: unusable input.
pub const EXIT_USAGE: u8 = 2;

/// The `--trace-json` export of this process, once installed.
static EXPORT: std::sync::OnceLock<rolegate::agent::TraceExport> = std::sync::OnceLock::new();
/// What a command already committed to the store, said when a later error ends it.
static COMMITTED: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Writes out and flushes every output sink (`--trace-json`); the desk calls it just
/// before each commit, so a sink that cannot be written stops the command before its
/// effect. Says why not.
pub(crate) fn flush_sinks() -> Result<(), String> {
    match EXPORT.get() {
        Some(export) => export.finish().map(|_| ()).map_err(|e| format!("--trace-json: {e}")),
        None => Ok(()),
    }
}

/// Records what a command committed, for the message of an error that follows it.
pub(crate) fn committed(what: String) {
    let _ = COMMITTED.set(what);
}

/// The OTLP traces URL of `--otlp` or the standard variables, if any (see `otlp.rs`).
#[cfg(feature = "otlp")]
fn otlp_endpoint(flag: Option<&str>) -> Option<String> {
    otlp::endpoint(flag, |name| std::env::var(name).ok())
}

/// Without the otlp feature only the flag asks for an export (and is refused).
#[cfg(not(feature = "otlp"))]
fn otlp_endpoint(flag: Option<&str>) -> Option<String> {
    flag.map(str::to_string)
}

/// Writes a line to stdout; a closed pipe is not an error. A secret the process was given
/// (the API key, the signing key) is replaced whatever line it is in.
pub(crate) fn out(line: &str) -> bool {
    let line = rolegate::security::hide_secrets(line);
    let line = rolegate::security::terminal_safe(&line);
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}").is_ok()
}

/// Entry point of the binary: parse, start the runtime and the exporters, run the
/// command, flush the exporters.
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
    let exporters = match Exporters::install(&cli) {
        Ok(e) => e,
        Err(code) => return code,
    };
    let code = runtime.block_on(dispatch(cli.command));
    exporters.finish(code)
}

/// Where the spans and the decision lines go besides the terminal: the OTLP exporter
/// (`--otlp` or the standard environment) and the JSON lines file (`--trace-json`).
struct Exporters {
    /// The OTLP pipeline; flushed when the command ends.
    #[cfg(feature = "otlp")]
    otel: Option<otlp::Otlp>,
    /// The trace export (also held in [`EXPORT`]); finished when the command ends.
    export: Option<rolegate::agent::TraceExport>,
}

impl Exporters {
    /// Installs what the command line asks for; an unusable path or endpoint is a usage
    /// error (printed) before anything runs.
    fn install(cli: &Cli) -> Result<Self, ExitCode> {
        let usage = |e: &dyn std::fmt::Display| {
            eprintln!("rolegate: {e}");
            ExitCode::from(EXIT_USAGE)
        };
        let otlp_url = otlp_endpoint(cli.otlp.as_deref());
        if let (Some(_), Some(path)) = (&otlp_url, &cli.trace_json) {
            input::output_path(path).map_err(|e| usage(&e))?;
        }
        match (&cli.trace_json, otlp_url) {
            #[cfg(feature = "otlp")]
            (path, Some(url)) => {
                let (otel, export) = otlp::install(&url, path.as_deref()).map_err(|e| usage(&e))?;
                if let Some(e) = &export {
                    let _ = EXPORT.set(e.clone());
                }
                Ok(Self { otel: Some(otel), export })
            }
            #[cfg(not(feature = "otlp"))]
            (_, Some(_)) => Err(usage(&"--otlp: this binary was built without the otlp feature")),
            (Some(path), None) => {
                input::output_path(path).map_err(|e| usage(&e))?;
                let clock = std::sync::Arc::new(rolegate::cost::TokioClock::new());
                let export = rolegate::agent::TraceExport::install_file(path, clock)
                    .map_err(|e| usage(&format_args!("{}: {e}", path.display())))?;
                let _ = EXPORT.set(export.clone());
                Ok(Self::none(Some(export)))
            }
            (None, None) => Ok(Self::none(None)),
        }
    }

    fn none(export: Option<rolegate::agent::TraceExport>) -> Self {
        Self {
            #[cfg(feature = "otlp")]
            otel: None,
            export,
        }
    }

    /// Sends the spans and closes the trace file on every exit (a collector that cannot be
    /// reached is a warning); a failed trace file turns `code` into 2, or 1 after a commit.
    fn finish(self, code: u8) -> ExitCode {
        #[cfg(feature = "otlp")]
        if let Some(otel) = self.otel {
            otel.finish();
        }
        if let Some(Err(e)) = self.export.map(|e| e.finish()) {
            // effects last: an error after a commit says what was already done, exit 1
            if let Some(done) = COMMITTED.get() {
                eprintln!("rolegate: {e}; already done and kept in the store: {done}");
                return ExitCode::from(EXIT_MISMATCH);
            }
            eprintln!("rolegate: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
        ExitCode::from(code)
    }
}

/// `rolegate mcp …`.
#[derive(clap::Subcommand, Debug)]
pub enum McpCommand {
    /// Start (or reach) each server, list its tools (name, digest, problems) and let it go; exit 1 when
    /// a tool has a problem (a poisoned description, a schema that cannot be checked).
    List(mcp::McpListArgs),
}

/// Runs one subcommand; its exit code.
async fn dispatch(command: Command) -> u8 {
    match command {
        Command::Suite {
            files,
            format,
            model,
            model_args,
            role_models,
            matrix,
            attacks,
            tasks,
            transforms,
            templates,
            repeat,
            out,
            force,
            shard,
            cells_in_flight,
            time_budget,
        } => {
            suite::suite(suite::SuiteArgs {
                files: &files,
                format,
                model: model.as_deref(),
                model_args: &model_args,
                role_models: &role_models,
                matrix,
                attacks: attacks.as_deref(),
                tasks: tasks.as_deref(),
                transforms: transforms.as_deref(),
                templates: templates.as_deref(),
                repeat,
                out: out.as_deref(),
                force,
                shard: shard.as_deref(),
                cells_in_flight: cells_in_flight.map(usize::from),
                time_budget: time_budget.map(|s| std::time::Duration::from_secs(u64::from(s))),
            })
            .await
        }
        Command::Merge(args) => merge::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Report(args) => report::run(args).await,
        Command::Run(args) => run::run(args).await,
        Command::Compare { format, model, model_args, role_models, tasks } => {
            compare::compare(format, model.as_deref(), &role_models, &model_args, tasks.as_deref()).await
        }
        Command::Bench(args) => bench::run(args).await,
        Command::Approvals { command } => approvals::approvals(command).await,
        Command::Resume { run, store } => durable::resume(&run, &store).await,
        Command::Runs { command } => durable::runs(&command),
        Command::Outbox { format, store } => outbox::outbox(&store, format),
        Command::Store { command } => store_check::store(&command),
        Command::Approvers { command } => approvers::approvers(command),
        Command::Mcp { command: McpCommand::List(args) } => mcp::list(&args).await,
        Command::Agentdojo(args) => agentdojo::run(args).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[test]
    fn the_command_line_is_consistent_and_parses_the_documented_forms() {
        Cli::command().debug_assert();
        let parsed = Cli::try_parse_from(["rolegate", "compare", "--format", "json"]).unwrap();
        assert!(matches!(parsed.command, Command::Compare { .. }));
        let parsed =
            Cli::try_parse_from(["rolegate", "run", "--design", "policypal", "--card", "confirm", "goal"]).unwrap();
        assert!(matches!(parsed.command, Command::Run(ref a) if a.design == "policypal" && a.card.is_some()));
        assert!(Cli::try_parse_from(["rolegate", "compare", "--format", "yaml"]).is_err());
    }
}
