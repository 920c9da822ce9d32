//! One task as a single agent and as three roles, side by side: what the split costs
//! (model calls, messages, tool calls) and what it buys (each role's scope, and the routes
//! that are the only way between them). Printed by `rolegate compare`.

use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::agent::Env;
use crate::agent::StopReason;
use crate::design::DesignError;
use crate::lab::LabConfig;
use crate::model::FakeKind;
use crate::multi::{Behaviours, Kind, MultiConfig, MultiEnv, MultiReason, ROUTES, Role, RoleModels};

/// The task both designs run.
pub(crate) const COMPARE_GOAL: &str = "Status of T-601 and our refund policy?";

/// The single agent's side.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SingleSide {
    /// How it ended.
    pub reason: StopReason,
    /// Model calls.
    pub model_calls: u64,
    /// Messages between roles (none: there is one agent).
    pub messages: usize,
    /// Tools sent to the gate, in order.
    pub tools: Vec<String>,
}

/// The three roles' side.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MultiSide {
    /// How it ended.
    pub reason: MultiReason,
    /// Model calls over all roles.
    pub role_calls: u32,
    /// Accepted messages.
    pub messages: usize,
    /// Tools each role sent to its gate, in order.
    pub tools: BTreeMap<Role, Vec<String>>,
}

/// One route of the table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RouteLine {
    /// From.
    pub sender: Role,
    /// To.
    pub recipient: Role,
    /// The only kind allowed.
    pub kind: Kind,
}

/// Both designs on [`COMPARE_GOAL`], the scopes and the routes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Comparison {
    /// The task.
    pub goal: String,
    /// One agent with the triage task's tools.
    pub single: SingleSide,
    /// Planner, researcher, reviewer.
    pub multi: MultiSide,
    /// Each role's tools.
    pub scopes: BTreeMap<Role, Vec<String>>,
    /// The route table.
    pub routes: Vec<RouteLine>,
}

/// Runs [`COMPARE_GOAL`] both ways with sensible fake models.
///
/// # Errors
/// [`DesignError`] when either run cannot be carried out (the single agent's
/// [`DesignError::Agent`], the three roles' [`DesignError::Multi`]).
pub async fn compare(env: &Env) -> Result<Comparison, DesignError> {
    compare_with(env, LabConfig::fake(FakeKind::Sensible), RoleModels::fakes(Behaviours::default())).await
}

/// Runs [`COMPARE_GOAL`] as the single agent `single` builds and as three roles on
/// `roles` (e.g. a real model for each).
///
/// # Errors
/// [`DesignError`] when either run cannot be carried out (the single agent's
/// [`DesignError::Agent`], the three roles' [`DesignError::Multi`]).
pub(crate) async fn compare_with(env: &Env, single: LabConfig, roles: RoleModels) -> Result<Comparison, DesignError> {
    let mut lab = single.build(env);
    let single = lab.agent.run(COMPARE_GOAL, "run-single").await?;
    let menv: Arc<MultiEnv> = MultiEnv::new(env)?;
    let multi = crate::multi::run(&menv, MultiConfig::default(), roles, COMPARE_GOAL, "run-multi").await?;
    let scopes = Role::MODEL_ROLES
        .iter()
        .map(|r| (*r, menv.scopes.tools(*r).into_iter().map(str::to_string).collect()))
        .collect();
    Ok(Comparison {
        goal: COMPARE_GOAL.to_string(),
        single: SingleSide {
            reason: single.reason(),
            model_calls: single.ledger().summary().calls,
            messages: 0,
            tools: single.calls().to_vec(),
        },
        multi: MultiSide {
            reason: multi.reason,
            role_calls: multi.role_calls,
            messages: multi.messages.len(),
            tools: multi.tools,
        },
        scopes,
        routes: ROUTES.iter().map(|(s, r, k)| RouteLine { sender: *s, recipient: *r, kind: *k }).collect(),
    })
}

fn list(items: &[String]) -> String {
    format!("[{}]", items.join(", "))
}

impl Comparison {
    /// The printout: both designs, then each scope, then the routes.
    pub fn lines(&self) -> Vec<String> {
        let per_role: Vec<String> = self.multi.tools.iter().map(|(r, t)| format!("{r} {}", list(t))).collect();
        let mut lines = vec![
            format!("task: {}", self.goal),
            format!(
                "single agent: {} | model calls {} | messages {} | tools {}",
                self.single.reason,
                self.single.model_calls,
                self.single.messages,
                list(&self.single.tools)
            ),
            format!(
                "three roles:  {} | role calls {} | messages {} | tools {}",
                self.multi.reason,
                self.multi.role_calls,
                self.multi.messages,
                per_role.join(", ")
            ),
        ];
        for (role, tools) in &self.scopes {
            lines.push(format!("scope {role:<10} {}", list(tools)));
        }
        let routes: Vec<String> =
            self.routes.iter().map(|r| format!("{}->{} {}", r.sender, r.recipient, r.kind)).collect();
        lines.push(format!("routes: {}", routes.join(", ")));
        lines
    }
}
