//! `rolegate suite` (the scenario tables, or the defense matrix) and `rolegate run`
//! (single design).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, ModelArgs, OutputFormat, RoleModelArgs, out};
use rolegate::agent::Env;
use rolegate::eval::bundled_single;
use rolegate::eval::{AnyRow, RowFiles, bundled_attack_classes, bundled_multi, parse_any_table_in};
use rolegate::lab::{Attack, bundled_attacks, parse_catalog};
use rolegate::lab::{DeciderSpec, LabConfig};
use rolegate::model::ModelSpec;
use rolegate::multi::{Behaviours, MultiEnv, RoleSetup};
use rolegate::report::junit;
use rolegate::suite::{MatrixSpec, bundled_benign_tasks, parse_benign_tasks, parse_benign_tasks_in};
use rolegate::suite::{RowResult, StoredRow, run_rows_bounded};
use rolegate::world::WorldData;

/// The catalog: `file`, or the bundled one.
pub(crate) fn catalog(file: Option<&Path>) -> Result<Arc<[Attack]>, String> {
    match file {
        None => bundled_attacks().map_err(|e| e.to_string()),
        Some(f) => {
            let name = f.display().to_string();
            let text = super::input::read_text(f, super::input::MAX_INPUT_BYTES)?;
            parse_catalog(&text, &name).map(Arc::from).map_err(|e| e.to_string())
        }
    }
}

/// The rows to run: with no file, the bundled single-agent table then the bundled
/// multi-agent one; with files, each line is a single or a multi row by its `design`.
/// Catalog ids in rows are looked up in `catalog`.
pub(crate) fn load(files: &[PathBuf], catalog: &[Attack]) -> Result<Vec<AnyRow>, String> {
    if files.is_empty() {
        let mut rows: Vec<AnyRow> =
            bundled_single().map_err(|e| e.to_string())?.into_iter().map(AnyRow::Single).collect();
        rows.extend(bundled_multi().map_err(|e| e.to_string())?.into_iter().map(AnyRow::Multi));
        rows.extend(bundled_attack_classes().map_err(|e| e.to_string())?);
        return Ok(rows);
    }
    let mut rows = Vec::new();
    for f in files {
        let name = f.display().to_string();
        let text = super::input::read_text(f, super::input::MAX_INPUT_BYTES)?;
        // `world_file` and `attacks_file` are found next to the rows file
        let mut shared = RowFiles::in_dir(f.parent().unwrap_or(Path::new(".")));
        rows.extend(parse_any_table_in(&text, &name, catalog, &mut shared).map_err(|e| e.to_string())?);
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(dup) = rows.iter().find(|r| !seen.insert(r.id().to_string())) {
        return Err(format!("row id {} is used in more than one file", dup.id()));
    }
    Ok(rows)
}

/// The matrix spec: `tasks` and `attacks` files, or the bundled ones; the tasks' users
/// and targets are checked against `world` (the bundled one when `None`).
pub(crate) fn matrix_spec(
    tasks: Option<&Path>,
    attacks: Option<&Path>,
    world: Option<&WorldData>,
) -> Result<MatrixSpec, String> {
    let tasks = match tasks {
        None => bundled_benign_tasks().map_err(|e| e.to_string())?,
        Some(f) => {
            let name = f.display().to_string();
            let text = super::input::read_text(f, super::input::MAX_INPUT_BYTES)?;
            match world {
                Some(w) => parse_benign_tasks_in(&text, &name, w).map_err(|e| e.to_string())?,
                None => parse_benign_tasks(&text, &name).map_err(|e| e.to_string())?,
            }
        }
    };
    Ok(MatrixSpec { tasks, attacks: catalog(attacks)?, ..MatrixSpec::bundled().map_err(|e| e.to_string())? })
}

/// What `--model` (and the per-role flags) select: the single rows' decider, the multi
/// rows' real role models (`None` when every role keeps its behaviour), and the
/// environment priced for them.
pub(crate) struct Models {
    pub decider: Option<DeciderSpec>,
    pub roles: Option<RoleSetup>,
    pub env: Env,
}

/// The models a `--model` value and the per-role flags select.
pub(crate) fn model_setup(model: Option<&str>, roles: &RoleModelArgs, args: &ModelArgs) -> Result<Models, String> {
    let spec = model.map(str::parse::<ModelSpec>).transpose().map_err(|e| e.to_string())?;
    let role_specs = roles.resolve(spec.as_ref().unwrap_or(&ModelSpec::default()))?;
    let mut specs: Vec<&ModelSpec> = spec.iter().collect();
    specs.extend(role_specs.all().into_iter().map(|(_, m)| m));
    let endpoint = args.endpoint(&specs)?;
    let env = args.env(&specs)?;
    let decider =
        spec.map(|m| DeciderSpec::from_model(&m, endpoint.as_ref())).transpose().map_err(|e| e.to_string())?;
    let setup =
        RoleSetup::from_specs(Behaviours::default(), &role_specs, endpoint.as_ref()).map_err(|e| e.to_string())?;
    let setup = roles.with_max_tokens(setup)?;
    Ok(Models { decider, roles: (!setup.all_fake()).then_some(setup), env })
}

/// Everything `suite` and `report` share: the rows and the environments to run them in.
pub(crate) struct Loaded {
    pub rows: Vec<AnyRow>,
    pub env: Arc<Env>,
    pub menv: Arc<MultiEnv>,
    pub decider: Option<DeciderSpec>,
    pub roles: Option<RoleSetup>,
}

pub(crate) fn load_all(
    files: &[PathBuf],
    attacks: Option<&Path>,
    model: Option<&str>,
    role_models: &RoleModelArgs,
    args: &ModelArgs,
) -> Result<Loaded, String> {
    let catalog = catalog(attacks)?;
    let rows = load(files, &catalog)?;
    let Models { decider, roles, env } = model_setup(model, role_models, args)?;
    let menv = MultiEnv::new(&env).map_err(|e| e.to_string())?;
    Ok(Loaded { rows, env: Arc::new(env), menv, decider, roles })
}

/// Runs every row; `Err` names the first row that could not be carried out.
/// How many cells run at once: `--cells-in-flight`, else the real model's connection limit
/// (the smallest of the models given: a cell makes one model request at a time, so no cell
/// then waits for a connection on its own time budget), else 64 for the fakes.
pub(crate) fn cells_in_flight(a: &SuiteArgs<'_>, single: Option<&DeciderSpec>, roles: Option<&RoleSetup>) -> usize {
    if let Some(n) = a.cells_in_flight {
        return n;
    }
    let single = match single {
        Some(DeciderSpec::Http(cfg)) => Some(cfg),
        _ => None,
    };
    let roles = roles.into_iter().flat_map(|r| [&r.planner, &r.researcher, &r.reviewer]).flatten();
    single.into_iter().chain(roles).map(|cfg| cfg.endpoint.connections.max()).min().unwrap_or(64)
}

/// Runs the loaded rows, at most `in_flight` at once.
pub(crate) async fn results(loaded: Loaded, in_flight: usize) -> Result<Vec<RowResult>, String> {
    let models = (loaded.decider.as_ref(), loaded.roles.as_ref());
    run_rows_bounded(loaded.rows, &loaded.env, &loaded.menv, models, in_flight)
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())
}

