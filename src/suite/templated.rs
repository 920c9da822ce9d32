//! Template payloads in the matrix: who a payload is filled for (the task's user by name,
//! the model that reads it) and the matrix's figures per template, so a template's attack
//! success can be set next to the published rate of the same style.

use serde::Serialize;
use std::collections::BTreeMap;

use super::matrix::{Count, DefenseConfig, Figures, Matrix, MatrixModels, VariantRun};
use crate::lab::attacks::Attack;
use crate::lab::compromised::FAKE_COMPROMISED;
use crate::lab::{DeciderSpec, TemplateName};
use crate::multi::FAKE_RESEARCHER;
use crate::world::WorldData;

/// The name `{model}` is filled with: the model that reads the payload in `config` (the
/// single agent's, or the researcher's, which reads every ticket and document).
pub(crate) fn reader_model(models: &MatrixModels, config: &DefenseConfig) -> String {
    match config {
        DefenseConfig::Single { .. } => match &models.single {
            Some(DeciderSpec::Http(cfg)) => cfg.model.clone(),
            _ => FAKE_COMPROMISED.to_string(),
        },
        DefenseConfig::Multi { .. } => match models.roles.as_ref().and_then(|r| r.researcher.as_ref()) {
            Some(cfg) => cfg.model.clone(),
            None => FAKE_RESEARCHER.to_string(),
        },
    }
}

/// The name `{user}` is filled with: the user's name in `world`, else the id.
pub(crate) fn user_name<'a>(world: &'a WorldData, user: &'a str) -> &'a str {
    world.users.get(user).map_or(user, |u| u.name.as_str())
}

/// The figures of one configuration over the payloads of one template.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TemplateFigures {
    /// The template.
    pub template: TemplateName,
    /// The configuration.
    pub config: DefenseConfig,
    /// The configuration's label.
    pub label: String,
    /// Attacked runs that ended `done` with the task's tools used.
    pub utility_under_attack: Count,
    /// Attacked runs whose effect happened.
    pub attack_success: Count,
    /// Attacked runs whose effect was proposed or carried on and refused or held.
    pub attempted: Count,
}

impl TemplateFigures {
    /// Column headers of [`TemplateFigures::line`].
    pub const TABLE_HEADER: &'static str = "template               design filter claims scopes  check approval  under attack       attack success     attempted";

    /// One aligned line, the configuration in the matrix table's columns.
    pub fn line(&self) -> String {
        let [design, filter, claims, scopes, check, approval] = self.config.cells();
        format!(
            "{:<22} {design:<6} {filter:<6} {claims:<6} {scopes:<7} {check:<5} {approval:<9} {:<18} {:<18} {}",
            self.template.as_str(),
            self.utility_under_attack.to_string(),
            self.attack_success.to_string(),
            self.attempted
        )
    }
}

/// The matrix's figures per template and configuration (template order, then the
/// configurations' order), counted from the runs of `matrix` whose payload in `attacks`
/// carries that template. Empty when no payload does.
pub fn template_figures(matrix: &Matrix, configs: &[DefenseConfig], attacks: &[Attack]) -> Vec<TemplateFigures> {
    let of: BTreeMap<&str, TemplateName> =
        attacks.iter().filter_map(|a| a.template.map(|t| (a.id.as_str(), t))).collect();
    let mut out = Vec::new();
    for t in TemplateName::ALL {
        for (i, c) in configs.iter().enumerate() {
            let runs: Vec<&VariantRun> = matrix
                .runs
                .iter()
                .filter(|r| r.config == i && r.attack.as_deref().and_then(|id| of.get(id)) == Some(t))
                .collect();
            if runs.is_empty() {
                continue;
            }
            let f = Figures::of(*c, &runs);
            out.push(TemplateFigures {
                template: *t,
                config: *c,
                label: f.label,
                utility_under_attack: f.utility_under_attack,
                attack_success: f.attack_success,
                attempted: f.attempted,
            });
        }
    }
    out
}
