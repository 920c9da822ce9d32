//! Injected clocks. Library code never reads the system time directly: it asks a
//! [`Clock`], so tests can use a [`ManualClock`] or paused tokio time.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A source of "seconds since this clock started".
pub trait Clock: Send + Sync + Debug {
    /// The time elapsed since the clock's origin.
    fn now(&self) -> Duration;
}

/// A clock shared by the parts of one run (loop, slow wrapper, approval queue).
pub(crate) type SharedClock = Arc<dyn Clock>;

/// A clock that only moves when told to. Cloning shares the same time.
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    /// Nanoseconds since the origin; shared by every clone, dropped with the last one.
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at time zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        let add = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| Some(n.saturating_add(add))).ok();
    }

    /// Moves the clock forward by `secs` seconds (negative or non-finite values are ignored).
    pub fn advance_secs(&self, secs: f64) {
        if let Ok(d) = Duration::try_from_secs_f64(secs) {
            self.advance(d);
        }
    }

    /// Sets the clock to an absolute time since its origin.
    pub fn set(&self, to: Duration) {
        let n = u64::try_from(to.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.store(n, Ordering::SeqCst);
    }

    /// This clock as a [`SharedClock`].
    pub fn shared(&self) -> SharedClock {
        Arc::new(self.clone())
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }
}

/// A clock on tokio's time, so `#[tokio::test(start_paused = true)]` controls it.
#[derive(Clone, Debug)]
pub struct TokioClock {
    /// The origin, taken when the clock was made.
    start: tokio::time::Instant,
}

impl TokioClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self { start: tokio::time::Instant::now() }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }
}

/// The system's wall clock, as seconds since the Unix epoch. Only the binary uses it
/// (approval expiry across processes); library code and tests take an injected clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default()
    }
}
