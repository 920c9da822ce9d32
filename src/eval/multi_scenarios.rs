//! The multi-agent scenario table: each row names a behaviour per role, the claim mode,
//! the user, the goal, the run's limits and the expected outcome (reason, accepted
//! messages, refusal codes in order, refused tool calls, e-mails sent). A malformed row is
//! refused with file, line and field named, as in the single-agent table.
//!
//! A multi row carries `"design": "multi"`; that is how a file mixing both kinds of rows
//! is read (see [`parse_any_table`]).

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

use super::rows::{Compromised, Extensions, RowAttack, RowDefenses, WorldPatch, check_hop, hop_text, row_world};
use super::scenarios::{SingleRow, parse_single_row_with};
use crate::lab::attacks::{Attack, AttackVerdict, bundled_attacks, multi_verdict};
use crate::lab::compromised::{CompromisedPlanner, CompromisedResearcher, CompromisedReviewer};
use crate::lab::hops::{Hop, Propagation, multi_propagation};
use crate::lab::{MAX_ROW_BYTES, ScenarioError};
use crate::multi::{
    Behaviours, ClaimMode, MultiBudget, MultiConfig, MultiEnv, MultiReason, MultiRun, OnReject, RejectCode,
    ResearcherKind, ReviewerKind, RoleModels,
};

/// The bundled multi-agent table, `data/multi_scenarios.jsonl`.
pub const BUNDLED_MULTI: &str = include_str!("../../data/multi_scenarios.jsonl");

/// The only value of a multi row's `design` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MultiDesign {
    /// Three roles and a coordinator.
    Multi,
}

/// Limits a multi row may set; anything unset keeps the default of [`MultiBudget`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultiLimits {
    /// Most messages, accepted and rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_messages: Option<u32>,
    /// Most rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rounds: Option<u32>,
    /// Most model calls over all roles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_role_calls: Option<u32>,
    /// Most wall seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_seconds: Option<f64>,
    /// Most credits (a decimal string, e.g. "0.05").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<Decimal>,
}

/// What a multi row expects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultiExpect {
    /// Why the run ends.
    pub reason: MultiReason,
    /// Accepted messages.
    pub messages: usize,
    /// Refusal codes, in order.
    pub rejected: Vec<RejectCode>,
    /// Refused tool calls as `role:tool:code`, in order.
    pub denied: Vec<String>,
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

/// One multi-agent row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultiRow {
    /// Row id, e.g. `m01`.
    pub id: String,
    /// Always `multi`.
    pub design: MultiDesign,
    /// What the row shows.
    #[serde(default)]
    pub note: String,
    /// A behaviour per role (each defaults to `sensible`).
    #[serde(default)]
    pub roles: Behaviours,
    /// `strict` (default) or `free`.
    #[serde(default)]
    pub claims: ClaimMode,
    /// `stop` (default) or `retry` after a refused message.
    #[serde(default)]
    pub on_reject: OnReject,
    /// Signed-in user every role acts for.
    pub user: String,
    /// The goal.
    pub goal: String,
    /// Limits.
    #[serde(default)]
    pub limits: MultiLimits,
    /// Users, tickets and documents this row adds to (or replaces in) the world.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<WorldPatch>,
    /// A payload the runner plants into the world before the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attack: Option<RowAttack>,
    /// The defenses (`filter`, `scopes`, `approval`; on and narrow by default; `claims`
    /// is its own field).
    #[serde(default, skip_serializing_if = "is_default")]
    pub defenses: RowDefenses,
    /// Roles run by the compromised fakes instead of their `roles` behaviour.
    #[serde(default, skip_serializing_if = "is_default")]
    pub compromised: Compromised,
    /// The call graph's edges for this row instead of the run's graph (the form of
    /// `data/call_graph.json`'s `edges`, checked the same way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_graph: Option<Vec<crate::multi::EdgeSpec>>,
    /// The expectation.
    pub expect: MultiExpect,
}

