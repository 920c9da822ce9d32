//! The policy: which tools each task may use, read or write access per tool, grants for
//! write tools, and per-run call limits. Loaded from `data/policy.json`.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

use super::GateError;
use crate::label::Confidentiality;
use crate::tools::mcp::is_mcp_name;

/// The bundled policy, `data/policy.json`.
pub(super) const BUNDLED_POLICY: &str = include_str!("../../data/policy.json");

/// Call limit for a tool the policy gives no limit.
pub(super) const DEFAULT_CALL_LIMIT: u32 = 10;

/// Whether a tool only reads or has an effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Reads only; runs without a person.
    Read,
    /// Changes only the application's own state (e.g. memory): runs without a person,
    /// through the caller's [`InternalEffects`](super::InternalEffects), and is audited.
    Internal,
    /// Has an effect; needs a grant and then a human approval.
    Write,
}

/// Whether granted writes wait for a person. A gate never skips approval for a write:
/// `Off` is a *policy* that labels the granted write tools `read` — the misconfiguration
/// the defense matrix uses to measure what approval is worth, and the one
/// `human::policy_problems` reports before any run (e.g. `send_email_draft: external but
/// access is read`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    /// Granted writes are parked as `pa-N` until a person decides.
    #[default]
    Required,
    /// Granted writes are labelled `read`, so they run at once with nobody deciding.
    Off,
}

/// Tasks, access, grants and limits.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Task name → the tools it may use.
    pub tasks: BTreeMap<String, BTreeSet<String>>,
    /// Tool → access. A tool missing here counts as `write` (fail closed).
    pub access: BTreeMap<String, Access>,
    /// Write tools granted for this deployment or session.
    #[serde(default)]
    pub grants: BTreeSet<String>,
    /// Tool → most calls per run.
    #[serde(default)]
    pub call_limits: BTreeMap<String, u32>,
    /// Tasks whose finish answer is free text: it must still cite successful observations
    /// of the run, but it is not read for instruction-like text or another user's data.
    /// Explicit, and meant for a role whose answer another check reads (the researcher's
    /// finding passes the coordinator's filter and claim support); every other task's
    /// answer is read.
    #[serde(default)]
    pub free_answers: BTreeSet<String>,
    /// MCP tool (`<server>__<tool>`) → the digest of the definition a person reviewed
    /// (`sha256:…`, as `rolegate mcp list` prints it). A named MCP tool without a pin, or
    /// whose server now lists another definition, is refused.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pins: BTreeMap<String, String>,
    /// Tool → whose data its results are. Unlisted: `public` for a built-in or added tool
    /// (whose labels come from the world), `user` for an MCP tool.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub confidentiality: BTreeMap<String, Confidentiality>,
}

impl Policy {
    /// Parses the JSON form.
    ///
    /// # Errors
    /// [`GateError::BadPolicy`] on bad JSON or unknown fields.
    pub fn from_json(text: &str) -> Result<Self, GateError> {
        serde_json::from_str(text).map_err(|e| GateError::BadPolicy(e.to_string()))
    }

    /// The bundled policy.
    ///
    /// # Errors
    /// Only if the bundled file were broken (a test guards it).
    pub fn bundled() -> Result<Self, GateError> {
        Self::from_json(BUNDLED_POLICY)
    }

    /// The tools `task` may use; empty for an unknown task.
    pub fn tools_for(&self, task: &str) -> impl Iterator<Item = &str> {
        self.tasks.get(task).into_iter().flatten().map(String::as_str)
    }

    /// True when `task` may use `tool`.
    pub fn allows(&self, task: &str, tool: &str) -> bool {
        self.tasks.get(task).is_some_and(|t| t.contains(tool))
    }

    /// The access of `tool`; unknown tools are writes.
    pub fn access_of(&self, tool: &str) -> Access {
        self.access.get(tool).copied().unwrap_or(Access::Write)
    }

    /// Whose data the results of `tool` are ([`Policy::confidentiality`]).
    pub fn confidentiality_of(&self, tool: &str) -> Confidentiality {
        match self.confidentiality.get(tool) {
            Some(c) => *c,
            None if is_mcp_name(tool) => Confidentiality::User,
            None => Confidentiality::Public,
        }
    }

    /// The MCP tools this policy's tasks name for `server` (a tool in no task is never called),
    /// each with its pin if it has one: what [`McpServer::connect`](crate::tools::mcp::McpServer::connect) holds the server to.
    pub fn mcp_tools_of(&self, server: &str) -> BTreeMap<String, Option<String>> {
        let prefix = format!("{server}{}", crate::tools::mcp::SEPARATOR);
        self.tasks
            .values()
            .flatten()
            .filter(|t| t.starts_with(&prefix) && t.len() > prefix.len())
            .map(|t| (t.clone(), self.pins.get(t).cloned()))
            .collect()
    }

    /// The servers whose tools this policy's tasks name.
    pub fn mcp_servers(&self) -> BTreeSet<String> {
        self.tasks
            .values()
            .flatten()
            .filter(|t| is_mcp_name(t))
            .filter_map(|t| t.split_once(crate::tools::mcp::SEPARATOR).map(|(s, _)| s.to_string()))
            .collect()
    }

