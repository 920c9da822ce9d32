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

/// The bundled environment with the role scopes, shared by multi-agent runs.
pub fn menv() -> std::sync::Arc<rolegate::multi::MultiEnv> {
    rolegate::multi::MultiEnv::new(&env()).expect("bundled policy has the role scopes")
}

/// The bundled m01 row.
pub fn m01() -> rolegate::eval::multi_scenarios::MultiRow {
    rolegate::eval::multi_scenarios::bundled_multi().expect("bundled table loads").remove(0)
}
