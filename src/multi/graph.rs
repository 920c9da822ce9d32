//! The declared call graph: which hand-offs a run may make, and under which rules.
//!
//! The coordinator's pipeline (planner → researcher → reviewer → coordinator) is code, and
//! [`ROUTES`](super::ROUTES) names the one kind each hand-off carries. The call graph is
//! data on top of it (`data/call_graph.json` is the bundled default, `--call-graph FILE`
//! replaces it): a list of edges, each naming its sender and recipient, the kinds and
//! body fields that may cross it, how many messages may cross it per run and which labels
//! may cross. A hand-off with no edge is refused `edge_not_declared`, one over the edge's
//! limit `edge_limit`, a body with a field the edge does not let cross
//! `field_not_allowed`, an envelope whose label the edge's rule does not let cross
//! `edge_label` ([`LabelRule`]); the coordinator's trace names the edge
//! (`researcher->reviewer finding`).
//!
//! The label rules read the label the coordinator stamps on the envelope (the join of what
//! its sender's model had in view, endorsed by the claim builder under strict claims, see
//! [`super::labels`]), after the body checks. They are the edge's own rules: declared in
//! the graph, they hold whether the information-flow switch (`ifc`) is on or off.
//!
//! A graph is read strictly (unknown members refused) and checked whole before any run:
//! every role, kind and field must exist, no edge may appear twice, start at the
//! coordinator (it routes, it sends nothing) or end where it started, and every kind must
//! be one the coordinator carries on that edge (see [`CallGraphError`]). It is compiled
//! once into [`EdgeTable`], a small `Copy` table indexed by sender and recipient: the
//! per-message check is an array index and two bit tests, with no lookup by name and no
//! allocation.

use crate::codes::codes;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, LazyLock};

use super::envelope::{Body, Kind, Role};
use super::routes::route_kind;
use crate::label::{Confidentiality, Label};

/// The bundled call graph, `data/call_graph.json`: exactly the three hand-offs of the
/// pipeline, every field, no limit.
pub(crate) const BUNDLED_CALL_GRAPH: &str = include_str!("../../data/call_graph.json");

/// Most bytes of a call-graph file.
pub const MAX_CALL_GRAPH_BYTES: usize = 64 * 1024;

codes! {
    /// A field of a message body, as an edge names it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    pub enum Field {
        /// The brief's question.
        Question = "question",
        /// The finding's claim.
        Claim = "claim",
        /// The finding's sources.
        Sources = "sources",
        /// The verdict's decision.
        Approve = "approve",
        /// The verdict's notes.
        Notes = "notes",
    }
}

impl Field {
    /// The fields of `kind`'s body, in wire order.
    pub fn of(kind: Kind) -> &'static [Field] {
        match kind {
            Kind::Brief => &[Field::Question],
            Kind::Finding => &[Field::Claim, Field::Sources],
            Kind::Verdict => &[Field::Approve, Field::Notes],
        }
    }

    const fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// The fields `body` carries: every field with a value (a verdict's empty notes carry
/// nothing), as a bit set over [`Field`].
fn carried_fields(body: &Body) -> u8 {
    match body {
        Body::Brief(_) => Field::Question.bit(),
        Body::Finding(_) => Field::Claim.bit() | Field::Sources.bit(),
        Body::Verdict(v) => Field::Approve.bit() | if v.notes.is_empty() { 0 } else { Field::Notes.bit() },
    }
}

codes! {
    /// Which envelope labels may cross an edge (`labels` in a graph file; an unknown value
    /// is refused when the graph is read). Checked by [`EdgeTable::check_label`] on the
    /// label the coordinator stamped.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum LabelRule {
        /// Every label may cross (the edge checks none).
        #[default]
        Any = "any",
        /// Only a trusted envelope: one whose sender read nothing untrusted, or a finding
        /// the claim builder endorsed (strict claims, typed facts only).
        TrustedOnly = "trusted_only",
        /// No envelope carrying another user's data (confidentiality `other`).
        NoOtherUsers = "no_other_users",
    }
}

