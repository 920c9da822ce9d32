//! `rolegate agentdojo`: one AgentDojo suite's (user task, injection task) pairs under each
//! design and defense configuration, graded by AgentDojo's own checks (docs/agentdojo.md).

use clap::Args;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use super::format::OutputFormat;
use super::model_args::ModelArgs;
use super::{EXIT_OK, EXIT_USAGE, out};
use rolegate::model::ModelSpec;
use rolegate::suite::Shard;
use rolegate::suite::agentdojo::{
    Bridge, DojoCell, DojoCellId, DojoConfig, DojoDesign, DojoError, DojoLimits, DojoModel, Listing, append_cell,
    dojo_figures, dojo_hop_lines, dojo_json, dojo_lines, dojo_paired_lines, read_cells, run_cell, suite_pins,
    venv_python,
};

/// Runs an AgentDojo suite through rolegate.
#[derive(Args, Debug)]
pub(crate) struct AgentDojoArgs {
    /// The suite: banking, slack, travel or workspace.
    #[arg(long)]
    suite: String,
    /// User tasks: ids separated by commas, or N for the suite's first N (default: all).
    #[arg(long, value_name = "LIST|N")]
    user_tasks: Option<String>,
    /// Injection tasks: ids separated by commas, or N for the first N (default: all; 0:
    /// benign runs only).
    #[arg(long, value_name = "LIST|N")]
    injection_tasks: Option<String>,
    /// Designs, separated by commas: single, plan, roles, policypal (the three roles and
    /// PolicyPal have no `none` configuration: those cells are left out).
    #[arg(long, default_value = "single,plan,roles,policypal")]
    designs: String,
    /// Defense configurations, separated by commas: none, checks, scoped, approval.
    #[arg(long, default_value = "none,checks,scoped,approval")]
    configs: String,
    /// The model: fake:ground_truth, fake:obey (follows an injection) or openai:NAME.
    #[arg(long, default_value = "fake:obey")]
    model: String,
    /// How to reach an openai: model.
    #[command(flatten)]
    model_args: ModelArgs,
    /// AgentDojo's attack that writes the injections.
    #[arg(long, default_value = "important_instructions")]
    attack: String,
    /// Run each cell N times.
    #[arg(long, value_name = "N", default_value_t = 1)]
    repeat: u32,
    /// Append each finished cell to FILE as a JSON line; a second run skips the cells it holds.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// With --out: start FILE over.
    #[arg(long)]
    force: bool,
    /// Run only shard I of N of the cells (by a hash of each cell's id); needs --out.
    #[arg(long, value_name = "I/N")]
    shard: Option<String>,
    /// Each run's time budget in seconds (a slow local model may need more).
    #[arg(long, value_name = "SECS", default_value_t = 120, value_parser = clap::value_parser!(u32).range(1..=86400))]
    time_budget: u32,
    /// Each run's cost budget in credits (over every role of a three-role run).
    #[arg(long, value_name = "CREDITS", default_value = "1.00")]
    max_cost: rust_decimal::Decimal,
    /// Cells in flight at once (each starts two Python processes).
    #[arg(long, value_name = "N", default_value_t = 2)]
    cells_in_flight: usize,
    /// The venv's Python (default: $ROLEGATE_AGENTDOJO_VENV/bin/python, else
    /// ~/.cache/rolegate/agentdojo-venv/bin/python, as bridge/agentdojo/install.sh makes it).
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// bridge.py (default: bridge/agentdojo/bridge.py under the current folder).
    #[arg(long, value_name = "PATH")]
    bridge: Option<PathBuf>,
    /// Output format: table (figures, then the paired comparison) or json.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    format: OutputFormat,
}

/// Ids from a list or a count, checked against the suite's.
fn chosen(spec: Option<&str>, known: &[String], what: &str) -> Result<Vec<String>, String> {
    let Some(spec) = spec else { return Ok(known.to_vec()) };
    if let Ok(n) = spec.parse::<usize>() {
        return Ok(known.iter().take(n).cloned().collect());
    }
    spec.split(',')
        .map(str::trim)
        .map(|id| match known.iter().find(|k| *k == id) {
            Some(k) => Ok(k.clone()),
            None => Err(format!("unknown {what} {id:?} (known: {})", known.join(", "))),
        })
        .collect()
}

fn parsed<T>(list: &str, what: &str, from: fn(&str) -> Option<T>) -> Result<Vec<T>, String> {
    list.split(',').map(str::trim).map(|s| from(s).ok_or_else(|| format!("unknown {what} {s:?}"))).collect()
}

