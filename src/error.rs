//! [`Error`]: any error of the library, one variant per module's own error enum. It is
//! the top layer: it names every module's error, and no module below names it.

use crate::{agent, cost, design, gate, human, lab, memory, multi, store, world};

/// Any error of the library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// From the agent loop.
    #[error(transparent)]
    Agent(#[from] agent::AgentError),
    /// From run state.
    #[error(transparent)]
    State(#[from] agent::StateError),
    /// From cost.
    #[error(transparent)]
    Cost(#[from] cost::CostError),
    /// From the gate.
    #[error(transparent)]
    Gate(#[from] gate::GateError),
    /// From the world.
    #[error(transparent)]
    World(#[from] world::WorldError),
    /// From memory.
    #[error(transparent)]
    Memory(#[from] memory::MemoryError),
    /// From building an environment.
    #[error(transparent)]
    Env(#[from] agent::EnvError),
    /// From the scenario tables.
    #[error(transparent)]
    Scenario(#[from] lab::ScenarioError),
    /// From the designs.
    #[error(transparent)]
    Design(#[from] design::DesignError),
    /// From a checkpoint or signing key.
    #[error(transparent)]
    Checkpoint(#[from] human::CheckpointError),
    /// From the approval queue.
    #[error(transparent)]
    Approval(#[from] human::ApprovalError),
    /// From resuming a run.
    #[error(transparent)]
    Resume(#[from] human::ResumeError),
    /// From the durable store.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// From the approval desk.
    #[error(transparent)]
    Desk(#[from] store::DeskError),
    /// From the structured trace export.
    #[error(transparent)]
    TraceExport(#[from] agent::TraceExportError),
    /// From a multi-agent run.
    #[error(transparent)]
    Multi(#[from] multi::MultiError),
}