impl LabelRule {
    /// True when an envelope labelled `label` may cross an edge with this rule.
    pub fn admits(self, label: Label) -> bool {
        match self {
            Self::Any => true,
            Self::TrustedOnly => label.is_trusted(),
            Self::NoOtherUsers => label.confidentiality != Confidentiality::Other,
        }
    }
}

/// One edge as a file declares it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeSpec {
    /// The sender: `planner`, `researcher` or `reviewer`.
    pub from: String,
    /// The recipient: a role or `coordinator`.
    pub to: String,
    /// The kinds that may cross (at least one).
    pub kinds: Vec<String>,
    /// The body fields that may cross: a message carrying any other field is refused.
    pub fields: Vec<String>,
    /// Most messages accepted on this edge per run (absent: no limit of its own; the run's
    /// budget still bounds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_per_run: Option<u32>,
    /// Which labels may cross (default `any`).
    #[serde(default)]
    pub labels: LabelRule,
}

/// A call-graph file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GraphFile {
    edges: Vec<EdgeSpec>,
}

/// Why a call graph was refused. Edges are counted from 1, in file order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallGraphError {
    /// Not JSON, or not the shape of a call graph (an unknown member included).
    #[error("not a call graph: {0}")]
    Json(String),
    /// Longer than [`MAX_CALL_GRAPH_BYTES`].
    #[error("longer than {MAX_CALL_GRAPH_BYTES} bytes")]
    TooLong,
    /// No edge at all: no run could hand anything on.
    #[error("no edges: a graph must declare at least one")]
    Empty,
    /// A role that does not exist.
    #[error("edge {edge}: unknown role {name:?} (known: planner, researcher, reviewer, coordinator)")]
    UnknownRole {
        /// The edge.
        edge: usize,
        /// The name given.
        name: String,
    },
    /// A kind that does not exist.
    #[error("edge {edge}: unknown kind {name:?} (known: brief, finding, verdict)")]
    UnknownKind {
        /// The edge.
        edge: usize,
        /// The name given.
        name: String,
    },
    /// A field that no kind of the edge has.
    #[error("edge {edge}: {name:?} is not a field of its kinds ({known})")]
    UnknownField {
        /// The edge.
        edge: usize,
        /// The name given.
        name: String,
        /// The fields its kinds have.
        known: String,
    },
    /// The same kind or field twice in one edge.
    #[error("edge {edge}: {name:?} is listed twice")]
    Repeated {
        /// The edge.
        edge: usize,
        /// The name.
        name: String,
    },
    /// An edge with no kind: nothing could cross it.
    #[error("edge {edge}: no kinds (leave the edge out to declare that nothing crosses)")]
    NoKinds {
        /// The edge.
        edge: usize,
    },
    /// A limit of zero: the same as no edge, said twice.
    #[error("edge {edge}: max_per_run 0 (leave the edge out to declare that nothing crosses)")]
    ZeroLimit {
        /// The edge.
        edge: usize,
    },
    /// The same sender and recipient twice.
    #[error("edge {edge}: {from}->{to} is declared twice")]
    DuplicateEdge {
        /// The later edge.
        edge: usize,
        /// Sender.
        from: Role,
        /// Recipient.
        to: Role,
    },
    /// An edge from a role to itself.
    #[error("edge {edge}: {role}->{role} ends where it starts")]
    SelfLoop {
        /// The edge.
        edge: usize,
        /// The role.
        role: Role,
    },
    /// An edge that starts at the coordinator, which routes messages and sends none.
    #[error("edge {edge}: coordinator->{to}: the coordinator routes messages, it sends none")]
    FromCoordinator {
        /// The edge.
        edge: usize,
        /// The recipient.
        to: Role,
    },
    /// A kind the coordinator does not carry on this edge (for instance a brief to the
    /// coordinator, which reads only verdicts).
    #[error(
        "edge {edge}: the coordinator carries no {kind} from {from} to {to} (its hand-offs: planner->researcher brief, researcher->reviewer finding, reviewer->coordinator verdict)"
    )]
    NotCarried {
        /// The edge.
        edge: usize,
        /// Sender.
        from: Role,
        /// Recipient.
        to: Role,
        /// The kind.
        kind: Kind,
    },
}

