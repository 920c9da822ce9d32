//! Running scenario rows as a suite: every row in a fresh world, all concurrently, the
//! outcomes in table order. What `rolegate suite` and `rolegate report` print.

use serde::Serialize;
use std::sync::Arc;

use super::bounded::{MAX_IN_FLIGHT, run_bounded};
use crate::agent::Env;
use crate::eval::multi_scenarios::{AnyRow, MultiOutcome, run_multi, run_multi_with};
use crate::eval::scenarios::{SingleOutcome, run_single_with};
use crate::lab::ScenarioError;
use crate::lab::{DeciderSpec, LabConfig};
use crate::multi::{MultiEnv, MultiRun, RoleSetup};

/// What one row did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowResult {
    /// A single-agent row.
    Single(SingleOutcome),
    /// A multi-agent row, with its run (for the sequence diagram).
    Multi(MultiOutcome, Box<MultiRun>),
}

impl RowResult {
    /// The row id.
    pub fn id(&self) -> &str {
        match self {
            Self::Single(o) => &o.id,
            Self::Multi(o, _) => &o.id,
        }
    }

    /// `single` or `multi`.
    pub fn table(&self) -> &'static str {
        match self {
            Self::Single(o) => o.table,
            Self::Multi(o, _) => o.table,
        }
    }

    /// True when every expectation held.
    pub fn matches(&self) -> bool {
        match self {
            Self::Single(o) => o.matches,
            Self::Multi(o, _) => o.matches,
        }
    }

    /// What differs from the expectation.
    pub fn mismatches(&self) -> &[String] {
        match self {
            Self::Single(o) => &o.mismatches,
            Self::Multi(o, _) => &o.mismatches,
        }
    }

    /// E-mails sent.
    pub fn emails(&self) -> usize {
        match self {
            Self::Single(o) => o.emails,
            Self::Multi(o, _) => o.emails,
        }
    }

    /// The aligned table line.
    pub fn table_line(&self) -> String {
        match self {
            Self::Single(o) => o.table_line(),
            Self::Multi(o, _) => o.table_line(),
        }
    }

    /// The outcome as one JSON object.
    pub fn json_line(&self) -> String {
        fn line<T: Serialize>(t: &T) -> String {
            serde_json::to_string(t).unwrap_or_default()
        }
        match self {
            Self::Single(o) => line(o),
            Self::Multi(o, _) => line(o),
        }
    }
}

/// Runs `rows` concurrently (at most [`MAX_IN_FLIGHT`](super::bounded::MAX_IN_FLIGHT) at
/// once), each in a fresh world, and returns their results in order.
/// With `model`, every single-agent row runs with that decider instead of its own (multi
/// rows keep their role behaviours).
pub async fn run_rows(
    rows: Vec<AnyRow>,
    env: &Arc<Env>,
    menv: &Arc<MultiEnv>,
    model: Option<&DeciderSpec>,
    roles: Option<&RoleSetup>,
) -> Vec<Result<RowResult, ScenarioError>> {
    run_rows_bounded(rows, env, menv, (model, roles), MAX_IN_FLIGHT).await
}

/// [`run_rows`] with at most `in_flight` rows running at once (with a real model, at most
/// what its connections serve: a row waiting for a connection spends its own time budget).
pub async fn run_rows_bounded(
    rows: Vec<AnyRow>,
    env: &Arc<Env>,
    menv: &Arc<MultiEnv>,
    (model, roles): (Option<&DeciderSpec>, Option<&RoleSetup>),
    in_flight: usize,
) -> Vec<Result<RowResult, ScenarioError>> {
    let work = rows.into_iter().map(|row| run_row(row, env.clone(), menv.clone(), model.cloned(), roles.cloned()));
    run_bounded(work, in_flight).await.into_iter().map(joined).collect()
}

/// A row's result from its joined task (a task that panicked is an error of its own).
pub(crate) fn joined(joined: Result<Result<RowResult, ScenarioError>, String>) -> Result<RowResult, ScenarioError> {
    joined.unwrap_or_else(|e| {
        Err(ScenarioError::Io { file: "(suite)".into(), message: format!("a row's task failed: {e}") })
    })
}

/// Runs one row in a fresh world (with `model`, a single row's decider is that one; with
/// `roles`, a multi row's roles ask those models).
pub(crate) async fn run_row(
    row: AnyRow,
    env: Arc<Env>,
    menv: Arc<MultiEnv>,
    model: Option<DeciderSpec>,
    roles: Option<RoleSetup>,
) -> Result<RowResult, ScenarioError> {
    match row {
        AnyRow::Single(r) => {
            let cfg = r.lab_config()?;
            let cfg = match model {
                Some(decider) => LabConfig { decider, ..cfg },
                None => cfg,
            };
            run_single_with(&r, &env, cfg).await.map(RowResult::Single)
        }
        AnyRow::Multi(r) => match roles {
            Some(setup) => run_multi_with(&r, &menv, setup.with_behaviours(r.roles).models()).await,
            None => run_multi(&r, &menv).await,
        }
        .map(|(run, o)| RowResult::Multi(o, Box::new(run))),
    }
}
