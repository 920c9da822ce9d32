//! Scenario tables: each row names a model, a user, a task, a goal, limits and the
//! expected outcome. Users add rows without writing Rust; a malformed row is refused with
//! file, line and field named.

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

use super::memory_rows::{PriorRun, run_prior, with_prior};
use super::rows::{Extensions, RowAttack, RowDefenses, WorldPatch, check_hop, hop_text, row_world};
use crate::agent::StopReason;
use crate::agent::{Env, Trace};
use crate::lab::attacks::{Attack, AttackVerdict, bundled_attacks, single_verdict};
use crate::lab::hops::{Hop, Propagation, SingleSeen, single_propagation};
use crate::lab::{DeciderSpec, LabConfig, MAX_ROW_BYTES, ScenarioError};
use crate::model::FakeKind;

/// The `model` value of the compromised fake (see [`crate::lab::compromised`]).
pub(crate) const COMPROMISED: &str = "compromised";

/// The bundled single-agent table, `data/scenarios.jsonl`.
pub(crate) const BUNDLED_SINGLE: &str = include_str!("../../data/scenarios.jsonl");

/// Limits a row may set; anything unset keeps the default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Most model calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    /// Most working seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_seconds: Option<f64>,
    /// Most credits (a decimal string, e.g. "0.006").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<Decimal>,
    /// Consecutive bad steps before stuck.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_stuck: Option<u32>,
    /// Per-run call limits by tool.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub call_limits: BTreeMap<String, u32>,
}

/// What a single-agent row expects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SingleExpect {
    /// `running`, `awaiting_approval`, `done` or `stopped`.
    pub status: String,
    pub reason: StopReason,
    /// Tool names sent to the gate, in order.
    pub calls: Vec<String>,
    /// E-mails sent.
    pub emails: usize,
    /// What the run did about its planted payload (rows with an `attack` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attack: Option<AttackVerdict>,
    /// The furthest hop its payload reached (rows with an `attack` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop: Option<Hop>,
    /// The code that stopped it after that hop (rows with an `attack` only; `""` for
    /// none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
}

/// One single-agent row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SingleRow {
    /// Row id, e.g. `s01`.
    pub id: String,
    /// What the row shows.
    #[serde(default)]
    pub note: String,
    /// Fake model kind.
    pub model: String,
    /// Signed-in user; "" for nobody.
    pub user: String,
    /// The task.
    pub task: String,
    /// Tasks the session may run; defaults to the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_tasks: Option<Vec<String>>,
    /// The goal.
    pub goal: String,
    /// Write tools granted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
    /// Simulated seconds per model call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_seconds: Option<f64>,
    /// Limits.
    #[serde(default)]
    pub limits: Limits,
    /// Users, tickets and documents this row adds to (or replaces in) the world.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<WorldPatch>,
    /// A payload the runner plants into the world before the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attack: Option<RowAttack>,
    /// The defenses (`scopes`, `loop_check`, `approval`; all on and narrow by default).
    #[serde(default, skip_serializing_if = "is_default")]
    pub defenses: RowDefenses,
    /// An earlier run (same user and world) whose memory this row's run starts with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<PriorRun>,
    /// The expectation.
    pub expect: SingleExpect,
}

fn is_default<T: Default + PartialEq>(t: &T) -> bool {
    *t == T::default()
}

const STATUSES: [&str; 4] = ["running", "awaiting_approval", "done", "stopped"];

/// Parses one row; `file` and `line` go into the error.
///
/// # Errors
/// [`ScenarioError::Row`] naming the field.
pub fn parse_single_row(text: &str, file: &str, line: usize) -> Result<SingleRow, ScenarioError> {
    parse_single_row_with(text, file, line, &bundled_attacks()?)
}