/// One compiled edge: kinds and fields as bit sets, the limit, the label rule and the
/// edge's counter slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rule {
    kinds: u8,
    fields: u8,
    max_per_run: u32,
    labels: LabelRule,
    slot: u8,
}

/// Most edges a graph can hold: three senders times four recipients, less the self-loops.
const MAX_EDGES: usize = 9;

/// The call graph compiled for the coordinator: a rule per (sender, recipient), indexed
/// directly. `Copy`, a few dozen bytes; every run's intake holds its own copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EdgeTable {
    rules: [[Option<Rule>; 4]; 3],
}

/// Messages accepted per edge in one run (the intake's counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct EdgeCounts([u32; MAX_EDGES]);

/// A hand-off the graph refused, naming the edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EdgeRefusal {
    /// No edge from the sender to the recipient for this kind.
    NotDeclared,
    /// The edge's `max_per_run` messages were accepted already.
    Limit(u32),
    /// The body carries a field the edge does not let cross.
    Field(Field),
    /// The envelope's label is one the edge's rule does not let cross.
    Label(Label),
}

const fn sender_index(role: Role) -> Option<usize> {
    match role {
        Role::Planner => Some(0),
        Role::Researcher => Some(1),
        Role::Reviewer => Some(2),
        Role::Coordinator => None,
    }
}

const fn recipient_index(role: Role) -> usize {
    match role {
        Role::Planner => 0,
        Role::Researcher => 1,
        Role::Reviewer => 2,
        Role::Coordinator => 3,
    }
}

impl EdgeTable {
    /// The route table's own edges: each of [`ROUTES`](super::ROUTES) with every field of
    /// its kind and no limit. The bundled graph compiles to exactly this table (a test
    /// holds it), so a run without a graph of its own behaves as before graphs existed.
    pub fn of_routes() -> Self {
        let mut rules = [[None; 4]; 3];
        for (slot, (from, to, kind)) in super::routes::ROUTES.into_iter().enumerate() {
            if let Some(i) = sender_index(from) {
                let fields = Field::of(kind).iter().fold(0, |b, f| b | f.bit());
                rules[i][recipient_index(to)] = Some(Rule {
                    kinds: 1 << (kind as u8),
                    fields,
                    max_per_run: u32::MAX,
                    labels: LabelRule::Any,
                    slot: u8::try_from(slot).unwrap_or(u8::MAX),
                });
            }
        }
        Self { rules }
    }

    fn rule(&self, from: Role, to: Role) -> Option<Rule> {
        sender_index(from).and_then(|i| self.rules[i][recipient_index(to)])
    }

    /// The edge checks that need no body: is a `kind` from `from` to `to` declared, and is
    /// there room left on it this run?
    pub(crate) fn check_route(&self, from: Role, to: Role, kind: Kind, counts: &EdgeCounts) -> Result<(), EdgeRefusal> {
        let rule = self.rule(from, to).ok_or(EdgeRefusal::NotDeclared)?;
        if rule.kinds & (1 << (kind as u8)) == 0 {
            return Err(EdgeRefusal::NotDeclared);
        }
        if counts.0[usize::from(rule.slot)] >= rule.max_per_run {
            return Err(EdgeRefusal::Limit(rule.max_per_run));
        }
        Ok(())
    }

    /// The edge checks of a parsed body: every field it carries must be allowed to cross.
    pub(crate) fn check_body(&self, from: Role, to: Role, body: &Body) -> Result<(), EdgeRefusal> {
        let rule = self.rule(from, to).ok_or(EdgeRefusal::NotDeclared)?;
        let extra = carried_fields(body) & !rule.fields;
        if let Some(f) = Field::ALL.iter().find(|f| extra & f.bit() != 0) {
            return Err(EdgeRefusal::Field(*f));
        }
        Ok(())
    }

