//! What a run ran on besides its model, recorded with it: the world, the policy, the
//! prices, the system prompts and the call graph. Each is kept as the digest of what the
//! run used and, when it was not the bundled copy, as its content too; the run's row is
//! signed, so neither can be edited. Every command that touches the run later (`resume`,
//! `approvals`) builds its environment from this record, never from the bundled data or
//! the flags of the moment, and refuses by name a run whose inputs it cannot rebuild
//! exactly (`resume_inputs_differ`): a bundled file changed since, or another set of
//! prompts or call graph already installed in this process.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::agent::Env;
use crate::cost::PriceTable;
use crate::gate::Policy;
use crate::model::prompts;
use crate::multi::{CallGraph, install_call_graph, installed_call_graph};
use crate::suite::sha256_hex;
use crate::world::WorldData;

/// The inputs of a run, by digest, with the content of those that were not bundled.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunData {
    /// SHA-256 of each input as the run used it: `world`, `policy`, `prices`, `prompts`,
    /// and `call_graph` when one was given.
    pub digests: BTreeMap<String, String>,
    /// The world (its file's JSON) when it was not the bundled one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
    /// The policy's JSON when it was not the bundled one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// The price table's JSON when it was not the bundled one (a `--prices` file, or a
    /// model priced at zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prices: Option<String>,
    /// The system prompts given at run time (name, text), none when all were bundled.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prompts: BTreeMap<String, String>,
    /// The call graph's JSON when one was given at run time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_graph: Option<String>,
}

/// Why a run's inputs cannot be rebuilt as they were.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("resume_inputs_differ: its {what} {why}")]
pub struct InputsDiffer {
    /// Which input: `world`, `policy`, `prices`, `prompts`, `call_graph`.
    pub what: String,
    /// How.
    pub why: String,
}

fn differ(what: &str, why: impl Into<String>) -> InputsDiffer {
    InputsDiffer { what: what.into(), why: why.into() }
}

/// `value`'s JSON text (empty for a value serde cannot write, which none of these is).
fn json<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// The digest of `value`'s JSON text.
fn digest<T: Serialize + ?Sized>(value: &T) -> String {
    sha256_hex(json(value).as_bytes())
}

/// The digests of what runs in `env` and this process use (the process's prompts and
/// call graph): the same names and values a results file's header records.
pub fn input_digests(env: &Env) -> BTreeMap<String, String> {
    let mut d = BTreeMap::from([
        ("world".to_string(), digest(&env.world.to_file())),
        ("policy".to_string(), digest(&env.policy)),
        ("prices".to_string(), digest(&*env.prices)),
        ("prompts".to_string(), digest(&prompts::current_all())),
    ]);
    if let Some(graph) = installed_call_graph() {
        d.insert("call_graph".to_string(), sha256_hex(graph.to_json().as_bytes()));
    }
    d
}

impl RunData {
    /// The record of a run in `env` in this process: every digest, and the content of
    /// each input that is not the bundled one.
    ///
    /// # Errors
    /// A message when the bundled data does not load (a test guards it).
    pub fn of(env: &Env) -> Result<Self, String> {
        let bundled = Env::bundled().map_err(|e| e.to_string())?;
        let own = |mine: String, theirs: String| (mine != theirs).then_some(mine);
        let prompts = prompts::current_all()
            .into_iter()
            .filter(|(name, text)| prompts::by_name(name) != Some(*text))
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect();
        Ok(Self {
            digests: input_digests(env),
            world: own(json(&env.world.to_file()), json(&bundled.world.to_file())),
            policy: own(json(&env.policy), json(&bundled.policy)),
            prices: own(json(&*env.prices), json(&*bundled.prices)),
            prompts,
            call_graph: installed_call_graph().map(|g| g.to_json()),
        })
    }

    /// The environment the run ran in, built again from this record over `bundled` (the
    /// recorded prompts and call graph installed for this process), checked digest by
    /// digest against what the run used.
    ///
    /// # Errors
    /// [`InputsDiffer`] naming the first input that cannot be rebuilt as it was.
    pub fn env(&self, bundled: &Env) -> Result<Env, InputsDiffer> {
        let mut env = bundled.clone();
        if let Some(text) = &self.world {
            env.world = Arc::new(WorldData::from_json(text).map_err(|e| differ("world", e.to_string()))?);
        }
        if let Some(text) = &self.policy {
            env.policy = Policy::from_json(text).map_err(|e| differ("policy", e.to_string()))?;
        }
        if let Some(text) = &self.prices {
            env.prices = Arc::new(PriceTable::from_json(text).map_err(|e| differ("prices", e.to_string()))?);
        }
        if !self.prompts.is_empty() {
            let set: Vec<(String, String)> = self.prompts.clone().into_iter().collect();
            let installed = prompts::current_all().into_iter().filter(|(n, t)| prompts::by_name(n) != Some(*t)).count();
            // installing is once per process: another set there already is a difference
            if installed == 0 {
                prompts::install(set).map_err(|e| differ("prompts", e.to_string()))?;
            }
        }
        if let Some(text) = &self.call_graph {
            let graph = CallGraph::from_json(text).map_err(|e| differ("call_graph", e.to_string()))?;
            install_call_graph(graph).map_err(|e| differ("call_graph", e))?;
        }
        let now = input_digests(&env);
        for (what, recorded) in &self.digests {
            match now.get(what) {
                Some(d) if d == recorded => {}
                Some(_) => return Err(differ(what, "is not what the run used (its digest differs)")),
                None => return Err(differ(what, "was given to the run and is not there now")),
            }
        }
        if let Some(what) = now.keys().find(|k| !self.digests.contains_key(*k)) {
            return Err(differ(what, "is installed in this process and was not the run's"));
        }
        Ok(env)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_in_the_bundled_data_records_digests_only_and_rebuilds_to_them() {
        let env = Env::bundled().unwrap();
        let data = RunData::of(&env).unwrap();
        assert_eq!((data.world.as_ref(), data.policy.as_ref(), data.prices.as_ref()), (None, None, None));
        assert!(["world", "policy", "prices", "prompts"].iter().all(|k| data.digests.contains_key(*k)));
        let again = data.env(&env).unwrap();
        assert_eq!(input_digests(&again), data.digests);
    }

    #[test]
    fn a_run_in_its_own_world_and_policy_keeps_them_and_a_changed_input_is_refused_by_name() {
        let bundled = Env::bundled().unwrap();
        let mut env = bundled.clone();
        let mut world = (*env.world).clone();
        if let Some(t) = world.tickets_mut().get_mut("T-601") {
            t.status = "closed".into();
        }
        env.world = Arc::new(world);
        env.policy = env.policy.clone().widened("triage", &crate::tools::TOOL_NAMES);
        let data = RunData::of(&env).unwrap();
        assert!(data.world.is_some() && data.policy.is_some() && data.prices.is_none());
        // built again over the bundled data: the run's own world and policy
        let rebuilt = data.env(&bundled).unwrap();
        assert_eq!(rebuilt.world.tickets()["T-601"].status, "closed");
        assert_eq!(input_digests(&rebuilt), data.digests);
        // a recorded input whose digest no longer matches is refused by name
        let mut stale = data.clone();
        stale.digests.insert("prices".into(), "0".repeat(64));
        assert_eq!(stale.env(&bundled).unwrap_err().what, "prices");
        let mut edited = data;
        edited.world = Some(edited.world.unwrap_or_default().replace("closed", "open"));
        assert_eq!(edited.env(&bundled).unwrap_err().what, "world");
    }
}
