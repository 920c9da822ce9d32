//! The fixed workflow: routing rules written by a person, no model. A rule that matches
//! the goal adds one call; the calls run in rule order through the ordinary loop and gate
//! with [`FixedPlan`](crate::agent::FixedPlan) as decider. A goal no rule matches ends as
//! `no_route` before anything runs. Free and exactly testable, and blind to anything the
//! rules did not foresee.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::goal::tickets;

/// When a rule fires.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Trigger {
    /// The goal names a ticket id; `{ticket}` in the arguments becomes the first one.
    TicketId,
    /// The goal holds one of these words (case-insensitive, whole words).
    AnyWord(Vec<String>),
}

/// One routing rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Route {
    /// A name for traces and tables.
    pub name: String,
    /// When it fires.
    pub when: Trigger,
    /// The tool it calls.
    pub tool: String,
    /// The arguments (string values may hold `{ticket}`).
    pub arguments: Value,
}

/// The two rules of the comparison: a ticket id reads the ticket; a refund or return
/// question reads the returns policy.
pub(crate) fn default_routes() -> Vec<Route> {
    vec![
        Route {
            name: "ticket".into(),
            when: Trigger::TicketId,
            tool: "get_ticket".into(),
            arguments: json!({"ticket_id": "{ticket}"}),
        },
        Route {
            name: "returns".into(),
            when: Trigger::AnyWord(vec!["refund".into(), "refunds".into(), "return".into(), "returns".into()]),
            tool: "lookup_document".into(),
            arguments: json!({"doc_id": "kc-returns-v3"}),
        },
    ]
}

fn fill(value: &Value, ticket: &str) -> Value {
    match value {
        Value::String(s) => Value::String(s.replace("{ticket}", ticket)),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), fill(v, ticket))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(|v| fill(v, ticket)).collect()),
        other => other.clone(),
    }
}

/// The calls the rules route `goal` to, in rule order; empty when no rule matches.
pub(crate) fn route(goal: &str, routes: &[Route]) -> Vec<(String, Value)> {
    let lower: Vec<String> =
        goal.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
    let ticket = tickets(goal).into_iter().next();
    routes
        .iter()
        .filter_map(|r| match &r.when {
            Trigger::TicketId => ticket.as_deref().map(|t| (r.tool.clone(), fill(&r.arguments, t))),
            Trigger::AnyWord(ws) => {
                ws.iter().any(|w| lower.contains(&w.to_lowercase())).then(|| (r.tool.clone(), r.arguments.clone()))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_rules_route_tickets_and_returns_and_nothing_else() {
        let r = default_routes();
        assert_eq!(route("Status of T-601?", &r), [("get_ticket".to_string(), json!({"ticket_id": "T-601"}))]);
        assert_eq!(route("Status of T-601 and our refund policy?", &r).len(), 2);
        assert!(route("What does the warranty policy say?", &r).is_empty());
        assert_eq!(route("Is the battery policy relevant to T-601?", &r).len(), 1);
    }
}
