//! [`Env`]: the world data, policy and prices every run of a suite shares (read-only).

use std::sync::Arc;

use crate::cost::PriceTable;
use crate::gate::Policy;
use crate::world::WorldData;

/// The bundled price table, `data/prices.json`.
pub(super) const BUNDLED_PRICES: &str = include_str!("../../data/prices.json");

/// Errors building an environment.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnvError {
    /// The world did not load.
    #[error(transparent)]
    World(#[from] crate::world::WorldError),
    /// The policy did not load.
    #[error(transparent)]
    Policy(#[from] crate::gate::GateError),
    /// The prices did not load.
    #[error(transparent)]
    Prices(#[from] crate::cost::CostError),
}

/// World data, policy and prices: what every run of a suite shares (read-only).
#[derive(Clone, Debug)]
pub struct Env {
    /// Tickets, documents, users.
    pub world: Arc<WorldData>,
    /// The base policy.
    pub policy: Policy,
    /// Prices.
    pub prices: Arc<PriceTable>,
}

impl Env {
    /// The bundled environment.
    ///
    /// # Errors
    /// Only if a bundled file were broken (tests guard them).
    pub fn bundled() -> Result<Self, EnvError> {
        Ok(Self {
            world: Arc::new(WorldData::bundled()?),
            policy: Policy::bundled()?,
            prices: Arc::new(PriceTable::from_json(BUNDLED_PRICES)?),
        })
    }
}
