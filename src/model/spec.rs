//! What a `--model` value selects — `fake:<kind>` (the default, `fake:sensible`) or
//! `openai:<name>` (the HTTP client) — and building a client for it. One [`Endpoint`]
//! serves every role of a run; each role may name its own model.

use std::fmt;
use std::str::FromStr;

use super::http::config::check_model_name;
use super::http::{ConfigError, Endpoint, HttpClient, HttpConfig};
use super::{FakeKind, FakeModel, LlmClient};

/// The prefix selecting a fake model.
pub(crate) const FAKE_PREFIX: &str = "fake:";
/// The prefix selecting the OpenAI-compatible HTTP client.
pub(crate) const OPENAI_PREFIX: &str = "openai:";

/// A model choice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelSpec {
    /// A fake model (`fake:sensible`, `fake:obey`, …).
    Fake(FakeKind),
    /// A model behind an OpenAI-compatible server, by the name the server knows
    /// (`openai:qwen2.5-7b-instruct`); the same name keys `data/prices.json`.
    OpenAi(String),
}

impl Default for ModelSpec {
    fn default() -> Self {
        Self::Fake(FakeKind::Sensible)
    }
}

impl FromStr for ModelSpec {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(kind) = s.strip_prefix(FAKE_PREFIX) {
            return kind.parse().map(Self::Fake).map_err(|_| ConfigError::UnknownModel(s.to_string()));
        }
        if let Some(name) = s.strip_prefix(OPENAI_PREFIX) {
            check_model_name(name)?;
            return Ok(Self::OpenAi(name.to_string()));
        }
        Err(ConfigError::UnknownModel(s.chars().take(60).collect()))
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fake(k) => write!(f, "{FAKE_PREFIX}{}", k.name()),
            Self::OpenAi(n) => write!(f, "{OPENAI_PREFIX}{n}"),
        }
    }
}

impl ModelSpec {
    /// True when this choice needs a server (and so an [`Endpoint`]).
    pub fn needs_endpoint(&self) -> bool {
        matches!(self, Self::OpenAi(_))
    }

    /// The model name used for prices and traces (`fake-sensible`, or the server's name).
    pub fn price_key(&self) -> String {
        match self {
            Self::Fake(k) => format!("fake-{}", k.name()),
            Self::OpenAi(n) => n.clone(),
        }
    }

    /// The HTTP configuration of an `openai:` choice at `endpoint`; `None` for a fake.
    ///
    /// # Errors
    /// [`ConfigError::MissingBaseUrl`] for an `openai:` choice without an endpoint.
    pub fn http_config(&self, endpoint: Option<&Endpoint>) -> Result<Option<HttpConfig>, ConfigError> {
        match self {
            Self::Fake(_) => Ok(None),
            Self::OpenAi(name) => endpoint.ok_or(ConfigError::MissingBaseUrl)?.config(name).map(Some),
        }
    }

    /// A client for this choice: what any [`LlmClient`] consumer (a role actor, a design)
    /// asks for.
    ///
    /// # Errors
    /// As [`ModelSpec::http_config`].
    pub fn client(&self, endpoint: Option<&Endpoint>) -> Result<Box<dyn LlmClient>, ConfigError> {
        match (self, self.http_config(endpoint)?) {
            (_, Some(cfg)) => Ok(Box::new(HttpClient::new(cfg))),
            (Self::Fake(kind), None) => Ok(Box::new(FakeModel::new(*kind))),
            (Self::OpenAi(_), None) => Err(ConfigError::MissingBaseUrl),
        }
    }
}

/// One model per role of the three-role design. Each role defaults to the run's
/// `--model`; all roles share one [`Endpoint`] (and so one server and key).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleModelSpecs {
    /// The planner's model.
    pub planner: ModelSpec,
    /// The researcher's model.
    pub researcher: ModelSpec,
    /// The reviewer's model.
    pub reviewer: ModelSpec,
}