    /// The edge's label rule on the label the coordinator stamped on an envelope from
    /// `from` to `to` (after the body checks: the label depends on the parsed body).
    pub(crate) fn check_label(&self, from: Role, to: Role, label: Label) -> Result<(), EdgeRefusal> {
        let rule = self.rule(from, to).ok_or(EdgeRefusal::NotDeclared)?;
        if rule.labels.admits(label) { Ok(()) } else { Err(EdgeRefusal::Label(label)) }
    }

    /// Counts one accepted message on the edge from `from` to `to`.
    pub(crate) fn count(&self, from: Role, to: Role, counts: &mut EdgeCounts) {
        if let Some(rule) = self.rule(from, to) {
            let n = &mut counts.0[usize::from(rule.slot)];
            *n = n.saturating_add(1);
        }
    }
}

/// A checked call graph: the edges as declared (for display and hashing) and their
/// compiled table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallGraph {
    edges: Vec<EdgeSpec>,
    table: EdgeTable,
}

static BUNDLED: LazyLock<Result<Arc<CallGraph>, CallGraphError>> =
    LazyLock::new(|| CallGraph::from_json(BUNDLED_CALL_GRAPH).map(Arc::new));

fn bits<T: Copy>(
    edge: usize,
    names: &[String],
    parse: impl Fn(&str) -> Option<T>,
    bit: impl Fn(T) -> u8,
    unknown: impl Fn(String) -> CallGraphError,
) -> Result<(u8, Vec<T>), CallGraphError> {
    let (mut set, mut list) = (0u8, Vec::new());
    for name in names {
        let v = parse(name).ok_or_else(|| unknown(name.clone()))?;
        if set & bit(v) != 0 {
            return Err(CallGraphError::Repeated { edge, name: name.clone() });
        }
        set |= bit(v);
        list.push(v);
    }
    Ok((set, list))
}

impl CallGraph {
    /// The bundled graph (`data/call_graph.json`): today's three hand-offs.
    ///
    /// # Errors
    /// Only if the bundled file were broken (a test guards it).
    pub fn bundled() -> Result<Arc<Self>, CallGraphError> {
        BUNDLED.clone()
    }

    /// Reads and checks a call-graph file.
    ///
    /// # Errors
    /// The first [`CallGraphError`] that applies, naming the edge.
    pub fn from_json(text: &str) -> Result<Self, CallGraphError> {
        if text.len() > MAX_CALL_GRAPH_BYTES {
            return Err(CallGraphError::TooLong);
        }
        let file: GraphFile = serde_json::from_str(text).map_err(|e| CallGraphError::Json(e.to_string()))?;
        Self::from_edges(file.edges)
    }

