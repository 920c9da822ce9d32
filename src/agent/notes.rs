//! Memory notes into a model's context: each note handed to the model joins the gate's
//! context label ([`crate::gate::ToolGate::taint`]) with the note's own label, so a fact
//! remembered from a ticket in an earlier run taints this run's actions as the ticket
//! itself would, and the trusted-action rule names the note as the source.
//!
//! The notes a run starts with are absorbed once, when a drive starts (a resumed drive
//! absorbs them again: a join is idempotent and the first untrusted source is kept). A
//! note written during the run is built from an observation whose result label the gate
//! absorbed already when it handed the result back.

use super::driver::Agent;

impl Agent {
    /// Joins the label of every live note of this agent's memories into its gate's context
    /// label, each named `memory:KEY (SOURCE)`.
    pub(crate) fn absorb_notes(&mut self) {
        let session = self.memory.as_ref().map(|m| m.notes()).unwrap_or_default();
        let guarded = self.guarded.as_ref().map(|g| g.notes()).unwrap_or_default();
        for n in session.into_iter().chain(guarded) {
            let source = ["memory:", &n.key, " (", &n.source, ")"].concat();
            self.gate.absorb(n.label, &source);
        }
    }
}