fn is_default<T: Default + PartialEq>(t: &T) -> bool {
    *t == T::default()
}

fn row_error(file: &str, line: usize, field: &str, message: String) -> ScenarioError {
    ScenarioError::Row { file: file.into(), line, field: field.into(), message }
}

/// Reads one multi-agent row, with catalog ids looked up in `catalog`.
///
/// # Errors
/// [`ScenarioError::Row`] naming the field.
pub(crate) fn parse_multi_row_with(
    text: &str,
    file: &str,
    line: usize,
    catalog: &[Attack],
) -> Result<MultiRow, ScenarioError> {
    let err = |field: &str, message: String| row_error(file, line, field, message);
    if text.len() > MAX_ROW_BYTES {
        return Err(err("(row)", format!("longer than {MAX_ROW_BYTES} bytes")));
    }
    let de = &mut serde_json::Deserializer::from_str(text);
    let mut row: MultiRow =
        serde_path_to_error::deserialize(de).map_err(|e| crate::lab::serde_row_error(e, file, line))?;
    if row.id.is_empty()
        || row.id.len() > 32
        || !row.id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(err("id", "must be 1 to 32 of letters, digits, - and _".into()));
    }
    if row.user.trim().is_empty() {
        return Err(err("user", "must name the signed-in user".into()));
    }
    if row.goal.trim().is_empty() || row.goal.chars().count() > crate::agent::MAX_GOAL_CHARS {
        return Err(err("goal", "must be 1 to 300 characters".into()));
    }
    if let Some(s) = row.limits.max_seconds
        && Duration::try_from_secs_f64(s).is_err()
    {
        return Err(err("limits.max_seconds", "must be a finite, non-negative number".into()));
    }
    if row.limits.max_cost.is_some_and(|c| c < Decimal::ZERO) {
        return Err(err("limits.max_cost", "must not be negative".into()));
    }
    for (i, d) in row.expect.denied.iter().enumerate() {
        let parts: Vec<&str> = d.split(':').collect();
        if parts.len() != 3 || parts.iter().any(|p| p.is_empty()) || parts[0].parse::<crate::multi::Role>().is_err() {
            return Err(err(&format!("expect.denied[{i}]"), format!("{d:?} is not role:tool:code")));
        }
    }
    if row.defenses.loop_check.is_some() {
        let message = "the roles' own checks are always on in a multi row (single rows may turn theirs off)".into();
        return Err(err("defenses.loop_check", message));
    }
    if row.compromised.researcher.is_some() && row.roles.researcher != ResearcherKind::default() {
        return Err(err("compromised.researcher", "roles.researcher already chooses the researcher's model".into()));
    }
    if row.compromised.reviewer.is_some() && row.roles.reviewer != ReviewerKind::default() {
        return Err(err("compromised.reviewer", "roles.reviewer already chooses the reviewer's model".into()));
    }
    if let Some(edges) = &row.call_graph {
        crate::multi::CallGraph::from_edges(edges.clone()).map_err(|e| err("call_graph", e.to_string()))?;
    }
    if row.compromised.planner.is_some() && row.roles.planner != crate::multi::PlannerKind::default() {
        return Err(err("compromised.planner", "roles.planner already chooses the planner's model".into()));
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

/// One row of a table that may hold both kinds.
#[derive(Clone, Debug, PartialEq)]
pub enum AnyRow {
    /// A single-agent row.
    Single(SingleRow),
    /// A multi-agent row.
    Multi(MultiRow),
}

impl AnyRow {
    /// The row's id.
    pub fn id(&self) -> &str {
        match self {
            Self::Single(r) => &r.id,
            Self::Multi(r) => &r.id,
        }
    }
}

/// Which parser a line needs: `"design": "multi"` marks a multi row; a row without
/// `design` is a single-agent row; any other value is an error on `design`.
fn is_multi(text: &str, file: &str, line: usize) -> Result<bool, ScenarioError> {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        design: Option<serde_json::Value>,
    }
    match serde_json::from_str::<Probe>(text) {
        // a line that is not even an object is reported by the single parser
        Err(_) => Ok(false),
        Ok(Probe { design: None }) => Ok(false),
        Ok(Probe { design: Some(serde_json::Value::String(d)) }) if d == "multi" => Ok(true),
        Ok(Probe { design: Some(other) }) => Err(row_error(
            file,
            line,
            "design",
            format!("{other} is not a design (use \"multi\", or leave it out for a single-agent row)"),
        )),
    }
}