    /// Checks `edges` and compiles them.
    ///
    /// # Errors
    /// As [`CallGraph::from_json`].
    pub fn from_edges(edges: Vec<EdgeSpec>) -> Result<Self, CallGraphError> {
        if edges.is_empty() {
            return Err(CallGraphError::Empty);
        }
        let mut rules = [[None; 4]; 3];
        for (i, e) in edges.iter().enumerate() {
            let edge = i + 1;
            let role = |name: &str| {
                name.parse::<Role>().map_err(|_| CallGraphError::UnknownRole { edge, name: name.to_string() })
            };
            let (from, to) = (role(&e.from)?, role(&e.to)?);
            if from == to {
                return Err(CallGraphError::SelfLoop { edge, role: from });
            }
            let Some(fi) = sender_index(from) else { return Err(CallGraphError::FromCoordinator { edge, to }) };
            let (kind_bits, kinds) = bits(
                edge,
                &e.kinds,
                Kind::from_code,
                |k| 1 << (k as u8),
                |name| CallGraphError::UnknownKind { edge, name },
            )?;
            if kinds.is_empty() {
                return Err(CallGraphError::NoKinds { edge });
            }
            if let Some(kind) = kinds.iter().find(|k| route_kind(from, to) != Some(**k)) {
                return Err(CallGraphError::NotCarried { edge, from, to, kind: *kind });
            }
            let own: Vec<Field> = kinds.iter().flat_map(|k| Field::of(*k).iter().copied()).collect();
            let known = own.iter().map(|f| f.as_str()).collect::<Vec<_>>().join(", ");
            let (field_bits, _) = bits(
                edge,
                &e.fields,
                |n| Field::from_code(n).filter(|f| own.contains(f)),
                Field::bit,
                |name| CallGraphError::UnknownField { edge, name, known: known.clone() },
            )?;
            if e.max_per_run == Some(0) {
                return Err(CallGraphError::ZeroLimit { edge });
            }
            let cell = &mut rules[fi][recipient_index(to)];
            if cell.is_some() {
                return Err(CallGraphError::DuplicateEdge { edge, from, to });
            }
            *cell = Some(Rule {
                kinds: kind_bits,
                fields: field_bits,
                max_per_run: e.max_per_run.unwrap_or(u32::MAX),
                labels: e.labels,
                // at most one edge per (sender, recipient) and no self-loop: at most 9
                slot: u8::try_from(i).unwrap_or(u8::MAX),
            });
        }
        if edges.len() > MAX_EDGES {
            // unreachable after the duplicate check; kept so a slot always has its counter
            return Err(CallGraphError::Json(format!("more than {MAX_EDGES} edges")));
        }
        Ok(Self { edges, table: EdgeTable { rules } })
    }

    /// The compiled table the coordinator checks every hand-off against.
    pub fn table(&self) -> EdgeTable {
        self.table
    }

    /// The edges as declared, in file order.
    pub fn edges(&self) -> &[EdgeSpec] {
        &self.edges
    }

    /// The graph as JSON (the file form; what a results header hashes).
    pub fn to_json(&self) -> String {
        serde_json::to_string(&GraphFile { edges: self.edges.clone() }).unwrap_or_default()
    }
}

/// The graph installed for this process (`--call-graph FILE`), used by every
/// [`MultiEnv::new`](super::MultiEnv::new) after it; without one, the bundled graph.
static INSTALLED: std::sync::OnceLock<Arc<CallGraph>> = std::sync::OnceLock::new();

/// Installs `graph` as the process's call graph, once, before any run (what
/// `--call-graph FILE` does). A second install of the same graph is a no-op.
///
/// # Errors
/// A message when another graph was installed already.
pub fn install_call_graph(graph: CallGraph) -> Result<(), String> {
    let installed = INSTALLED.get_or_init(|| Arc::new(graph.clone()));
    if **installed == graph { Ok(()) } else { Err("a call graph is installed once per process".into()) }
}