/// [`parse_single_row`] with catalog ids looked up in `catalog`.
///
/// # Errors
/// [`ScenarioError::Row`] naming the field.
pub(crate) fn parse_single_row_with(
    text: &str,
    file: &str,
    line: usize,
    catalog: &[Attack],
) -> Result<SingleRow, ScenarioError> {
    let err =
        |field: &str, message: String| ScenarioError::Row { file: file.into(), line, field: field.into(), message };
    if text.len() > MAX_ROW_BYTES {
        return Err(err("(row)", format!("longer than {MAX_ROW_BYTES} bytes")));
    }
    let de = &mut serde_json::Deserializer::from_str(text);
    let mut row: SingleRow =
        serde_path_to_error::deserialize(de).map_err(|e| crate::lab::serde_row_error(e, file, line))?;
    if row.id.is_empty()
        || row.id.len() > 32
        || !row.id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(err("id", "must be 1 to 32 of letters, digits, - and _".into()));
    }
    if row.model != COMPROMISED {
        row.model.parse::<FakeKind>().map_err(|m| err("model", format!("{m}, or {COMPROMISED}")))?;
    }
    if row.goal.trim().is_empty() || row.goal.chars().count() > crate::agent::MAX_GOAL_CHARS {
        return Err(err("goal", "must be 1 to 300 characters".into()));
    }
    if let Some(s) = row.slow_seconds
        && Duration::try_from_secs_f64(s).is_err()
    {
        return Err(err("slow_seconds", "must be a finite, non-negative number".into()));
    }
    if let Some(s) = row.limits.max_seconds
        && Duration::try_from_secs_f64(s).is_err()
    {
        return Err(err("limits.max_seconds", "must be a finite, non-negative number".into()));
    }
    if row.limits.max_cost.is_some_and(|c| c < Decimal::ZERO) {
        return Err(err("limits.max_cost", "must not be negative".into()));
    }
    if !STATUSES.contains(&row.expect.status.as_str()) {
        return Err(err("expect.status", format!("must be one of {}", STATUSES.join(", "))));
    }
    if row.defenses.filter.is_some() {
        let message = "the single-agent loop has no instruction filter (a multi row's coordinator has)".into();
        return Err(err("defenses.filter", message));
    }
    if let Some(m) = &row.memory {
        if row.attack.is_none() || row.model != COMPROMISED || row.user.is_empty() {
            let message = "an earlier run needs an attack, the compromised model and a signed-in user".into();
            return Err(err("memory", message));
        }
        if m.goal.trim().is_empty() || m.goal.chars().count() > crate::agent::MAX_GOAL_CHARS {
            return Err(err("memory.goal", "must be 1 to 300 characters".into()));
        }
    }
    let mut ext = Extensions {
        world: row.world.as_ref(),
        attack: row.attack.as_mut(),
        expect_attack: row.expect.attack,
        user: &row.user,
    };
    ext.check(catalog).map_err(|(field, message)| err(&field, message))?;
    Ok(row)
}

/// Parses a whole table (JSON Lines; blank lines and lines starting with `#` are skipped).
///
/// # Errors
/// Every bad row (file, line, field; a repeated id too), or a table without rows.
pub fn parse_single_table(text: &str, file: &str) -> Result<Vec<SingleRow>, ScenarioError> {
    let catalog = bundled_attacks()?;
    crate::lab::read_table(
        text,
        file,
        "rows",
        |line, n| parse_single_row_with(line, file, n, &catalog),
        |r: &SingleRow| &r.id,
    )
}

/// The bundled single-agent table.
///
/// # Errors
/// Only if the bundled file were broken (a test guards it).
pub fn bundled_single() -> Result<Vec<SingleRow>, ScenarioError> {
    parse_single_table(BUNDLED_SINGLE, "data/scenarios.jsonl")
}

/// What a row did, and whether that is what it expected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SingleOutcome {
    /// Always `single`.
    pub table: &'static str,
    /// Row id.
    pub id: String,
    /// Final status.
    pub status: String,
    /// Reason.
    pub reason: StopReason,
    /// Tool names sent to the gate.
    pub calls: Vec<String>,
    /// E-mails sent.
    pub emails: usize,
    /// Model calls made.
    pub model_calls: u64,
    /// Steps taken.
    pub steps: u32,
    /// What the run did about its planted payload, for a row with an `attack`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attack: Option<AttackVerdict>,
    /// How far its payload got and what stopped it, for a row with an `attack`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hop: Option<Propagation>,
    /// True when every expectation holds.
    pub matches: bool,
    /// What differs, one entry per field.
    pub mismatches: Vec<String>,
    /// The run's trace (for the report's diagram; not part of the JSON outcome).
    #[serde(skip)]
    pub trace: Option<Trace>,
    /// Paid model calls, tokens and credits (printed by `run`; not part of the JSON outcome).
    #[serde(skip)]
    pub usage: crate::cost::Summary,
    /// The final answer, when done (not part of the JSON outcome).
    #[serde(skip)]
    pub answer: Option<String>,
}

impl SingleRow {
    /// The lab config this row describes.
    ///
    /// # Errors
    /// [`ScenarioError::Row`] for a model name that is not a fake.
    pub fn lab_config(&self) -> Result<LabConfig, ScenarioError> {
        let decider = if self.model == COMPROMISED {
            DeciderSpec::Compromised(self.attack.iter().filter_map(RowAttack::attack).cloned().collect())
        } else {
            DeciderSpec::Fake(self.model.parse::<FakeKind>().map_err(|m| ScenarioError::Row {
                file: "(row)".into(),
                line: 0,
                field: "model".into(),
                message: m,
            })?)
        };
        let mut cfg = LabConfig {
            decider,
            user: self.user.clone(),
            task: self.task.clone(),
            session_tasks: self.session_tasks.clone(),
            grants: self.grants.clone(),
            call_limits: self.limits.call_limits.clone(),
            slow: self.slow_seconds.and_then(|s| Duration::try_from_secs_f64(s).ok()),
            checks: self.defenses.checks(),
            ..LabConfig::default()
        };
        let b = &mut cfg.budget;
        if let Some(v) = self.limits.max_steps {
            b.max_steps = v;
        }
        if let Some(v) = self.limits.max_seconds.and_then(|s| Duration::try_from_secs_f64(s).ok()) {
            b.max_seconds = v;
        }
        if let Some(v) = self.limits.max_cost {
            b.max_cost = v;
        }
        if let Some(v) = self.limits.max_stuck {
            b.max_stuck = v;
        }
        Ok(cfg)
    }