/// What `suite` was asked for.
pub(crate) struct SuiteArgs<'a> {
    pub files: &'a [PathBuf],
    pub format: OutputFormat,
    pub model: Option<&'a str>,
    pub model_args: &'a ModelArgs,
    pub role_models: &'a RoleModelArgs,
    pub matrix: bool,
    pub attacks: Option<&'a Path>,
    pub tasks: Option<&'a Path>,
    pub transforms: Option<&'a str>,
    pub templates: Option<&'a str>,
    pub repeat: Option<u32>,
    pub out: Option<&'a Path>,
    pub force: bool,
    pub shard: Option<&'a str>,
    pub cells_in_flight: Option<usize>,
    pub time_budget: Option<std::time::Duration>,
}

/// Runs the tables (or the matrix) and prints the outcome, in table order. Rows are
/// independent (each builds its own world), so they all run concurrently. With `model`,
/// every single row runs with that model instead of its fake; an `openai:` model (or a
/// per-role one) also replaces the role behaviours of the multi rows (a `fake:` kind leaves
/// them be).
pub(crate) async fn suite(a: SuiteArgs<'_>) -> u8 {
    if a.matrix {
        return super::experiment::matrix(&a).await;
    }
    if a.tasks.is_some() || a.transforms.is_some() || a.templates.is_some() || a.time_budget.is_some() {
        eprintln!(
            "rolegate: --tasks, --transforms, --templates and --time-budget are for --matrix (a row states its own limits)"
        );
        return EXIT_USAGE;
    }
    if a.repeat.is_some() || a.out.is_some() || a.shard.is_some() || a.force {
        return super::experiment::rows(&a).await;
    }
    let loaded = match load_all(a.files, a.attacks, a.model, a.role_models, a.model_args) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let in_flight = cells_in_flight(&a, loaded.decider.as_ref(), loaded.roles.as_ref());
    let results = match results(loaded, in_flight).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let matching = results.iter().filter(|r| r.matches()).count();
    if a.format == OutputFormat::Junit {
        let _ = out(junit::rows(&results).trim_end());
        return if matching == results.len() { EXIT_OK } else { EXIT_MISMATCH };
    }
    let rows: Vec<(String, StoredRow)> = results.iter().map(|r| (r.id().to_string(), StoredRow::of(r))).collect();
    let code = super::experiment::print_rows(&rows, a.format, false);
    super::model_args::print_connection_times(a.format == OutputFormat::Table);
    code
}

/// Runs one goal and prints the trace and the outcome.
pub(crate) async fn run_one(
    goal: &str,
    model: &str,
    args: &ModelArgs,
    user: &str,
    task: &str,
    grants: &[String],
) -> u8 {
    let (decider, env) = match model_setup(Some(model), &RoleModelArgs::default(), args) {
        Ok(Models { decider: Some(d), env, .. }) => (d, env),
        Ok(Models { decider: None, .. }) => return EXIT_USAGE,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let cfg =
        LabConfig { decider, user: user.into(), task: task.into(), grants: grants.to_vec(), ..LabConfig::default() };
    let mut lab = cfg.build(&env);
    match lab.agent.run(goal, "run-1").await {
        Ok(run) => {
            out(rolegate::design::TRACE_HEADER);
            for l in run.trace().lines() {
                out(&l);
            }
            out(rolegate::design::TRACE_LEGEND);
            out(&rolegate::design::usage_line("agent", &run.ledger().summary()));
            if let Some(a) = run.state.answer() {
                out(&rolegate::design::answer_line(a));
            }
            out(&format!(
                "{} {} calls={:?} emails={}",
                run.state.status().name(),
                run.reason(),
                run.calls(),
                lab.world.outbox.len()
            ));
            super::run_checks::exit_for(run.state.status().name())
        }
        Err(e) => {
            eprintln!("rolegate: {e}");
            EXIT_USAGE
        }
    }
}
