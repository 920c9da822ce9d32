//! Experiments: the matrix or the scenario rows run as cells that can be repeated,
//! resumed from a results file and split into shards. A cell that a results file already
//! holds is read back, not run; a cell outside the run's shard is left to another shard;
//! every cell that finishes is appended to the results file at once. Tables are built in
//! the experiment's own order whatever order the cells finished in, so a resumed run, a
//! merged set of shards and one uninterrupted run print the same tables.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

use super::bounded::{MAX_IN_FLIGHT, run_bounded};
use super::matrix::{DefenseConfig, Matrix, MatrixModels, MatrixSpec, Shared, VariantRun, assemble, run_variant};
use super::results::{ExperimentConfig, ResultsFile, matrix_cell, row_cell};
use super::run::{RowResult, run_row};
use super::shard::Shard;
use crate::agent::Env;
use crate::eval::multi_scenarios::AnyRow;
use crate::lab::{DeciderSpec, ScenarioError};
use crate::multi::{MultiEnv, RoleSetup};

/// How an experiment runs its cells.
#[derive(Debug)]
pub struct MatrixPlan {
    /// Who decides (the compromised fakes by default).
    pub models: MatrixModels,
    /// Runs per cell (at least 1).
    pub repeat: u32,
    /// Print each rate with its 95% Wilson interval.
    pub intervals: bool,
    /// Run only this shard's cells.
    pub shard: Option<Shard>,
    /// Cells finished before (from a results file), by id: read back, not run.
    pub done: BTreeMap<String, Value>,
    /// Where each finished cell is appended.
    pub out: Option<Arc<ResultsFile>>,
    /// Most cells in flight at once: with a real model, at most what its connections can
    /// serve (a cell waiting for a connection spends its own time budget in the queue).
    pub in_flight: usize,
    /// Each cell's time budget instead of the designs' own (60 s).
    pub time_budget: Option<std::time::Duration>,
}

impl Default for MatrixPlan {
    fn default() -> Self {
        Self {
            models: MatrixModels::default(),
            repeat: 1,
            intervals: false,
            shard: None,
            done: BTreeMap::new(),
            out: None,
            in_flight: MAX_IN_FLIGHT,
            time_budget: None,
        }
    }
}

fn results_error(e: impl std::fmt::Display) -> ScenarioError {
    ScenarioError::Io { file: "(results)".into(), message: e.to_string() }
}

/// The experiment `spec` is under `plan` (without models or data hashes: the caller names
/// those).
pub fn matrix_experiment(spec: &MatrixSpec, plan: &MatrixPlan) -> ExperimentConfig {
    ExperimentConfig {
        kind: "matrix".into(),
        configs: spec.configs.iter().map(DefenseConfig::label).collect(),
        tasks: spec.tasks.iter().map(|t| t.id.clone()).collect(),
        attacks: spec.attacks.iter().map(|a| a.id.clone()).collect(),
        repeat: plan.repeat.max(1),
        intervals: plan.intervals,
        ..ExperimentConfig::default()
    }
}