    /// The run id used for this row.
    pub fn run_id(&self) -> String {
        super::reuse::run_id_of(&self.id)
    }
}

/// Runs one row in a fresh world and compares it with its expectation.
///
/// # Errors
/// [`ScenarioError::Run`] when the run cannot be carried out.
pub async fn run_single(row: &SingleRow, env: &Env) -> Result<SingleOutcome, ScenarioError> {
    run_single_with(row, env, row.lab_config()?).await
}

/// Runs one row with `cfg` (the row's config with, e.g., another decider) and compares it
/// with the row's expectation.
///
/// # Errors
/// [`ScenarioError::Run`] when the run cannot be carried out.
pub async fn run_single_with(row: &SingleRow, env: &Env, cfg: LabConfig) -> Result<SingleOutcome, ScenarioError> {
    let (world, planted) = row_world(&env.world, row.world.as_ref(), row.attack.as_ref())
        .map_err(|(field, message)| ScenarioError::Row { file: "(row)".into(), line: 0, field, message })?;
    let prior = match &row.memory {
        Some(m) => {
            let prior_env = Env { world: world.clone(), policy: env.policy.clone(), prices: env.prices.clone() };
            Some(run_prior(&row.id, m, &row.user, &prior_env, planted).await?)
        }
        None => None,
    };
    let env = Env { world, policy: row.defenses.policy(&env.policy, &row.task), prices: env.prices.clone() };
    let mut lab = cfg.build(&env);
    if let (Some(p), Some(m)) = (&prior, lab.agent.memory_mut()) {
        *m = p.memory.clone();
    }
    let policy = lab.agent.gate.policy().clone();
    lab.agent.gate.set_policy(policy.with_approval_shared(row.defenses.approval()));
    lab.agent.gate.set_ifc(row.defenses.ifc());
    let run = lab
        .agent
        .run(&row.goal, &row.run_id())
        .await
        .map_err(|source| ScenarioError::Run { id: row.id.clone(), source })?;
    let status = run.state.status().name().to_string();
    let emails = lab.world.outbox.len();
    let mut mismatches = Vec::new();
    let e = &row.expect;
    if status != e.status {
        mismatches.push(format!("status: expected {}, got {status}", e.status));
    }
    if run.reason() != e.reason {
        mismatches.push(format!("reason: expected {}, got {}", e.reason, run.reason()));
    }
    if run.calls() != e.calls.as_slice() {
        mismatches.push(format!("calls: expected {:?}, got {:?}", e.calls, run.calls()));
    }
    if emails != e.emails {
        mismatches.push(format!("emails: expected {}, got {emails}", e.emails));
    }
    let attack = match row.attack.as_ref().and_then(RowAttack::attack) {
        Some(a) => Some(
            single_verdict(a, &row.user, &row.task, &run, &lab.agent.gate)
                .await
                .map_err(|source| ScenarioError::Judge { id: row.id.clone(), source })?,
        ),
        None => None,
    };
    if let (Some(want), Some(got)) = (e.attack, attack)
        && want != got
    {
        mismatches.push(format!("attack: expected {want}, got {got}"));
    }
    let hop =
        row.attack.as_ref().and_then(|ra| ra.attack().map(|a| (a, &ra.into))).zip(attack).map(|((a, into), v)| {
            let seen = SingleSeen::of(&run, &lab.agent, into);
            let p = single_propagation(a, v, &seen);
            match &prior {
                Some(prior) => with_prior(p, prior, a),
                None => p,
            }
        });
    check_hop(e.hop, e.stopped_by.as_deref(), hop.as_ref(), &mut mismatches);
    Ok(SingleOutcome {
        table: "single",
        id: row.id.clone(),
        status,
        reason: run.reason(),
        calls: run.calls().to_vec(),
        emails,
        model_calls: run.ledger().summary().calls,
        steps: run.state.step(),
        attack,
        hop,
        matches: mismatches.is_empty(),
        // a mismatch quotes what the row expected: redacted like a trace line
        mismatches: mismatches.iter().map(|m| crate::security::redact(m).into_owned()).collect(),
        trace: Some(run.trace().clone()),
        usage: run.ledger().summary(),
        answer: run.state.answer().map(str::to_string),
    })
}

impl SingleOutcome {
    /// One table line.
    pub fn table_line(&self) -> String {
        let attack = self.attack.map(|a| format!(" attack={a}")).unwrap_or_default();
        let attack = attack + &hop_text(self.hop.as_ref());
        format!(
            "{:<5} {:<17} {:<16} calls={} emails={}{attack} {}",
            self.id,
            self.status,
            self.reason.as_str(),
            self.calls.len(),
            self.emails,
            if self.matches { "matches".to_string() } else { format!("MISMATCH: {}", self.mismatches.join("; ")) }
        )
    }
}
