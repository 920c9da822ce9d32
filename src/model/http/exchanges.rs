//! Durable exchanges: the model calls of a durable run, each made durable before its
//! answer is used. An [`Endpoint`](super::Endpoint) given an [`Exchanges`] log asks it
//! first: an exchange the run already made is answered from the log (no server is
//! contacted, nothing is paid again, the answer is the one the run saw); a new one is
//! asked of the server and its answer handed to the log, whose future resolves once the
//! answer is committed, and only then read.
//!
//! An exchange is named by the key of [`record`](super::record) (the SHA-256 of the exact
//! request body and the caller's repetition) and by its occurrence: the first time a run
//! sends that request is occurrence 0, the next 1, and so on, so a run that asks the same
//! thing twice is answered twice as it was the first time, in order. The store keeps the
//! log (`store::RunExchanges`); this module only holds the interface, so the model layer
//! never reaches up to the store.

use std::fmt;
use std::sync::Arc;

use crate::future::BoxFuture;

/// Where a durable run's model exchanges are kept.
pub trait ExchangeLog: Send + Sync {
    /// The next occurrence of the request with exchange key `key` in this run, and its
    /// recorded answer body when the run already made it.
    ///
    /// # Errors
    /// Why the log cannot answer (the call then fails with `exchange_not_durable`).
    fn recall(&self, key: &str) -> Result<(u32, Option<String>), String>;

    /// Keeps `answer` (an occurrence of an exchange, with its answer body); the future
    /// resolves once the answer is durable.
    ///
    /// # Errors
    /// Why the answer could not be made durable (the call then fails with
    /// `exchange_not_durable` and the answer is not used).
    fn keep(&self, answer: ExchangeAnswer) -> BoxFuture<'static, Result<(), String>>;
}

/// One answer a server gave a durable run: what [`ExchangeLog::keep`] keeps, named as
/// [`ExchangeLog::recall`] finds it again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExchangeAnswer {
    /// The exchange key: SHA-256 of the exact request body and the repetition, as
    /// [`record`](super::record) names a recorded exchange.
    pub key: String,
    /// The occurrence of that request in the run (0 for the first time it was sent).
    pub occurrence: u32,
    /// The caller's repetition.
    pub repetition: u32,
    /// The answer body, as read.
    pub answer: String,
}

/// A shared [`ExchangeLog`] an endpoint can hold (two are equal when they are the same
/// log).
#[derive(Clone)]
pub struct Exchanges(Arc<dyn ExchangeLog>);

impl Exchanges {
    /// Exchanges go to `log`.
    pub fn to(log: Arc<dyn ExchangeLog>) -> Self {
        Self(log)
    }

    pub(crate) fn log(&self) -> &dyn ExchangeLog {
        self.0.as_ref()
    }
}

impl fmt::Debug for Exchanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Exchanges(..)")
    }
}

impl PartialEq for Exchanges {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Exchanges {}