/// Runs the cells of the matrix that `plan` asks for: those of its shard, each
/// repetition, reading back the ones already done and appending each new one to the
/// results file as it finishes. The matrix holds the runs of those cells only.
///
/// # Errors
/// [`ScenarioError`] as [`run_matrix`](super::run_matrix), or a results line that does not
/// read back or cannot be written.
pub async fn run_matrix_plan(spec: &MatrixSpec, env: &Env, plan: &MatrixPlan) -> Result<Matrix, ScenarioError> {
    let mut shared = Shared::new(spec, env, plan.models.clone())?;
    shared.time_budget = plan.time_budget;
    let shared = Arc::new(shared);
    let mut slots: Vec<Option<VariantRun>> = Vec::new();
    let mut work = Vec::new();
    for (index, &config) in spec.configs.iter().enumerate() {
        let label = config.label();
        for task in &spec.tasks {
            let variants = std::iter::once(None).chain(spec.attacks.iter().cloned().map(Some));
            for attack in variants {
                for rep in 0..plan.repeat.max(1) {
                    let cell = matrix_cell(&label, &task.id, attack.as_ref().map(|a| a.id.as_str()), rep);
                    if plan.shard.is_some_and(|s| !s.holds(&cell)) {
                        continue;
                    }
                    if let Some(done) = plan.done.get(&cell) {
                        let run: VariantRun = serde_json::from_value(done.clone())
                            .map_err(|e| results_error(format!("cell {cell}: {e}")))?;
                        slots.push(Some(run));
                        continue;
                    }
                    let slot = slots.len();
                    slots.push(None);
                    let (shared, out, task, attack) = (shared.clone(), plan.out.clone(), task.clone(), attack.clone());
                    work.push(async move {
                        let (run, never_ran) = run_variant(shared, index, config, task, attack, rep).await?;
                        if let Some(reason) = never_ran {
                            return Ok::<_, ScenarioError>((slot, Err((cell, reason))));
                        }
                        if let Some(out) = out {
                            let value = serde_json::to_value(&run).map_err(results_error)?;
                            out.append(&cell, value).map_err(results_error)?;
                        }
                        Ok((slot, Ok(run)))
                    });
                }
            }
        }
    }
    let mut not_run = Vec::new();
    for joined in run_bounded(work, plan.in_flight).await {
        let (slot, run) = joined.map_err(|message| ScenarioError::Io { file: "(matrix)".into(), message })??;
        match run {
            Ok(run) => {
                if let Some(s) = slots.get_mut(slot) {
                    *s = Some(run);
                }
            }
            Err(cell) => not_run.push(cell),
        }
    }
    if let Some((first, reason)) = not_run.first() {
        return Err(ScenarioError::NotRun { count: not_run.len(), first: first.clone(), reason: (*reason).into() });
    }
    let runs: Vec<VariantRun> = slots.into_iter().flatten().collect();
    Ok(assemble(&spec.configs, spec.tasks.len(), spec.attacks.len(), runs, plan.intervals))
}

/// The matrix of a merged experiment: every cell's run, read back in the experiment's
/// order.
///
/// # Errors
/// [`ScenarioError::Io`] for a configuration label this build does not know or a cell
/// whose result does not read back as a run.
pub fn matrix_of_cells(config: &ExperimentConfig, cells: &BTreeMap<String, Value>) -> Result<Matrix, ScenarioError> {
    let all = DefenseConfig::with_ifc();
    let configs = config
        .configs
        .iter()
        .map(|l| all.iter().find(|c| &c.label() == l).copied())
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| results_error("a configuration of the results is unknown to this build"))?;
    let mut runs = Vec::new();
    for cell in config.cells() {
        let value = cells.get(&cell).ok_or_else(|| results_error(format!("missing_cells: {cell}")))?;
        runs.push(serde_json::from_value(value.clone()).map_err(|e| results_error(format!("cell {cell}: {e}")))?);
    }
    Ok(assemble(&configs, config.tasks.len(), config.attacks.len(), runs, config.intervals))
}

/// What a results file keeps of a scenario row's run: what the tables print.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredRow {
    /// The row id.
    pub id: String,
    /// `single` or `multi`.
    pub table: String,
    /// Every expectation held.
    pub matches: bool,
    /// What differs from the expectation.
    pub mismatches: Vec<String>,
    /// E-mails sent.
    pub emails: usize,
    /// The aligned table line.
    pub table_line: String,
    /// The outcome as one JSON object.
    pub json_line: String,
}

impl StoredRow {
    /// What the tables print of `r`.
    pub fn of(r: &RowResult) -> Self {
        Self {
            id: r.id().to_string(),
            table: r.table().to_string(),
            matches: r.matches(),
            mismatches: r.mismatches().to_vec(),
            emails: r.emails(),
            table_line: r.table_line(),
            json_line: r.json_line(),
        }
    }
}

