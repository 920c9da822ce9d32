//! Durable runs on the command line: `rolegate run … --store FILE` with `--durability step`
//! (the default with a store: every step committed before the next), `rolegate resume RUN`
//! (continue a run whose process died from its last durable step) and `rolegate runs list`.
//! Exit codes as `run`: 0 done or parked for approval, 1 any other stop, 2 unusable input.

use clap::{Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::desk::{ListFormat, StoreArg, open_existing, request_line};
use super::format::OutputFormat;
use super::{EXIT_USAGE, out};
use rolegate::human::SigningKey;
use rolegate::store::{Durability, DurableRun, RunSpec, StepWriter};

/// `--durability`: when a run's steps are made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DurabilityArg {
    /// Every step is committed to the store before the next one starts (default with a
    /// store); a run whose process died continues with `rolegate resume RUN`.
    Step,
    /// The run is written to the store once, when the command ends.
    Exit,
}

impl From<DurabilityArg> for Durability {
    fn from(d: DurabilityArg) -> Self {
        match d {
            DurabilityArg::Step => Self::Step,
            DurabilityArg::Exit => Self::Exit,
        }
    }
}

/// `rolegate runs …`.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// Every run of the store with its design, durability, status (`interrupted`: resume
    /// it), how many durable steps it holds and how many model exchanges it recorded.
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
}

/// The store's step writer, with the key from the environment.
fn writer(path: &Path) -> Result<Arc<StepWriter>, String> {
    let key = SigningKey::from_env().map_err(|e| e.to_string())?;
    StepWriter::start(path, key).map_err(|e| e.to_string())
}

fn print(run: &DurableRun, path: &Path) -> u8 {
    if run.already_ended {
        out(&format!("{} had already ended ({}); nothing ran. What it printed:", run.run_id, run.end.code));
    }
    for l in &run.end.lines {
        if !out(l) {
            break;
        }
    }
    if let Some(r) = &run.request {
        out(&format!("approval needed: {}", request_line(r)));
        out(&format!(
            "decide with: rolegate approvals approve {} --key <approver's key file> --store {}",
            r.id,
            path.display()
        ));
    }
    super::run_checks::exit_for(&run.end.code)
}

/// Starts a durable run of `spec` in the store at `path`.
pub(crate) async fn run(path: &Path, spec: &RunSpec, env: rolegate::agent::Env) -> u8 {
    let (mut desk, spec) = match super::desk::open_for_run(path, spec, env) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let writer = match writer(path) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    match desk.start_durable(&spec, &writer).await {
        Ok(run) => {
            super::committed(format!("{} stored", run.run_id));
            print(&run, path)
        }
        Err(e) => {
            eprintln!("rolegate: {e} (the steps committed before it are kept: see `rolegate runs list`)");
            EXIT_USAGE
        }
    }
}