/// The call graph given at run time, if one was installed.
pub fn installed_call_graph() -> Option<Arc<CallGraph>> {
    INSTALLED.get().cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multi::envelope::{Finding, Verdict};

    fn graph(edges: &str) -> Result<CallGraph, CallGraphError> {
        CallGraph::from_json(&format!(r#"{{"edges": [{edges}]}}"#))
    }

    const P_R: &str = r#"{"from": "planner", "to": "researcher", "kinds": ["brief"], "fields": ["question"]}"#;

    #[test]
    fn the_bundled_graph_is_the_route_table_with_every_field_and_no_limit() {
        let g = CallGraph::bundled().unwrap();
        let t = g.table();
        let counts = EdgeCounts([u32::MAX - 1; MAX_EDGES]);
        for (from, to, kind) in crate::multi::ROUTES {
            assert_eq!(t.check_route(from, to, kind, &counts), Ok(()), "{from}->{to}");
        }
        assert_eq!(g.edges().len(), 3);
        assert_eq!(t, EdgeTable::of_routes(), "the bundled graph is today's route table");
        let c = EdgeCounts::default();
        assert_eq!(t.check_route(Role::Reviewer, Role::Researcher, Kind::Verdict, &c), Err(EdgeRefusal::NotDeclared));
        let f = Body::Finding(Finding { claim: "c".into(), sources: vec!["T-601".into()] });
        assert_eq!(t.check_body(Role::Researcher, Role::Reviewer, &f), Ok(()));
    }

    #[test]
    fn limits_fields_and_counts_are_per_edge() {
        let g = graph(
            r#"{"from": "researcher", "to": "reviewer", "kinds": ["finding"], "fields": ["claim", "sources"], "max_per_run": 1},
               {"from": "reviewer", "to": "coordinator", "kinds": ["verdict"], "fields": ["approve"]}"#,
        )
        .unwrap();
        let t = g.table();
        let mut c = EdgeCounts::default();
        assert_eq!(t.check_route(Role::Researcher, Role::Reviewer, Kind::Finding, &c), Ok(()));
        t.count(Role::Researcher, Role::Reviewer, &mut c);
        assert_eq!(t.check_route(Role::Researcher, Role::Reviewer, Kind::Finding, &c), Err(EdgeRefusal::Limit(1)));
        t.count(Role::Reviewer, Role::Coordinator, &mut c);
        assert_eq!(t.check_route(Role::Reviewer, Role::Coordinator, Kind::Verdict, &c), Ok(()), "own counter");
        let quiet = Body::Verdict(Verdict { approve: true, notes: String::new() });
        let noted = Body::Verdict(Verdict { approve: true, notes: "fine".into() });
        assert_eq!(t.check_body(Role::Reviewer, Role::Coordinator, &quiet), Ok(()));
        assert_eq!(t.check_body(Role::Reviewer, Role::Coordinator, &noted), Err(EdgeRefusal::Field(Field::Notes)));
    }

    #[test]
    fn a_label_rule_admits_only_its_labels_and_an_unknown_one_is_refused() {
        use crate::label::Integrity;
        let g = graph(
            r#"{"from": "researcher", "to": "reviewer", "kinds": ["finding"], "fields": ["claim", "sources"], "labels": "trusted_only"},
               {"from": "reviewer", "to": "coordinator", "kinds": ["verdict"], "fields": ["approve", "notes"], "labels": "no_other_users"},
               {"from": "planner", "to": "researcher", "kinds": ["brief"], "fields": ["question"], "labels": "any"}"#,
        )
        .unwrap();
        let t = g.table();
        let trusted_user = Label::new(Integrity::Trusted, Confidentiality::User);
        let untrusted_other = Label::new(Integrity::Untrusted, Confidentiality::Other);
        let untrusted_user = Label::new(Integrity::Untrusted, Confidentiality::User);
        let (res, rev, co) = (Role::Researcher, Role::Reviewer, Role::Coordinator);
        assert_eq!(t.check_label(res, rev, trusted_user), Ok(()));
        assert_eq!(t.check_label(res, rev, untrusted_user), Err(EdgeRefusal::Label(untrusted_user)));
        assert_eq!(t.check_label(rev, co, untrusted_user), Ok(()), "no_other_users lets untrusted data cross");
        assert_eq!(t.check_label(rev, co, untrusted_other), Err(EdgeRefusal::Label(untrusted_other)));
        assert_eq!(t.check_label(Role::Planner, res, untrusted_other), Ok(()), "any");
        assert_eq!(t.check_label(rev, res, trusted_user), Err(EdgeRefusal::NotDeclared));
        // the body checks do not look at labels
        let f = Body::Finding(Finding { claim: "c".into(), sources: vec!["T-601".into()] });
        assert_eq!(t.check_body(res, rev, &f), Ok(()));
        // the rule round-trips through the file form, and `any` is what the default graph holds
        let again = CallGraph::from_json(&g.to_json()).unwrap();
        assert_eq!(again.table(), t);
        assert!(CallGraph::bundled().unwrap().edges().iter().all(|e| e.labels == LabelRule::Any));
        // an unknown rule is refused when the graph is read
        let err =
            graph(r#"{"from": "planner", "to": "researcher", "kinds": ["brief"], "fields": [], "labels": "trusted"}"#)
                .unwrap_err();
        assert!(matches!(&err, CallGraphError::Json(m) if m.contains("unknown variant `trusted`")), "{err}");
        assert_eq!(LabelRule::ALL.len(), 3);
        assert_eq!(LabelRule::NoOtherUsers.to_string(), "no_other_users");
    }

    #[test]
    fn every_load_error_is_typed_and_names_its_edge() {
        let e = |edges: &str| graph(edges).unwrap_err();
        assert!(matches!(CallGraph::from_json("{}"), Err(CallGraphError::Json(_))));
        assert!(
            matches!(CallGraph::from_json(r#"{"edges": [], "extra": 1}"#), Err(CallGraphError::Json(m)) if m.contains("unknown field"))
        );
        assert_eq!(e(""), CallGraphError::Empty);
        assert!(matches!(
            e(r#"{"from": "planner", "to": "researcher", "kinds": ["brief"], "fields": [], "via": "x"}"#),
            CallGraphError::Json(m) if m.contains("unknown field `via`")
        ));
        assert_eq!(
            e(r#"{"from": "boss", "to": "researcher", "kinds": ["brief"], "fields": []}"#),
            CallGraphError::UnknownRole { edge: 1, name: "boss".into() }
        );
        assert_eq!(
            e(&format!(r#"{P_R}, {{"from": "planner", "to": "researcher", "kinds": ["order"], "fields": []}}"#)),
            CallGraphError::UnknownKind { edge: 2, name: "order".into() }
        );
        assert!(matches!(
            e(r#"{"from": "planner", "to": "researcher", "kinds": ["brief"], "fields": ["claim"]}"#),
            CallGraphError::UnknownField { edge: 1, name, .. } if name == "claim"
        ));
        assert_eq!(
            e(r#"{"from": "planner", "to": "researcher", "kinds": ["brief", "brief"], "fields": []}"#),
            CallGraphError::Repeated { edge: 1, name: "brief".into() }
        );
        assert_eq!(
            e(r#"{"from": "planner", "to": "researcher", "kinds": [], "fields": []}"#),
            CallGraphError::NoKinds { edge: 1 }
        );
        assert_eq!(
            e(r#"{"from": "planner", "to": "researcher", "kinds": ["brief"], "fields": [], "max_per_run": 0}"#),
            CallGraphError::ZeroLimit { edge: 1 }
        );
        assert_eq!(
            e(&format!("{P_R}, {P_R}")),
            CallGraphError::DuplicateEdge { edge: 2, from: Role::Planner, to: Role::Researcher }
        );
        assert_eq!(
            e(r#"{"from": "reviewer", "to": "reviewer", "kinds": ["verdict"], "fields": []}"#),
            CallGraphError::SelfLoop { edge: 1, role: Role::Reviewer }
        );
        assert_eq!(
            e(r#"{"from": "coordinator", "to": "planner", "kinds": ["brief"], "fields": []}"#),
            CallGraphError::FromCoordinator { edge: 1, to: Role::Planner }
        );
        assert_eq!(
            e(r#"{"from": "planner", "to": "coordinator", "kinds": ["brief"], "fields": []}"#),
            CallGraphError::NotCarried { edge: 1, from: Role::Planner, to: Role::Coordinator, kind: Kind::Brief }
        );
        assert_eq!(
            e(r#"{"from": "reviewer", "to": "researcher", "kinds": ["verdict"], "fields": []}"#),
            CallGraphError::NotCarried { edge: 1, from: Role::Reviewer, to: Role::Researcher, kind: Kind::Verdict }
        );
        assert_eq!(CallGraph::from_json(&" ".repeat(MAX_CALL_GRAPH_BYTES + 1)), Err(CallGraphError::TooLong));
        let text = e(r#"{"from": "planner", "to": "coordinator", "kinds": ["brief"], "fields": []}"#).to_string();
        assert!(text.contains("edge 1") && text.contains("from planner to coordinator"), "{text}");
    }
}
