//! Runs held in place for a measurement: a [`ParkingGate`] wraps a role's decider so that
//! its run waits, at its first decision, until the gate opens; the run is then parked
//! with everything it holds. `rolegate bench` (resident memory per parked run) and
//! `examples/parked_bytes.rs` (heap bytes per parked run) park their runs the same way.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::watch;

use crate::agent::{AgentState, Decider};
use crate::future::BoxFuture;
use crate::model::{LlmRequest, LlmResponse, ModelError};

/// A gate many runs park at: each decider it wraps ([`ParkingGate::park`]) counts itself
/// in at its first decision and waits there until [`ParkingGate::open`].
#[derive(Debug)]
pub struct ParkingGate {
    open: watch::Sender<bool>,
    arrived: Arc<AtomicUsize>,
}

impl Default for ParkingGate {
    fn default() -> Self {
        Self::new()
    }
}

impl ParkingGate {
    /// A closed gate with no run parked.
    pub fn new() -> Self {
        Self { open: watch::channel(false).0, arrived: Arc::new(AtomicUsize::new(0)) }
    }

    /// `inner`, waiting at its first decision until the gate opens (every later decision
    /// goes straight to `inner`).
    pub fn park(&self, inner: Box<dyn Decider>) -> Box<dyn Decider> {
        Box::new(ParkedDecider { inner, gate: self.open.subscribe(), arrived: self.arrived.clone(), waiting: true })
    }

    /// How many wrapped deciders have reached their first decision (and wait, while the
    /// gate is closed).
    pub fn arrived(&self) -> usize {
        self.arrived.load(Ordering::SeqCst)
    }

    /// Opens the gate: every parked decider goes on, and none waits from now on.
    pub fn open(&self) {
        self.open.send_replace(true);
    }
}

/// A decider that waits, at its first decision, until its gate opens.
struct ParkedDecider {
    inner: Box<dyn Decider>,
    gate: watch::Receiver<bool>,
    arrived: Arc<AtomicUsize>,
    waiting: bool,
}

impl Decider for ParkedDecider {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn decide<'a>(
        &'a mut self,
        state: &'a AgentState,
        request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        Box::pin(async move {
            if self.waiting {
                self.waiting = false;
                self.arrived.fetch_add(1, Ordering::SeqCst);
                let _ = self.gate.wait_for(|open| *open).await;
            }
            self.inner.decide(state, request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts its decisions and answers each with a named failure.
    struct Counting(Arc<AtomicUsize>);

    impl Decider for Counting {
        fn model(&self) -> &str {
            "counting"
        }

        fn decide<'a>(
            &'a mut self,
            _state: &'a AgentState,
            _request: &'a LlmRequest,
        ) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Err(ModelError::Crashed("counted".into())) })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_parked_decider_waits_at_its_first_decision_until_the_gate_opens() {
        let gate = ParkingGate::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let mut d = gate.park(Box::new(Counting(calls.clone())));
        assert_eq!(d.model(), "counting");
        let state = AgentState::new("run-1", "kwame", "triage", "Check T-601.").unwrap();
        let request = LlmRequest { model: "counting".into(), messages: Vec::new(), tools: Vec::new(), max_tokens: 1 };
        let first = tokio::time::timeout(std::time::Duration::from_secs(5), d.decide(&state, &request)).await;
        assert!(first.is_err(), "closed: the first decision waits");
        assert_eq!((gate.arrived(), calls.load(Ordering::SeqCst)), (1, 0));
        gate.open();
        assert!(d.decide(&state, &request).await.is_err(), "the inner decider answers");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let mut later = gate.park(Box::new(Counting(calls.clone())));
        assert!(later.decide(&state, &request).await.is_err(), "open: nothing waits");
        assert_eq!((gate.arrived(), calls.load(Ordering::SeqCst)), (2, 2));
    }
}
