//! Template payloads in the matrix: who a payload is filled for (the task's user by name,
//! the model that reads it) and the matrix's figures per template, so a template's attack
//! success can be set next to the published rate of the same style.

use serde::Serialize;

use super::matrix::{Count, DefenseConfig, Figures, Intervals, Matrix, MatrixModels, VariantRun};
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
    world.users().get(user).map_or(user, |u| u.name.as_str())
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
    /// The 95% Wilson intervals of the rates, when the matrix carries them (with
    /// repetitions or a model); `utility` is left out (a template has no benign runs).
    #[serde(rename = "ci95", skip_serializing_if = "Option::is_none")]
    pub intervals: Option<Intervals>,
}

impl TemplateFigures {
    /// Column headers of [`TemplateFigures::line`].
    pub const TABLE_HEADER: &'static str = "template               design filter claims scopes  check approval  ifc under attack       attack success     attempted";

    /// Column headers of [`TemplateFigures::line`] when the figures carry intervals.
    pub const TABLE_HEADER_CI: &'static str = "template               design filter claims scopes  check approval  ifc under attack (95% CI)         attack success (95% CI)       attempted (95% CI)";

    /// The header of `figures`' lines: [`Self::TABLE_HEADER_CI`] when they carry
    /// intervals, else [`Self::TABLE_HEADER`].
    pub fn header(figures: &[Self]) -> &'static str {
        if figures.iter().any(|f| f.intervals.is_some()) { Self::TABLE_HEADER_CI } else { Self::TABLE_HEADER }
    }

    /// One aligned line, the configuration in the matrix table's columns (`ifc` included);
    /// each count with its 95% Wilson interval when the figures carry intervals.
    pub fn line(&self) -> String {
        let [design, filter, claims, scopes, check, approval] = self.config.cells();
        let (under, success, attempted) = (self.utility_under_attack, self.attack_success, self.attempted);
        let head = format!(
            "{:<22} {design:<6} {filter:<6} {claims:<6} {scopes:<7} {check:<5} {approval:<9} {:<3}",
            self.template.as_str(),
            self.config.ifc_cell()
        );
        if self.intervals.is_some() {
            format!(
                "{head} {:<29} {:<29} {}",
                under.with_interval(),
                success.with_interval(),
                attempted.with_interval()
            )
        } else {
            format!("{head} {:<18} {:<18} {attempted}", under.to_string(), success.to_string())
        }
    }
}

/// The matrix's figures per template and configuration (template order, then the
/// configurations' order), counted from the runs of `matrix` that name a template
/// ([`VariantRun::template`]): a matrix read back from a results file or merged from
/// shards gives the same figures as the run that wrote it. Each carries intervals when the
/// matrix's figures do. Empty when no template payload ran.
pub fn template_figures(matrix: &Matrix) -> Vec<TemplateFigures> {
    let mut out = Vec::new();
    for t in TemplateName::ALL {
        for (i, figures) in matrix.figures.iter().enumerate() {
            let runs: Vec<&VariantRun> =
                matrix.runs.iter().filter(|r| r.config == i && r.template == Some(*t)).collect();
            if runs.is_empty() {
                continue;
            }
            let mut f = Figures::of(figures.config, &runs);
            if figures.intervals.is_some() {
                f = f.with_intervals();
            }
            out.push(TemplateFigures {
                template: *t,
                config: f.config,
                label: f.label,
                utility_under_attack: f.utility_under_attack,
                attack_success: f.attack_success,
                attempted: f.attempted,
                intervals: f.intervals.map(|ci| Intervals { utility: None, ..ci }),
            });
        }
    }
    out
}