/// Parses a table of single and multi rows (JSON Lines; blank lines and lines starting
/// with `#` are skipped). Ids are unique across both kinds.
///
/// # Errors
/// The first bad row, or a repeated id.
pub fn parse_any_table(text: &str, file: &str) -> Result<Vec<AnyRow>, ScenarioError> {
    parse_any_table_with(text, file, &bundled_attacks()?)
}

/// [`parse_any_table`] with catalog ids looked up in `catalog`.
///
/// # Errors
/// Every bad row (file, line, field; a repeated id too), or a table without rows.
pub fn parse_any_table_with(text: &str, file: &str, catalog: &[Attack]) -> Result<Vec<AnyRow>, ScenarioError> {
    parse_any_table_in(text, file, catalog, &mut super::reuse::RowFiles::none())
}

/// [`parse_any_table_with`] for a table whose rows may name shared files (`world_file`,
/// `attack.attacks_file`, read through `files`) and cross a row with a list of
/// `defenses` (one row per entry, ids `ROW@LABEL`); see [`super::reuse`].
///
/// # Errors
/// Every bad row (file, line, field; a repeated id too), or a table without rows.
pub fn parse_any_table_in(
    text: &str,
    file: &str,
    catalog: &[Attack],
    files: &mut super::reuse::RowFiles,
) -> Result<Vec<AnyRow>, ScenarioError> {
    let parse = |line: &str, n: usize| {
        let mut rows = Vec::new();
        let mut base = String::new();
        for one in super::reuse::expand(line, file, n, files)? {
            let text = one.text.as_str();
            let mut row = if is_multi(text, file, n).map_err(|e| one.rename(e))? {
                AnyRow::Multi(parse_multi_row_with(text, file, n, catalog).map_err(|e| one.rename(e))?)
            } else {
                AnyRow::Single(parse_single_row_with(text, file, n, catalog).map_err(|e| one.rename(e))?)
            };
            base = row.id().to_string();
            if let Some(id) = one.id {
                match &mut row {
                    AnyRow::Single(r) => r.id = id,
                    AnyRow::Multi(r) => r.id = id,
                }
            }
            rows.push(row);
        }
        Ok((base, rows))
    };
    let lines = crate::lab::read_table(text, file, "rows", parse, |(base, _): &(String, Vec<AnyRow>)| base)?;
    Ok(lines.into_iter().flat_map(|(_, rows)| rows).collect())
}

/// Parses a table that must hold only multi rows.
///
/// # Errors
/// As [`parse_any_table`], and a single-agent row is refused on `design`.
pub fn parse_multi_table(text: &str, file: &str) -> Result<Vec<MultiRow>, ScenarioError> {
    let catalog = bundled_attacks()?;
    let parse = |line: &str, n: usize| {
        if !is_multi(line, file, n)? && serde_json::from_str::<serde_json::Value>(line).is_ok() {
            let message = "a multi-agent table holds only rows with \"design\": \"multi\"".to_string();
            return Err(row_error(file, n, "design", message));
        }
        parse_multi_row_with(line, file, n, &catalog)
    };
    crate::lab::read_table(text, file, "rows", parse, |r: &MultiRow| &r.id)
}

/// The bundled multi-agent table.
///
/// # Errors
/// Only if the bundled file were broken (a test guards it).
pub fn bundled_multi() -> Result<Vec<MultiRow>, ScenarioError> {
    parse_multi_table(BUNDLED_MULTI, "data/multi_scenarios.jsonl")
}

