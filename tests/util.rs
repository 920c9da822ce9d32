//! Shared helpers for the integration tests.

use rolegate::eval::{Env, Lab, LabConfig};
use rolegate::model::FakeKind;

/// The bundled environment.
pub fn env() -> Env {
    Env::bundled().expect("bundled data loads")
}

/// A lab with fake model `kind` and the default config otherwise.
pub fn lab(kind: FakeKind) -> Lab {
    LabConfig::fake(kind).build(&env())
}

/// A lab from a config.
pub fn lab_with(cfg: LabConfig) -> Lab {
    cfg.build(&env())
}
