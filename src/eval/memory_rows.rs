//! A payload persisted through memory into a later run: a single row with `memory` runs
//! an earlier run first (same user and world, task `triage_memory`, the compromised fake
//! as a sleeper that asks to `remember` the observation carrying the payload), then its
//! own run with the memory that earlier run left.
//!
//! How the note is written is the defense under test:
//! - `guarded` (the default): the model only points at an observation; the application
//!   builds the note from it (ticket id and status, [`crate::memory::GuardedMemory`]), so
//!   the payload's words never enter memory;
//! - `model_written` (the naive design): the note is the text the model asks to keep (the
//!   compromised fake asks to keep the payload), and only the memory's write rules
//!   (`personal_data`, `instruction_like`, `too_long`, …) stand between it and the store.

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

use crate::agent::{Env, TraceKind};
use crate::lab::attacks::{Attack, carried};
use crate::lab::hops::{Hop, Marker, Propagation};
use crate::lab::{DeciderSpec, LabConfig, ScenarioError};
use crate::memory::{GuardedMemory, SessionMemory, WriteCode};

/// How the earlier run's note is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoteWriter {
    /// The application builds the note from the observation the model points at.
    #[default]
    Guarded,
    /// The model's own text, through the write rules only.
    ModelWritten,
}

/// A row's earlier run, whose memory the row's run starts with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorRun {
    /// The earlier run's goal (1 to 300 characters).
    pub goal: String,
    /// How its note is written.
    #[serde(default)]
    pub notes: NoteWriter,
}

/// What the earlier run left: the memory, whether the payload was read, and the code of
/// a refused write of it.
pub(crate) struct Prior {
    /// The memory the row's run starts with.
    pub memory: SessionMemory,
    /// The earlier run read the payload.
    pub exposed: bool,
    /// The write rule that refused the payload's note (`model_written` only).
    pub refused: Option<&'static str>,
}

/// The task of the earlier run (the one that offers `remember`).
pub(crate) const PRIOR_TASK: &str = "triage_memory";

/// Runs the earlier run of a row: `user` in `env` (the row's world, payload planted),
/// with the sleeper fake knowing `planted`.
///
/// # Errors
/// [`ScenarioError::Run`] when the run cannot be carried out.
pub(crate) async fn run_prior(
    id: &str,
    prior: &PriorRun,
    user: &str,
    env: &Env,
    planted: Arc<[Attack]>,
) -> Result<Prior, ScenarioError> {
    let cfg = LabConfig {
        decider: DeciderSpec::Sleeper(planted.clone()),
        user: user.to_string(),
        task: PRIOR_TASK.into(),
        memory: false,
        ..LabConfig::default()
    };
    let mut lab = cfg.build(env);
    let clock = lab.clock.shared();
    let ttl = Duration::from_secs(3600);
    let mut memory = SessionMemory::new(user, clock.clone(), ttl).with_world(env.world.clone());
    if prior.notes == NoteWriter::Guarded {
        lab.agent.set_guarded_memory(GuardedMemory::new(memory.clone(), 3));
    }
    let run_id = format!("run-{}-prior", id.to_ascii_lowercase().replace('_', "-"));
    let run = lab
        .agent
        .run(&prior.goal, &run_id)
        .await
        .map_err(|source| ScenarioError::Run { id: id.to_string(), source })?;
    let observations = run.state.observations();
    let exposed = observations.iter().filter(|o| o.ok).any(|o| carried(&planted, &o.text).is_some());
    let mut refused = None;
    match prior.notes {
        NoteWriter::Guarded => {
            if let Some(g) = lab.agent.guarded() {
                memory = g.memory().clone();
            }
        }
        NoteWriter::ModelWritten => {
            // each `remember` the model asked for: the note is the payload it wants kept
            let asked = run.trace().lines.iter().filter(|l| l.kind == TraceKind::Tool && l.detail == "remember");
            for (n, line) in asked.enumerate() {
                let from = line
                    .args
                    .as_deref()
                    .and_then(|a| serde_json::from_str::<serde_json::Value>(a).ok())
                    .and_then(|v| v.get("from_observation").and_then(|f| f.as_str()).map(str::to_string));
                let Some(o) = from.and_then(|f| observations.iter().find(|o| o.id == f)) else { continue };
                let Some(attack) = carried(&planted, &o.text) else { continue };
                let source = format!("tool:{}:{}", o.tool, o.id);
                let code = memory.write_observed(&format!("note-{}", n + 1), &attack.text, &source, None, observations);
                if code != WriteCode::Ok && refused.is_none() {
                    refused = Some(code.as_str());
                }
            }
        }
    }
    Ok(Prior { memory, exposed, refused })
}

/// The row's propagation with the earlier run's part: read there is at least `exposed`,
/// and a write rule that refused the payload's note is the code that stopped it there.
pub(crate) fn with_prior(p: Propagation, prior: &Prior, attack: &Attack) -> Propagation {
    let persisted = prior.memory.notes().iter().any(|n| Marker::of(attack).in_text(&n.text));
    let hop = match p.hop {
        Hop::None | Hop::Exposed if persisted => Hop::Persisted,
        Hop::None if prior.exposed => Hop::Exposed,
        h => h,
    };
    let stopped_by = match (hop, prior.refused) {
        (Hop::Exposed, Some(code)) => Some(code.to_string()),
        (Hop::Executed, _) => None,
        _ => p.stopped_by,
    };
    Propagation { hop, stopped_by }
}