impl MultiRow {
    /// The run configuration this row describes.
    pub fn config(&self) -> MultiConfig {
        let d = MultiBudget::default();
        let l = &self.limits;
        MultiConfig {
            user: self.user.clone(),
            claims: self.claims,
            on_reject: self.on_reject,
            budget: MultiBudget {
                max_messages: l.max_messages.unwrap_or(d.max_messages),
                max_rounds: l.max_rounds.unwrap_or(d.max_rounds),
                max_role_calls: l.max_role_calls.unwrap_or(d.max_role_calls),
                max_seconds: l.max_seconds.and_then(|s| Duration::try_from_secs_f64(s).ok()).unwrap_or(d.max_seconds),
                max_cost: l.max_cost.unwrap_or(d.max_cost),
            },
            filter: self.defenses.filter(),
            approval: self.defenses.approval(),
            ifc: self.defenses.ifc(),
            durable: crate::agent::Durable::none(),
            prompts: None,
            observation_chars: None,
            goal_chars: None,
        }
    }

    /// The run id used for this row.
    pub fn run_id(&self) -> String {
        super::reuse::run_id_of(&self.id)
    }
}

/// What a multi row did, and whether that is what it expected. Serialised as one
/// `--format jsonl` line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MultiOutcome {
    /// Always `multi`.
    pub table: &'static str,
    /// Row id.
    pub id: String,
    /// Why the run ended.
    pub reason: MultiReason,
    /// Accepted messages.
    pub messages: usize,
    /// Refusal codes, in order.
    pub rejected: Vec<RejectCode>,
    /// Refused tool calls as `role:tool:code`.
    pub denied: Vec<String>,
    /// E-mails sent.
    pub emails: usize,
    /// Model calls over all roles.
    pub role_calls: u32,
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
}

impl MultiOutcome {
    /// Compares a run with the row's expectation.
    pub fn of(row: &MultiRow, run: &MultiRun) -> Self {
        let e = &row.expect;
        let rejected = run.rejected_codes();
        let denied = run.denied_lines();
        let mut mismatches = Vec::new();
        if run.reason != e.reason {
            mismatches.push(format!("reason: expected {}, got {}", e.reason, run.reason));
        }
        if run.messages.len() != e.messages {
            mismatches.push(format!("messages: expected {}, got {}", e.messages, run.messages.len()));
        }
        if rejected != e.rejected {
            mismatches.push(format!("rejected: expected {:?}, got {rejected:?}", e.rejected));
        }
        if denied != e.denied {
            mismatches.push(format!("denied: expected {:?}, got {denied:?}", e.denied));
        }
        if run.emails != e.emails {
            mismatches.push(format!("emails: expected {}, got {}", e.emails, run.emails));
        }
        let attack = row.attack.as_ref().and_then(RowAttack::attack).map(|a| multi_verdict(&a.effect, run));
        if let (Some(want), Some(got)) = (e.attack, attack)
            && want != got
        {
            mismatches.push(format!("attack: expected {want}, got {got}"));
        }
        let hop = row
            .attack
            .as_ref()
            .and_then(|ra| ra.attack().map(|a| (a, ra.into.as_str())))
            .zip(attack)
            .map(|((a, into), v)| multi_propagation(a, v, run, into, &[]));
        check_hop(e.hop, e.stopped_by.as_deref(), hop.as_ref(), &mut mismatches);
        Self {
            table: "multi",
            id: row.id.clone(),
            reason: run.reason,
            messages: run.messages.len(),
            rejected,
            denied,
            emails: run.emails,
            role_calls: run.role_calls,
            attack,
            hop,
            matches: mismatches.is_empty(),
            // a mismatch quotes what the row expected: redacted like a trace line
            mismatches: mismatches.iter().map(|m| crate::security::redact(m).into_owned()).collect(),
        }
    }