/// How the rows run: who decides, how often, which shard, what was done before.
#[derive(Debug)]
pub struct RowsPlan {
    /// Every single row's decider instead of its own.
    pub model: Option<DeciderSpec>,
    /// The multi rows' real role models.
    pub roles: Option<RoleSetup>,
    /// Runs per row (at least 1).
    pub repeat: u32,
    /// Run only this shard's cells.
    pub shard: Option<Shard>,
    /// Cells finished before, by id.
    pub done: BTreeMap<String, Value>,
    /// Where each finished cell is appended.
    pub out: Option<Arc<ResultsFile>>,
    /// Most rows in flight at once (see [`MatrixPlan::in_flight`]).
    pub in_flight: usize,
}

impl Default for RowsPlan {
    fn default() -> Self {
        Self {
            model: None,
            roles: None,
            repeat: 1,
            shard: None,
            done: BTreeMap::new(),
            out: None,
            in_flight: MAX_IN_FLIGHT,
        }
    }
}

/// The experiment of `rows` under `plan` (without models or data hashes).
pub fn rows_experiment(rows: &[AnyRow], plan: &RowsPlan, intervals: bool) -> ExperimentConfig {
    ExperimentConfig {
        kind: "suite".into(),
        rows: rows.iter().map(|r| r.id().to_string()).collect(),
        repeat: plan.repeat.max(1),
        intervals,
        ..ExperimentConfig::default()
    }
}

/// Runs the row cells `plan` asks for and returns them in order (row, repetition) with
/// their cell ids, appending each new one to the results file as it finishes.
///
/// # Errors
/// The first row that could not be carried out, or a results line that does not read
/// back or cannot be written.
pub async fn run_rows_plan(
    rows: Vec<AnyRow>,
    env: &Arc<Env>,
    menv: &Arc<MultiEnv>,
    plan: &RowsPlan,
) -> Result<Vec<(String, StoredRow)>, ScenarioError> {
    let mut slots: Vec<(String, Option<StoredRow>)> = Vec::new();
    let mut work = Vec::new();
    for row in rows {
        for rep in 0..plan.repeat.max(1) {
            let cell = row_cell(row.id(), rep);
            if plan.shard.is_some_and(|s| !s.holds(&cell)) {
                continue;
            }
            if let Some(done) = plan.done.get(&cell) {
                let stored: StoredRow =
                    serde_json::from_value(done.clone()).map_err(|e| results_error(format!("cell {cell}: {e}")))?;
                slots.push((cell, Some(stored)));
                continue;
            }
            let slot = slots.len();
            slots.push((cell.clone(), None));
            let (env, menv, model, roles, out, row) =
                (env.clone(), menv.clone(), plan.model.clone(), plan.roles.clone(), plan.out.clone(), row.clone());
            work.push(async move {
                let result = run_row(row, env, menv, model, roles).await?;
                let stored = StoredRow::of(&result);
                if let Some(out) = out {
                    let value = serde_json::to_value(&stored).map_err(results_error)?;
                    out.append(&cell, value).map_err(results_error)?;
                }
                Ok::<_, ScenarioError>((slot, stored))
            });
        }
    }
    for j in run_bounded(work, plan.in_flight).await {
        let (slot, stored) = j.map_err(|message| ScenarioError::Io { file: "(suite)".into(), message })??;
        if let Some(s) = slots.get_mut(slot) {
            s.1 = Some(stored);
        }
    }
    Ok(slots.into_iter().filter_map(|(c, s)| s.map(|s| (c, s))).collect())
}

/// The rows of a merged experiment, in order.
///
/// # Errors
/// [`ScenarioError::Io`] for a cell whose result does not read back as a row.
pub fn rows_of_cells(
    config: &ExperimentConfig,
    cells: &BTreeMap<String, Value>,
) -> Result<Vec<(String, StoredRow)>, ScenarioError> {
    config
        .cells()
        .into_iter()
        .map(|cell| {
            let value = cells.get(&cell).ok_or_else(|| results_error(format!("missing_cells: {cell}")))?;
            let row = serde_json::from_value(value.clone()).map_err(|e| results_error(format!("cell {cell}: {e}")))?;
            Ok((cell, row))
        })
        .collect()
}