impl RoleModelSpecs {
    /// Every role on `model`.
    pub fn uniform(model: &ModelSpec) -> Self {
        Self { planner: model.clone(), researcher: model.clone(), reviewer: model.clone() }
    }

    /// `model` for every role, except where a role's own value is given.
    ///
    /// # Errors
    /// [`ConfigError::UnknownModel`] for a value that does not parse.
    pub fn with_overrides(
        model: &ModelSpec,
        planner: Option<&str>,
        researcher: Option<&str>,
        reviewer: Option<&str>,
    ) -> Result<Self, ConfigError> {
        let pick = |v: Option<&str>| v.map_or_else(|| Ok(model.clone()), str::parse);
        Ok(Self { planner: pick(planner)?, researcher: pick(researcher)?, reviewer: pick(reviewer)? })
    }

    /// The roles and their models, in pipeline order.
    pub fn all(&self) -> [(&'static str, &ModelSpec); 3] {
        [("planner", &self.planner), ("researcher", &self.researcher), ("reviewer", &self.reviewer)]
    }

    /// The client of `role` (`planner`, `researcher`, `reviewer`); `None` for another name.
    ///
    /// # Errors
    /// As [`ModelSpec::client`].
    pub fn client(&self, role: &str, endpoint: Option<&Endpoint>) -> Option<Result<Box<dyn LlmClient>, ConfigError>> {
        self.all().into_iter().find(|(r, _)| *r == role).map(|(_, m)| m.client(endpoint))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_values_parse_and_print_back() {
        assert_eq!("fake:sensible".parse::<ModelSpec>(), Ok(ModelSpec::default()));
        assert_eq!("fake:obey".parse::<ModelSpec>(), Ok(ModelSpec::Fake(FakeKind::Obey)));
        let m: ModelSpec = "openai:qwen2.5:7b-instruct".parse().unwrap();
        assert_eq!(m, ModelSpec::OpenAi("qwen2.5:7b-instruct".into()));
        assert_eq!(m.to_string(), "openai:qwen2.5:7b-instruct");
        assert_eq!(m.price_key(), "qwen2.5:7b-instruct");
        assert_eq!(ModelSpec::default().price_key(), "fake-sensible");
        for bad in ["sensible", "fake:clever", "openai:", "anthropic:claude", ""] {
            assert!(bad.parse::<ModelSpec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn clients_are_built_per_choice_and_http_needs_an_endpoint() {
        let fake = ModelSpec::Fake(FakeKind::Loop).client(None).unwrap();
        assert_eq!(fake.model(), "fake-loop");
        let http = ModelSpec::OpenAi("m".into());
        assert_eq!(http.client(None).err(), Some(ConfigError::MissingBaseUrl));
        let ep = Endpoint::new("http://127.0.0.1:9/v1").unwrap();
        assert_eq!(http.client(Some(&ep)).unwrap().model(), "m");
    }

    #[test]
    fn each_role_may_name_its_own_model() {
        let base = ModelSpec::OpenAi("big".into());
        let roles = RoleModelSpecs::with_overrides(&base, Some("fake:sensible"), None, Some("openai:small")).unwrap();
        let names: Vec<String> = roles.all().iter().map(|(r, m)| format!("{r}={m}")).collect();
        assert_eq!(names, ["planner=fake:sensible", "researcher=openai:big", "reviewer=openai:small"]);
        let ep = Endpoint::new("http://127.0.0.1:9/v1").unwrap();
        let models: Vec<String> = ["planner", "researcher", "reviewer"]
            .iter()
            .map(|r| roles.client(r, Some(&ep)).unwrap().unwrap().model().to_string())
            .collect();
        assert_eq!(models, ["fake-sensible", "big", "small"]);
        assert!(roles.client("boss", Some(&ep)).is_none());
        assert_eq!(RoleModelSpecs::uniform(&base).reviewer, base);
        assert!(RoleModelSpecs::with_overrides(&base, Some("gpt"), None, None).is_err());
    }
}