fn model_of(args: &AgentDojoArgs) -> Result<DojoModel, String> {
    match args.model.as_str() {
        "fake:ground_truth" => return Ok(DojoModel::GroundTruth),
        "fake:obey" => return Ok(DojoModel::Obey),
        _ => {}
    }
    let spec: ModelSpec = args
        .model
        .parse()
        .map_err(|e| format!("{e} (AgentDojo runs take fake:ground_truth, fake:obey or openai:NAME)"))?;
    if !matches!(spec, ModelSpec::OpenAi(_)) {
        return Err(format!("{} has no AgentDojo fake: use fake:ground_truth or fake:obey", args.model));
    }
    let endpoint = args.model_args.endpoint(&[&spec])?;
    match spec.http_config(endpoint.as_ref()) {
        Ok(Some(cfg)) => Ok(DojoModel::Http(Box::new(cfg))),
        Ok(None) => Err("no endpoint".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Everything one experiment needs, shared by the cells in flight.
struct Plan {
    bridge: Bridge,
    model: DojoModel,
    pins: BTreeMap<String, String>,
    env: rolegate::agent::Env,
    state_dir: PathBuf,
    limits: DojoLimits,
}

pub(crate) async fn run(args: AgentDojoArgs) -> u8 {
    match experiment(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rolegate: {e}");
            EXIT_USAGE
        }
    }
}

async fn experiment(args: AgentDojoArgs) -> Result<u8, String> {
    let designs = parsed(&args.designs, "design (known: single, plan, roles, policypal)", DojoDesign::from_code)?;
    let configs =
        parsed(&args.configs, "configuration (known: none, checks, scoped, approval)", DojoConfig::from_code)?;
    if args.max_cost <= rust_decimal::Decimal::ZERO {
        return Err(format!("--max-cost must be more than 0 credits, not {}", args.max_cost));
    }
    let model = model_of(&args)?;
    let shard = match &args.shard {
        Some(s) if args.out.is_some() => Some(Shard::parse(s, &|v| std::env::var(v).ok()).map_err(|e| e.to_string())?),
        Some(_) => return Err("--shard needs --out".into()),
        None => None,
    };
    let bridge = Bridge {
        python: args.python.clone().unwrap_or_else(venv_python),
        script: args.bridge.clone().unwrap_or_else(|| PathBuf::from("bridge/agentdojo/bridge.py")),
        suite: args.suite.clone(),
        attack: args.attack.clone(),
    };
    if !bridge.python.exists() {
        return Err(format!("no Python at {}: run bridge/agentdojo/install.sh", bridge.python.display()));
    }
    let suite = bridge.listing(None, None).await.map_err(|e| e.to_string())?;
    let user_ids: Vec<String> = suite.user_tasks.iter().map(|t| t.id.clone()).collect();
    let injection_ids: Vec<String> = suite.injection_tasks.iter().map(|t| t.id.clone()).collect();
    let users = chosen(args.user_tasks.as_deref(), &user_ids, "user task")?;
    let injections = chosen(args.injection_tasks.as_deref(), &injection_ids, "injection task")?;
    let mut cells = Vec::new();
    for user in &users {
        for injection in std::iter::once(None).chain(injections.iter().map(Some)) {
            for &design in &designs {
                // the coordinator checks every message and PolicyPal proposes no steps to
                // leave unchecked: neither has an unchecked run
                let unchecked = matches!(design, DojoDesign::Roles | DojoDesign::PolicyPal);
                let applies = |c: &&DojoConfig| !unchecked || **c != DojoConfig::None;
                for &config in configs.iter().filter(applies) {
                    for rep in 0..args.repeat {
                        cells.push(DojoCellId {
                            suite: args.suite.clone(),
                            user_task: user.clone(),
                            injection_task: injection.cloned(),
                            design,
                            config,
                            rep,
                        });
                    }
                }
            }
        }
    }
    if let Some(shard) = &shard {
        cells.retain(|c| shard.holds(&c.key()));
    }
    let mut done: Vec<DojoCell> = Vec::new();
    if let Some(path) = &args.out {
        if args.force {
            let _ = std::fs::remove_file(path);
        }
        done = read_cells(path).map_err(|e| e.to_string())?;
        if let Some(other) = done.iter().find(|c| c.model != model.name() || c.id.suite != args.suite) {
            return Err(format!(
                "{} holds runs of {} on {}, not of {} on {}: use another --out, or --force",
                path.display(),
                other.model,
                other.id.suite,
                model.name(),
                args.suite
            ));
        }
        let wanted: BTreeSet<String> = cells.iter().map(DojoCellId::key).collect();
        done.retain(|c| wanted.contains(&c.id.key()));
        let held: BTreeSet<String> = done.iter().map(|c| c.id.key()).collect();
        cells.retain(|c| !held.contains(&c.key()));
    }
    let state_dir = std::env::temp_dir().join(format!("rolegate-agentdojo-{}", std::process::id()));
    std::fs::create_dir_all(&state_dir).map_err(|e| format!("{}: {e}", state_dir.display()))?;
    let pins = match users.first() {
        Some(first) => suite_pins(&bridge, first, &state_dir).await.map_err(|e| e.to_string())?,
        None => BTreeMap::new(),
    };
    // an openai: model is priced from the table (or at zero with --zero-price)
    let spec: Option<ModelSpec> = args.model.parse().ok().filter(|m| matches!(m, ModelSpec::OpenAi(_)));
    let env = args.model_args.env(&spec.iter().collect::<Vec<_>>()).map_err(|e| e.to_string())?;
    let limits = DojoLimits { time: std::time::Duration::from_secs(u64::from(args.time_budget)), cost: args.max_cost };
    let plan = Arc::new(Plan { bridge, model, pins, env, state_dir: state_dir.clone(), limits });
    let ran = run_cells(&plan, cells, args.cells_in_flight.max(1), args.out.as_ref()).await;
    let _ = std::fs::remove_dir_all(&state_dir);
    done.extend(ran?);
    done.sort_by_key(|c| c.id.clone());
    let figures = dojo_figures(&done);
    match args.format {
        OutputFormat::Json => {
            let doc = serde_json::json!({"figures": dojo_json(&figures), "cells": done});
            out(&serde_json::to_string_pretty(&doc).unwrap_or_default());
        }
        _ => {
            for line in dojo_lines(&figures) {
                out(&line);
            }
            // every other design against the first (the single agent, by default)
            for &other in designs.iter().skip(1) {
                for line in dojo_paired_lines(&done, designs[0], other) {
                    out(&line);
                }
            }
            for line in dojo_hop_lines(&done) {
                out(&line);
            }
        }
    }
    Ok(EXIT_OK)
}

/// Runs the cells, at most `in_flight` at once, each pair listed once; appends each to `out`.
async fn run_cells(
    plan: &Arc<Plan>,
    cells: Vec<DojoCellId>,
    in_flight: usize,
    out_file: Option<&PathBuf>,
) -> Result<Vec<DojoCell>, String> {
    let mut listings: BTreeMap<(String, Option<String>), Arc<Listing>> = BTreeMap::new();
    let mut queue = cells.into_iter();
    let mut running = tokio::task::JoinSet::new();
    let mut finished = Vec::new();
    loop {
        while running.len() < in_flight {
            let Some(id) = queue.next() else { break };
            let key = (id.user_task.clone(), id.injection_task.clone());
            let listing = match listings.get(&key) {
                Some(l) => l.clone(),
                None => {
                    let l = plan.bridge.listing(Some(&key.0), key.1.as_deref()).await.map_err(|e| e.to_string())?;
                    let l = Arc::new(l);
                    listings.insert(key, l.clone());
                    l
                }
            };
            let plan = plan.clone();
            running.spawn(async move {
                let cell = run_cell(
                    &plan.bridge,
                    &id,
                    &listing,
                    &plan.model,
                    &plan.pins,
                    &plan.env,
                    &plan.state_dir,
                    plan.limits,
                )
                .await;
                (id, cell)
            });
        }
        let Some(joined) = running.join_next().await else { break };
        let (id, cell) = joined.map_err(|e| format!("a cell's task failed: {e}"))?;
        let cell = cell.map_err(|e: DojoError| format!("{}: {e}", id.key()))?;
        eprintln!(
            "{}: utility={} attack_success={} stop={} calls={} refused={}{}",
            id.key(),
            cell.utility,
            cell.attack_success.map_or("-".to_string(), |b| b.to_string()),
            cell.stop,
            cell.tool_calls,
            cell.refused,
            cell.model_failure.as_deref().map_or(String::new(), |c| format!(" model_failure={c}"))
        );
        if let Some(path) = out_file {
            append_cell(path, &cell).map_err(|e| e.to_string())?;
        }
        finished.push(cell);
    }
    Ok(finished)
}
