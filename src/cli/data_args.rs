//! The data a run reads at run time instead of the compiled-in copy: `--world FILE`,
//! `--policy FILE`, `--call-graph FILE` and `--prompts DIR`. Each is parsed as strictly as the bundled file (unknown fields are
//! refused, ids checked) and refused by name before anything runs; without the flag the
//! bundled data is used.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rolegate::agent::Env;
use rolegate::gate::Policy;
use rolegate::model::prompts;
use rolegate::multi::{CallGraph, install_call_graph, installed_call_graph};
use rolegate::world::WorldData;

/// `--world`, `--policy` and `--prompts`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DataArgs {
    /// The world (users, tickets, documents) to use instead of the bundled data/world.json;
    /// same format, checked the same way.
    #[arg(long, value_name = "FILE")]
    pub world: Option<PathBuf>,
    /// The policy (tasks, access, grants, limits, the roles' scopes) to use instead of the
    /// bundled data/policy.json; same format, checked the same way.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// A folder of system prompts to use instead of the bundled data/prompts/: any of
    /// single.txt, planner.txt, researcher.txt, reviewer.txt, plan.txt, policypal.txt
    /// (the others stay bundled); any other file in it is refused.
    #[arg(long, value_name = "DIR")]
    pub prompts: Option<PathBuf>,
    /// The call graph (which hand-offs the three roles may make: kinds, fields, limits per
    /// edge) to use instead of the bundled data/call_graph.json; checked whole before any
    /// run.
    #[arg(long, value_name = "FILE")]
    pub call_graph: Option<PathBuf>,
}

/// The outcome of installing `--prompts` (once per process).
static PROMPTS: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();

/// Reads every prompt of `dir` and installs them for the process.
fn install_prompts(dir: &Path) -> Result<(), String> {
    let d = dir.display();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("--prompts {d}: {e}"))?;
    let mut set = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| format!("--prompts {d}: {e}"))?.path();
        let file = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        let name = file.strip_suffix(".txt").filter(|n| prompts::by_name(n).is_some()).ok_or_else(|| {
            format!(
                "--prompts {d}: {file} is not a prompt (single, planner, researcher, reviewer, plan, policypal .txt)"
            )
        })?;
        let text = super::input::read_text(&path, prompts::MAX_PROMPT_BYTES as u64)?;
        prompts::check_prompt(name, &text).map_err(|e| format!("--prompts {d}: {e}"))?;
        set.push((name.to_string(), text));
    }
    set.sort();
    prompts::install(set).map_err(|e| format!("--prompts {d}: {e}"))
}

impl DataArgs {
    /// The bundled environment with the world and policy of the flags.
    ///
    /// # Errors
    /// A message naming the file and what is wrong with it.
    pub fn env(&self) -> Result<Env, String> {
        if let Some(dir) = &self.prompts {
            PROMPTS.get_or_init(|| install_prompts(dir)).clone()?;
        }
        if let Some(path) = &self.call_graph {
            let text = super::input::read_text(path, rolegate::multi::MAX_CALL_GRAPH_BYTES as u64)?;
            let graph = CallGraph::from_json(&text).map_err(|e| format!("--call-graph {}: {e}", path.display()))?;
            install_call_graph(graph).map_err(|e| format!("--call-graph {}: {e}", path.display()))?;
        }
        let mut env = Env::bundled().map_err(|e| e.to_string())?;
        if let Some(path) = &self.world {
            let text = super::input::read_text(path, super::input::MAX_INPUT_BYTES)?;
            let world = WorldData::from_json(&text).map_err(|e| format!("--world {}: {e}", path.display()))?;
            env.world = Arc::new(world);
        }
        if let Some(path) = &self.policy {
            let text = super::input::read_text(path, super::input::MAX_INPUT_BYTES)?;
            env.policy = Policy::from_json(&text).map_err(|e| format!("--policy {}: {e}", path.display()))?;
            let problems = rolegate::human::policy_problems(&env.policy);
            if let Some(p) = problems.first() {
                return Err(format!("--policy {}: {p}", path.display()));
            }
        }
        Ok(env)
    }
}

/// SHA-256 of what shapes every run in `env` (world, policy, prices), by name: what a
/// results file's header records so that a resumed or merged run used the same data.
pub(crate) fn env_hashes(env: &Env) -> BTreeMap<String, String> {
    let json = |v: serde_json::Result<String>| rolegate::suite::sha256_hex(v.unwrap_or_default().as_bytes());
    let mut hashes = BTreeMap::from([
        ("world".to_string(), json(serde_json::to_string(&env.world.to_file()))),
        ("policy".to_string(), json(serde_json::to_string(&env.policy))),
        ("prices".to_string(), json(serde_json::to_string(&*env.prices))),
        ("prompts".to_string(), json(serde_json::to_string(&prompts::current_all()))),
    ]);
    // recorded only when given, so results files of the bundled graph stay as they were
    if let Some(graph) = installed_call_graph() {
        hashes.insert("call_graph".to_string(), rolegate::suite::sha256_hex(graph.to_json().as_bytes()));
    }
    hashes
}