/// `rolegate resume RUN`.
pub(crate) async fn resume(run_id: &str, store: &StoreArg) -> u8 {
    let path: PathBuf = store.path.clone();
    let mut desk = match open_existing(&path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let writer = match writer(&path) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    match desk.resume(run_id, &writer).await {
        Ok(run) => {
            super::committed(format!("{} stored", run.run_id));
            print(&run, &path)
        }
        // another live process driving the run is a conflict, not unusable input
        Err(e @ rolegate::store::DeskError::Running { .. }) => {
            eprintln!("rolegate: resume {run_id}: {e}");
            super::EXIT_MISMATCH
        }
        Err(e) => {
            eprintln!("rolegate: resume {run_id}: {e}");
            EXIT_USAGE
        }
    }
}

/// `rolegate runs list`.
pub(crate) fn runs(command: &RunsCommand) -> u8 {
    let RunsCommand::List { format, store } = command;
    let format = match ListFormat::take("runs list", *format) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let rows = match open_existing(&store.path).and_then(|d| d.runs().map_err(|e| e.to_string())) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    match format {
        ListFormat::Json => {
            out(&serde_json::to_string_pretty(&rows).unwrap_or_default());
        }
        ListFormat::Table => {
            out(&format!(
                "{:<10} {:<9} {:<10} {:<17} {:>11} {:>7} {:>9} {:>9}",
                "run", "design", "durability", "status", "checkpoints", "records", "exchanges", "last_step"
            ));
            for r in &rows {
                let durability = match r.durability {
                    Durability::Step => "step",
                    Durability::Exit => "exit",
                };
                let last = r.last_step.map_or_else(|| "-".to_string(), |s| s.to_string());
                if !out(&format!(
                    "{:<10} {:<9} {:<10} {:<17} {:>11} {:>7} {:>9} {:>9}",
                    r.run_id, r.design, durability, r.status, r.checkpoints, r.records, r.exchanges, last
                )) {
                    break;
                }
            }
        }
    }
    super::EXIT_OK
}

/// What `rolegate run` was asked about durability.
pub(crate) struct Wanted<'a> {
    pub design: &'a str,
    pub store: Option<&'a Path>,
    pub durability: Option<DurabilityArg>,
    /// A PolicyPal card decision (`--card`): decided in its own process, written at exit.
    pub card: bool,
    /// How to reach an `openai:` model.
    pub model_args: &'a super::ModelArgs,
    /// multi: a model per role.
    pub role_models: &'a super::RoleModelArgs,
}

impl Wanted<'_> {
    /// The store and durable spec of a run to make durable step by step, `None` for a run
    /// that is not (no store, `--durability exit`, a card decision).
    ///
    /// # Errors
    /// A readable message for a combination that cannot be durable.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn spec(
        &self,
        goal: &str,
        model: &str,
        user: &str,
        task: Option<&str>,
        grants: &[String],
        roles: rolegate::multi::Behaviours,
        claims: rolegate::multi::ClaimMode,
    ) -> Result<Option<(PathBuf, RunSpec)>, String> {
        let single = self.design == "single";
        let path = match (self.store, self.durability) {
            (Some(p), _) => p.to_path_buf(),
            // a single run with a write tool granted keeps its run in the default store
            (None, _) if single && !grants.is_empty() => PathBuf::from(rolegate::store::DEFAULT_STORE),
            (None, Some(_)) => return Err("--durability needs a store: --store FILE".into()),
            (None, None) => return Ok(None),
        };
        if self.durability == Some(DurabilityArg::Exit) {
            if !single {
                return Err(format!(
                    "--durability exit keeps only single runs; a {} run with a store is durable step by step",
                    self.design
                ));
            }
            return Ok(None);
        }
        if self.card {
            if self.durability.is_some() {
                return Err(
                    "--card decides a PolicyPal card in this process and writes it at exit; leave out --durability"
                        .into(),
                );
            }
            return Ok(None);
        }
        let design: rolegate::design::Design = self.design.parse().map_err(|e| format!("{e}"))?;
        let task = task.map_or_else(|| design.default_task().to_string(), str::to_string);
        let model = if !single && model == "auto" { "fake:sensible" } else { model };
        if design == rolegate::design::Design::Multi && !grants.is_empty() {
            return Err("--grant does not apply to --design multi: no role may hold a write tool".into());
        }
        let http = super::durable_http::http_spec(design, model, roles, self.model_args, self.role_models)?;
        let fake = match (single, &http, model.strip_prefix("fake:")) {
            (true, _, _) | (false, Some(_), _) => String::new(),
            (false, None, Some(f)) => f.to_string(),
            (false, None, None) => {
                return Err(format!("model {model:?}: a {} run takes fake:KIND or openai:NAME", self.design));
            }
        };
        let spec = RunSpec::new(model, user, &task, grants).durable(rolegate::store::DurableSpec {
            design: if single { "single".into() } else { self.design.to_string() },
            goal: goal.to_string(),
            fake,
            roles,
            claims,
            http,
        });
        Ok(Some((path, spec)))
    }
}
