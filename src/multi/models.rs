//! What each role runs on: its fake behaviour, or a model behind an OpenAI-compatible
//! server. [`RoleSetup`] is the value form (cloneable, comparable, printable); each run
//! builds fresh [`RoleModels`] from it, so no client is shared between runs.
//!
//! A real model replaces a role's behaviour completely: the planner and the reviewer make
//! one call with their trusted prompt and the received envelope (or the goal) as
//! untrusted blocks, the researcher runs the single-agent loop with its prompt. Their
//! output passes the same coordinator checks as a fake's.

use super::behaviours::{FakePlanner, FakeResearcher, FakeReviewer};
use super::coordinator::RoleModels;
use super::{Behaviours, Role};
use crate::agent::ModelDecider;
use crate::model::http::{ConfigError, Endpoint, HttpConfig};
use crate::model::{HttpClient, ModelSpec};

/// A fake behaviour per role, and the roles that ask a real model instead.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleSetup {
    /// The behaviours of the roles that run fakes.
    pub behaviours: Behaviours,
    /// The planner's real model, replacing its behaviour.
    pub planner: Option<HttpConfig>,
    /// The researcher's real model.
    pub researcher: Option<HttpConfig>,
    /// The reviewer's real model.
    pub reviewer: Option<HttpConfig>,
}

impl RoleSetup {
    /// Every role on its fake behaviour.
    pub fn fakes(behaviours: Behaviours) -> Self {
        Self { behaviours, ..Self::default() }
    }

    /// Every role on the model of `config`.
    pub fn http(config: &HttpConfig) -> Self {
        Self {
            behaviours: Behaviours::default(),
            planner: Some(config.clone()),
            researcher: Some(config.clone()),
            reviewer: Some(config.clone()),
        }
    }

    /// The roles' `--model` choices over `behaviours`: an `openai:` choice replaces that
    /// role's behaviour with the model at `endpoint`; a `fake:` choice keeps the role's
    /// behaviour (the single-agent fakes have no role form).
    ///
    /// # Errors
    /// [`ConfigError::MissingBaseUrl`] for an `openai:` choice without an endpoint.
    pub fn from_specs(
        behaviours: Behaviours,
        specs: &crate::model::RoleModelSpecs,
        endpoint: Option<&Endpoint>,
    ) -> Result<Self, ConfigError> {
        let http = |spec: &ModelSpec| spec.http_config(endpoint);
        Ok(Self {
            behaviours,
            planner: http(&specs.planner)?,
            researcher: http(&specs.researcher)?,
            reviewer: http(&specs.reviewer)?,
        })
    }

    /// The same setup with other behaviours for the roles that run fakes.
    pub fn with_behaviours(&self, behaviours: Behaviours) -> Self {
        Self { behaviours, ..self.clone() }
    }

    /// The real model of `role`, if it has one.
    pub fn http_config(&self, role: Role) -> Option<&HttpConfig> {
        match role {
            Role::Planner => self.planner.as_ref(),
            Role::Researcher => self.researcher.as_ref(),
            Role::Reviewer => self.reviewer.as_ref(),
            Role::Coordinator => None,
        }
    }

    /// True when no role asks a real model.
    pub fn all_fake(&self) -> bool {
        Role::MODEL_ROLES.iter().all(|r| self.http_config(*r).is_none())
    }

    /// Fresh models for one run: an [`HttpClient`] for a role with a real model (the
    /// researcher's wrapped in a [`ModelDecider`]), the behaviour's fake otherwise.
    pub fn models(&self) -> RoleModels {
        let b = self.behaviours;
        RoleModels {
            planner: match &self.planner {
                Some(cfg) => Box::new(HttpClient::new(cfg.clone())),
                None => Box::new(FakePlanner { kind: b.planner }),
            },
            researcher: match &self.researcher {
                Some(cfg) => Box::new(ModelDecider::new(HttpClient::new(cfg.clone()))),
                None => Box::new(FakeResearcher { kind: b.researcher }),
            },
            reviewer: match &self.reviewer {
                Some(cfg) => Box::new(HttpClient::new(cfg.clone())),
                None => Box::new(FakeReviewer { kind: b.reviewer }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FakeKind;
    use crate::multi::{ResearcherKind, behaviours};

    #[test]
    fn an_openai_choice_replaces_a_roles_behaviour_and_a_fake_choice_keeps_it() {
        let ep = Endpoint::new("http://127.0.0.1:9/v1").unwrap();
        let b = Behaviours { researcher: ResearcherKind::Obey, ..Behaviours::default() };
        let specs = crate::model::RoleModelSpecs::with_overrides(
            &ModelSpec::Fake(FakeKind::Sensible),
            None,
            Some("openai:small"),
            Some("fake:obey"),
        )
        .unwrap();
        let setup = RoleSetup::from_specs(b, &specs, Some(&ep)).unwrap();
        assert!(setup.planner.is_none() && setup.reviewer.is_none());
        assert_eq!(setup.researcher.as_ref().map(|c| c.model.as_str()), Some("small"));
        assert!(!setup.all_fake());
        let models = setup.models();
        let names = [models.planner.model(), models.researcher.model(), models.reviewer.model()];
        assert_eq!(names, [behaviours::FAKE_PLANNER, "small", behaviours::FAKE_REVIEWER]);
        assert_eq!(RoleSetup::from_specs(b, &specs, None), Err(ConfigError::MissingBaseUrl));
        assert!(RoleSetup::fakes(b).all_fake());
        let all = RoleSetup::http(&ep.config("big").unwrap());
        assert!(Role::MODEL_ROLES.iter().all(|r| all.http_config(*r).is_some_and(|c| c.model == "big")));
        assert_eq!(all.with_behaviours(b).behaviours, b);
    }

    #[test]
    fn each_role_prompt_asks_for_the_strict_body_the_coordinator_parses() {
        use crate::model::prompts;
        use crate::multi::envelope::{MAX_CLAIM_CHARS, MAX_NOTES_CHARS, MAX_QUESTION_CHARS, MAX_SOURCES};
        use crate::multi::{Body, parse_message, routes::next_hop};
        let roles = [
            (Role::Planner, prompts::PLANNER),
            (Role::Researcher, prompts::RESEARCHER),
            (Role::Reviewer, prompts::REVIEWER),
        ];
        for (role, prompt) in roles {
            let example = prompt.lines().map(str::trim).find(|l| l.starts_with(r#"{"kind""#)).unwrap();
            let (to, kind) = next_hop(role).unwrap();
            let body = parse_message(role, to, example).unwrap_or_else(|c| panic!("{role}: {example} is {c}"));
            assert_eq!(body.kind(), kind, "{role}");
            let limits: Vec<usize> = match body {
                Body::Brief(_) => vec![MAX_QUESTION_CHARS],
                // the finding is the loop's answer, whose limit is the claim's
                Body::Finding(_) => vec![MAX_CLAIM_CHARS, crate::agent::MAX_ANSWER_CHARS, MAX_SOURCES],
                Body::Verdict(_) => vec![MAX_NOTES_CHARS],
            };
            for n in limits {
                assert!(prompt.contains(&n.to_string()), "{role}: the prompt names the limit {n}");
            }
        }
    }
}
