//! Who may say what to whom, and which tools each role holds.
//!
//! The route table is code: three routes, one kind each, and no route that starts a new
//! role or delegates. The declared call graph ([`super::graph`]) narrows it per deployment:
//! which of these hand-offs exist, which fields cross them and how often. The scopes are data: the policy's tasks named after the roles
//! (`planner`, `researcher`, `reviewer` in `data/policy.json`), each enforced by that
//! role's own gate. A scope may hold only read tools; a policy that gives a role a write
//! tool (such as `send_email_draft`) is refused before any run.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::MultiError;
use super::envelope::{Kind, Role};
use crate::gate::{Access, Policy};

/// The route table: sender, recipient and the one kind that may travel between them.
pub const ROUTES: [(Role, Role, Kind); 3] = [
    (Role::Planner, Role::Researcher, Kind::Brief),
    (Role::Researcher, Role::Reviewer, Kind::Finding),
    (Role::Reviewer, Role::Coordinator, Kind::Verdict),
];

/// The kind that may travel from `sender` to `recipient`, if any.
pub(crate) fn route_kind(sender: Role, recipient: Role) -> Option<Kind> {
    ROUTES.iter().find(|(s, r, _)| *s == sender && *r == recipient).map(|(_, _, k)| *k)
}

/// Where a message from `sender` goes, and the kind it must be.
pub fn next_hop(sender: Role) -> Option<(Role, Kind)> {
    ROUTES.iter().find(|(s, _, _)| *s == sender).map(|(_, r, k)| (*r, *k))
}

/// The gate policy of each model role, derived once from a deployment policy and shared
/// read-only by every run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scopes {
    /// Planner, researcher, reviewer, in that order.
    policies: [Arc<Policy>; 3],
}

fn index(role: Role) -> Option<usize> {
    Role::MODEL_ROLES.iter().position(|r| *r == role)
}

impl Scopes {
    /// Builds each role's policy: the task named after the role, the access and call limit
    /// of each tool in it, and no grants.
    ///
    /// # Errors
    /// [`MultiError::NoScope`] when the policy has no task for a role;
    /// [`MultiError::WriteInScope`] when a role's task holds a tool whose access is not
    /// `read` (a tool missing from the access table counts as a write).
    pub fn from_policy(policy: &Policy) -> Result<Self, MultiError> {
        let one = |role: Role| -> Result<Policy, MultiError> {
            let tools = policy.tasks.get(role.as_str()).ok_or(MultiError::NoScope(role))?;
            if let Some(tool) = tools.iter().find(|t| policy.access_of(t) != Access::Read) {
                return Err(MultiError::WriteInScope { role, tool: tool.clone() });
            }
            // only the scope's own entries: a tool outside the scope is refused by the
            // allowlist before access or limits are read, so nothing else is needed
            let mut tasks = BTreeMap::new();
            tasks.insert(role.as_str().to_string(), tools.clone());
            let access = tools.iter().map(|t| (t.clone(), policy.access_of(t))).collect();
            let call_limits = tools.iter().map(|t| (t.clone(), policy.limit_of(t))).collect();
            let free_answers = policy.free_answers.iter().filter(|t| *t == role.as_str()).cloned().collect();
            // an MCP tool keeps its pin and its confidentiality
            let pins = tools.iter().filter_map(|t| Some((t.clone(), policy.pins.get(t)?.clone()))).collect();
            let confidentiality =
                tools.iter().filter_map(|t| Some((t.clone(), *policy.confidentiality.get(t)?))).collect();
            Ok(Policy { tasks, access, grants: BTreeSet::new(), call_limits, free_answers, pins, confidentiality })
        };
        Ok(Self { policies: [one(Role::Planner)?, one(Role::Researcher)?, one(Role::Reviewer)?].map(Arc::new) })
    }

    /// These scopes widened on purpose: each role may also use every one of `tools` (the
    /// environment's), and every write among them is granted (a tool its scope did not list
    /// has no access entry, so it counts as a write). What `"scopes": "wide"` measures; a
    /// run gets it only when asked, and with approval required each such write still parks.
    #[must_use]
    pub fn widened(&self, tools: &[&str]) -> Self {
        let mut policies = self.policies.clone();
        for (p, role) in policies.iter_mut().zip(Role::MODEL_ROLES) {
            *p = Arc::new(Arc::unwrap_or_clone(std::mem::take(p)).widened(role.as_str(), tools));
        }
        Self { policies }
    }

    /// The policy of `role`'s gate (shared by every run's gate of that role); `None` for
    /// the coordinator, which holds no tools.
    pub fn policy(&self, role: Role) -> Option<&Arc<Policy>> {
        index(role).map(|i| &self.policies[i])
    }

    /// The tools `role` may use, sorted.
    pub fn tools(&self, role: Role) -> Vec<&str> {
        self.policy(role).map(|p| p.tools_for(role.as_str()).collect()).unwrap_or_default()
    }

    /// True when some role's scope holds `tool`.
    pub fn any_holds(&self, tool: &str) -> bool {
        Role::MODEL_ROLES.iter().any(|r| self.policy(*r).is_some_and(|p| p.allows(r.as_str(), tool)))
    }

    /// Each role's tools by role name: the form the go/no-go check
    /// ([`ChecklistInput::role_scopes`](crate::eval::checklist::ChecklistInput::role_scopes))
    /// reads, taken from the scopes the coordinator enforces.
    pub fn by_name(&self) -> BTreeMap<String, BTreeSet<String>> {
        Role::MODEL_ROLES
            .iter()
            .map(|r| (r.as_str().to_string(), self.tools(*r).into_iter().map(str::to_string).collect()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_routes_and_read_only_scopes() {
        assert_eq!(route_kind(Role::Planner, Role::Researcher), Some(Kind::Brief));
        assert_eq!(route_kind(Role::Researcher, Role::Planner), None);
        assert_eq!(next_hop(Role::Reviewer), Some((Role::Coordinator, Kind::Verdict)));
        assert_eq!(next_hop(Role::Coordinator), None);
        let scopes = Scopes::from_policy(&Policy::bundled().unwrap()).unwrap();
        assert!(scopes.tools(Role::Planner).is_empty());
        assert_eq!(scopes.tools(Role::Researcher), ["get_ticket", "lookup_document"]);
        assert_eq!(scopes.tools(Role::Reviewer), ["lookup_document"]);
        assert!(scopes.policy(Role::Coordinator).is_none());
        assert!(scopes.any_holds("lookup_document") && !scopes.any_holds("send_email_draft"));
        assert!(!scopes.any_holds("search_documents"), "no role searches");
        let names: Vec<(String, usize)> = scopes.by_name().into_iter().map(|(r, t)| (r, t.len())).collect();
        assert_eq!(names, [("planner".to_string(), 0), ("researcher".to_string(), 2), ("reviewer".to_string(), 1)]);
        let wide = scopes.widened(&crate::tools::TOOL_NAMES);
        assert!(wide.tools(Role::Planner).contains(&"send_email_draft"));
        assert!(wide.policy(Role::Reviewer).unwrap().grants.contains("send_email_draft"));
        assert!(!wide.policy(Role::Reviewer).unwrap().grants.contains("lookup_document"));
        let mut p = Policy::bundled().unwrap();
        p.tasks.get_mut("reviewer").unwrap().insert("send_email_draft".into());
        assert!(matches!(Scopes::from_policy(&p), Err(MultiError::WriteInScope { role: Role::Reviewer, .. })));
        p.tasks.remove("planner");
        assert!(matches!(Scopes::from_policy(&p), Err(MultiError::NoScope(Role::Planner))));
    }
}