    /// Starts server `name` of `servers` and holds it to this policy's tools of it and their
    /// pins ([`McpServer::connect`](crate::tools::mcp::McpServer::connect)).
    ///
    /// # Errors
    /// [`McpError::BadConfig`](crate::tools::mcp::McpError::BadConfig) when `servers` does not
    /// list it, or a refusal of `connect`.
    pub async fn start_mcp_server(
        &self,
        name: &str,
        servers: &crate::tools::mcp::McpServers,
    ) -> Result<crate::tools::mcp::McpServer, crate::tools::mcp::McpError> {
        let Some(spec) = servers.servers.get(name) else {
            return Err(crate::tools::mcp::McpError::BadConfig(format!(
                "the policy names tools of server {name:?}, which is not listed"
            )));
        };
        crate::tools::mcp::McpServer::connect(name, spec, &self.mcp_tools_of(name)).await
    }

    /// The per-run call limit of `tool`.
    pub fn limit_of(&self, tool: &str) -> u32 {
        self.call_limits.get(tool).copied().unwrap_or(DEFAULT_CALL_LIMIT)
    }

    /// This policy with `tool` granted.
    #[must_use]
    pub fn with_grant(mut self, tool: &str) -> Self {
        self.grants.insert(tool.to_string());
        self
    }

    /// This policy with `task` allowed every one of `tools` (an environment's,
    /// [`crate::tools::Environment::tool_names`]) and every one of them whose access is
    /// `write` granted (a tool missing from the access table counts as one): the "give the
    /// agent the whole toolbox" mistake, for measuring what narrow scopes are worth.
    /// Nothing builds it unless asked to (`"scopes": "wide"`).
    #[must_use]
    pub fn widened(mut self, task: &str, tools: &[&str]) -> Self {
        let all = tools.iter().map(|t| (*t).to_string());
        self.tasks.entry(task.to_string()).or_default().extend(all);
        let writes: Vec<String> =
            tools.iter().filter(|t| self.access_of(t) == Access::Write).map(|t| (*t).to_string()).collect();
        self.grants.extend(writes);
        self
    }

    /// This policy under `mode`: with [`ApprovalMode::Off`] every granted write tool is
    /// relabelled `read` (ungranted writes stay writes and stay refused).
    #[must_use]
    pub fn with_approval(mut self, mode: ApprovalMode) -> Self {
        if mode == ApprovalMode::Off {
            for tool in &self.grants {
                if self.access_of(tool) == Access::Write {
                    self.access.insert(tool.clone(), Access::Read);
                }
            }
        }
        self
    }

    /// [`Policy::with_approval`] for a shared policy: the same one when approval is
    /// required, a relabelled copy when it is off.
    #[must_use]
    pub fn with_approval_shared(self: std::sync::Arc<Self>, mode: ApprovalMode) -> std::sync::Arc<Self> {
        match mode {
            ApprovalMode::Required => self,
            ApprovalMode::Off => std::sync::Arc::new(std::sync::Arc::unwrap_or_clone(self).with_approval(mode)),
        }
    }

    /// This policy with a different call limit for `tool`.
    #[must_use]
    pub fn with_limit(mut self, tool: &str, limit: u32) -> Self {
        self.call_limits.insert(tool.to_string(), limit);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::CallContext;
    use crate::gate::ToolGate;
    use crate::tools::ToolCall;
    use crate::world::{World, WorldData};
    use serde_json::json;
    use std::sync::Arc;

    fn mail() -> ToolCall {
        ToolCall::new(
            "c1",
            "send_email_draft",
            json!({"to": "x@example.org", "subject": "s", "body": "b", "idempotency_key": "k"}),
        )
    }

    #[test]
    fn approval_off_relabels_only_granted_writes_and_the_policy_check_reports_it() {
        let world = || World::new(Arc::new(WorldData::bundled().unwrap()));
        let off = Policy::bundled().unwrap().with_approval(ApprovalMode::Off);
        assert_eq!(off.access_of("send_email_draft"), Access::Write, "not granted: still a write");
        assert_eq!(
            ToolGate::new(off, world()).run(&mail(), CallContext::new("reply", "r1", "kwame")).code(),
            "not_granted"
        );
        let granted = Policy::bundled().unwrap().with_grant("send_email_draft");
        assert_eq!(granted.clone().with_approval(ApprovalMode::Required), granted);
        let off = granted.with_approval(ApprovalMode::Off);
        assert_eq!(crate::human::policy_problems(&off), ["send_email_draft: external but access is read"]);
        let mut g = ToolGate::new(off, world());
        assert_eq!(g.run(&mail(), CallContext::new("triage", "r1", "kwame")).code(), "not_allowed");
        assert_eq!(g.run(&mail(), CallContext::new("reply", "r1", "kwame")).code(), "ok");
        assert!(g.pending().is_empty());
        assert_eq!(g.world().unwrap().outbox.len(), 1);
    }

    #[test]
    fn a_shared_policy_is_copied_only_when_approval_is_off() {
        let shared = Arc::new(Policy::bundled().unwrap().with_grant("send_email_draft"));
        let same = shared.clone().with_approval_shared(ApprovalMode::Required);
        assert!(Arc::ptr_eq(&shared, &same));
        let off = shared.clone().with_approval_shared(ApprovalMode::Off);
        assert!(!Arc::ptr_eq(&shared, &off));
        assert_eq!(
            (shared.access_of("send_email_draft"), off.access_of("send_email_draft")),
            (Access::Write, Access::Read)
        );
    }
}