    /// One table line.
    pub fn table_line(&self) -> String {
        let codes: Vec<&str> = self.rejected.iter().map(|c| c.as_str()).collect();
        let attack = self.attack.map(|a| format!(" attack={a}")).unwrap_or_default();
        let attack = attack + &hop_text(self.hop.as_ref());
        format!(
            "{:<5} {:<17} msgs={} rejected=[{}] denied=[{}] emails={}{attack} {}",
            self.id,
            self.reason.as_str(),
            self.messages,
            codes.join(", "),
            self.denied.join(", "),
            self.emails,
            if self.matches { "matches".to_string() } else { format!("MISMATCH: {}", self.mismatches.join("; ")) }
        )
    }
}

/// Runs one row with the fake role models and compares it with its expectation.
///
/// # Errors
/// [`ScenarioError::Multi`] when the run cannot be carried out.
pub async fn run_multi(row: &MultiRow, env: &Arc<MultiEnv>) -> Result<(MultiRun, MultiOutcome), ScenarioError> {
    let (env, planted) = row_env(row, env)?;
    let mut models = RoleModels::fakes(row.roles);
    if let Some(mode) = row.compromised.researcher {
        models.researcher = Box::new(CompromisedResearcher { mode, planted: planted.clone() });
    }
    if let Some(mode) = row.compromised.reviewer {
        models.reviewer = Box::new(CompromisedReviewer { mode, planted: planted.clone() });
    }
    if let Some(mode) = row.compromised.planner {
        models.planner = Box::new(CompromisedPlanner { mode, planted });
    }
    run_in(row, &env, models).await
}

/// The environment a row runs in: the shared one, or a copy with the row's own world
/// records, planted payload and role scopes; and the payloads it planted.
fn row_env(row: &MultiRow, env: &Arc<MultiEnv>) -> Result<(Arc<MultiEnv>, Arc<[Attack]>), ScenarioError> {
    let base =
        env.world().ok_or_else(|| row_error("(row)", 0, "world", "the scenarios run on the help desk".into()))?;
    let (world, planted) = row_world(base, row.world.as_ref(), row.attack.as_ref())
        .map_err(|(field, message)| row_error("(row)", 0, &field, message))?;
    let graph = match &row.call_graph {
        Some(edges) => Arc::new(
            crate::multi::CallGraph::from_edges(edges.clone())
                .map_err(|e| row_error("(row)", 0, "call_graph", e.to_string()))?,
        ),
        None => env.graph.clone(),
    };
    let env = if Arc::ptr_eq(&world, base) && row.defenses.scopes.is_none() && row.call_graph.is_none() {
        env.clone()
    } else {
        let scopes = row.defenses.role_scopes(&env.scopes);
        MultiEnv::from_parts(world, env.prices.clone(), scopes, graph)
    };
    Ok((env, planted))
}

/// Runs one row with `models` instead of its fakes (e.g. a real model for some or all
/// roles), in the row's world, and compares it with the row's expectation.
///
/// # Errors
/// [`ScenarioError::Multi`] when the run cannot be carried out; [`ScenarioError::Row`]
/// when the row's world does not build.
pub async fn run_multi_with(
    row: &MultiRow,
    env: &Arc<MultiEnv>,
    models: RoleModels,
) -> Result<(MultiRun, MultiOutcome), ScenarioError> {
    let (env, _) = row_env(row, env)?;
    run_in(row, &env, models).await
}

async fn run_in(
    row: &MultiRow,
    env: &Arc<MultiEnv>,
    models: RoleModels,
) -> Result<(MultiRun, MultiOutcome), ScenarioError> {
    let run = crate::multi::run(env, row.config(), models, &row.goal, &row.run_id())
        .await
        .map_err(|source| ScenarioError::Multi { id: row.id.clone(), source })?;
    let outcome = MultiOutcome::of(row, &run);
    Ok((run, outcome))
}
