//! The context every checker and every invariant checks in: the bundled environment
//! ([`Fixture`]) and the standard state a proposal is checked in ([`ProposalContext`]).
//! `testkit` makes them public for the fuzz targets and property tests.
#![cfg_attr(not(feature = "testkit"), allow(unreachable_pub))]

use serde_json::json;
use std::collections::BTreeSet;

use crate::agent::{AgentState, Env, EnvError, FixedPlan, StateError};
use crate::lab::{DeciderSpec, Lab, LabConfig};
use crate::tools::fingerprint;

/// The user every check acts for.
pub const USER: &str = "kwame";
/// The run id every check uses.
pub const RUN_ID: &str = "fuzz-1";

/// What every check runs in: the bundled world, policy and prices, loaded once.
#[derive(Clone, Debug)]
pub struct Fixture {
    /// World, policy, prices.
    pub env: Env,
}

impl Fixture {
    /// The bundled environment.
    ///
    /// # Errors
    /// Only if a bundled file were broken (tests guard them).
    pub fn bundled() -> Result<Self, EnvError> {
        Ok(Self { env: Env::bundled()? })
    }

    /// A single-agent lab for `task`, with no model behind it (checks and the gate only)
    /// and no memory.
    pub fn lab(&self, task: &str) -> Lab {
        let cfg = LabConfig {
            decider: DeciderSpec::Fixed(FixedPlan::default()),
            task: task.to_string(),
            memory: false,
            ..LabConfig::default()
        };
        cfg.build(&self.env)
    }
}

/// The state a proposal is checked in, the same for the fuzz target, the property tests
/// and the proposal corpus: step 1 of run `fuzz-1` for kwame, `o1` a successful read of
/// T-601 and `o2` a failed document lookup; the read of T-601 counts as already made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProposalContext {
    /// The state.
    pub state: AgentState,
    /// Fingerprints of the calls already made (the repeat rule).
    pub seen: BTreeSet<String>,
}

impl ProposalContext {
    /// The standard context for `task`.
    ///
    /// # Errors
    /// Only if the state rules refused this fixed history (a bug).
    pub fn standard(task: &str) -> Result<Self, StateError> {
        let state = AgentState::new(RUN_ID, USER, task, "Check T-601 and the refund policy.")?.next_step()?;
        let ticket = r#"{"id":"T-601","status":"open","subject":"Brake pads squeal","text":"Can I return them?"}"#;
        let (state, _) = state.observe(true, "get_ticket", ticket)?;
        let (state, _) = state.observe(false, "lookup_document", "error not_found: no document kc-none")?;
        let seen = BTreeSet::from([fingerprint("get_ticket", &json!({"ticket_id": "T-601"}))]);
        Ok(Self { state, seen })
    }
}
