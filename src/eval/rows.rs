//! What a scenario row may add to the bundled setup, for single and multi rows alike: its
//! own tickets, documents and users (`world`), a payload planted into one of them
//! (`attack`), the defenses it runs under (`defenses`), and for multi rows the roles taken
//! over by a planted payload (`compromised`). Each is optional; a row without them runs as
//! before. Every part is strict: unknown fields, bad values and targets that do not exist
//! are refused with the field named.

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::sync::{Arc, LazyLock};

use crate::agent::CheckMode;
use crate::gate::{ApprovalMode, Policy};
use crate::lab::attacks::{Attack, AttackVerdict, plant, plant_whole};
use crate::lab::compromised::{PlannerCompromise, ResearcherCompromise, ReviewerCompromise};
use crate::lab::hops::{Hop, Propagation};
use crate::multi::{InstructionFilter, Scopes};
use crate::world::{Document, Ticket, User, WorldData, WorldError, WorldFile};

/// Records a row adds to the world; one with the id of a bundled record replaces it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldPatch {
    /// Users to add or replace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<User>,
    /// Tickets to add or replace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tickets: Vec<Ticket>,
    /// Documents to add or replace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub documents: Vec<Document>,
}

impl WorldPatch {
    /// `base` with these records added or replaced by id.
    ///
    /// # Errors
    /// [`WorldError`] for an id used twice in the patch or a ticket of an unknown user.
    pub fn apply(&self, base: &WorldData) -> Result<WorldData, WorldError> {
        fn merge<T: Clone>(base: Vec<T>, add: &[T], id: impl Fn(&T) -> &str) -> Result<Vec<T>, String> {
            let mut seen = std::collections::BTreeSet::new();
            for a in add {
                if !seen.insert(id(a)) {
                    return Err(id(a).to_string());
                }
            }
            let mut out: Vec<T> = base.into_iter().filter(|b| !add.iter().any(|a| id(a) == id(b))).collect();
            out.extend_from_slice(add);
            Ok(out)
        }
        let dup = |kind: &'static str| move |id: String| WorldError::Duplicate { kind, id };
        let file = base.to_file();
        let merged = WorldFile {
            users: merge(file.users, &self.users, |u| &u.id).map_err(dup("user"))?,
            tickets: merge(file.tickets, &self.tickets, |t| &t.id).map_err(dup("ticket"))?,
            documents: merge(file.documents, &self.documents, |d| &d.id).map_err(dup("document"))?,
        };
        WorldData::from_file(merged)
    }
}

/// The payload of a row's attack: the id of a catalog row, or a payload written in the
/// row itself. After loading, it is always [`Payload::Written`] (catalog ids are looked
/// up then).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    /// A catalog id, not yet looked up.
    Catalog(String),
    /// The payload itself.
    Written(Box<Attack>),
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Catalog(id) => s.serialize_str(id),
            Self::Written(a) => a.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Payload;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a catalog id or a payload object {id, style, text, effect}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Payload, E> {
                Ok(Payload::Catalog(v.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Payload, A::Error> {
                let attack = Attack::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Payload::Written(Box::new(attack)))
            }
        }
        d.deserialize_any(V)
    }
}

/// A payload and where the runner plants it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowAttack {
    /// A catalog id (`"a05"`) or a payload written out.
    pub payload: Payload,
    /// The ticket or document whose text the payload is appended to.
    pub into: String,
}

impl RowAttack {
    /// The payload, once loaded.
    pub fn attack(&self) -> Option<&Attack> {
        match &self.payload {
            Payload::Written(a) => Some(a),
            Payload::Catalog(_) => None,
        }
    }
}

/// A control that is on or off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Switch {
    /// On (every control's default).
    #[default]
    On,
    /// Off.
    Off,
}

/// How many tools an agent or role holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeWidth {
    /// Its task's (or its role's) tools, as the policy says.
    #[default]
    Narrow,
    /// Every tool of the help desk, every write granted ([`Policy::widened`],
    /// [`Scopes::widened`]).
    Wide,
}

/// The defenses a row runs under; anything unset is on (narrow for scopes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowDefenses {
    /// Multi rows: the coordinator's instruction filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Switch>,
    /// The tools each agent or role holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<ScopeWidth>,
    /// Single rows: the loop's own check of each proposal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_check: Option<Switch>,
    /// Whether a granted write waits for a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Switch>,
    /// The information-flow defense; unlike the others it is off when unset (it is an
    /// experiment's switch, not yet a default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ifc: Option<Switch>,
}

impl RowDefenses {
    /// The instruction filter.
    pub fn filter(&self) -> InstructionFilter {
        match self.filter.unwrap_or_default() {
            Switch::On => InstructionFilter::On,
            Switch::Off => InstructionFilter::Off,
        }
    }

    /// The loop check.
    pub fn checks(&self) -> CheckMode {
        match self.loop_check.unwrap_or_default() {
            Switch::On => CheckMode::Full,
            Switch::Off => CheckMode::TrustModel,
        }
    }

    /// The gate's approval mode.
    pub fn approval(&self) -> ApprovalMode {
        match self.approval.unwrap_or_default() {
            Switch::On => ApprovalMode::Required,
            Switch::Off => ApprovalMode::Off,
        }
    }

    /// The information-flow defense: on only when the row says so.
    pub fn ifc(&self) -> crate::label::IfcMode {
        match self.ifc {
            Some(Switch::On) => crate::label::IfcMode::On,
            Some(Switch::Off) | None => crate::label::IfcMode::Off,
        }
    }

    /// The scope width.
    pub fn scopes(&self) -> ScopeWidth {
        self.scopes.unwrap_or_default()
    }

    /// `policy` with `task` widened when the scopes are wide.
    pub fn policy(&self, policy: &Policy, task: &str) -> Policy {
        match self.scopes() {
            ScopeWidth::Narrow => policy.clone(),
            ScopeWidth::Wide => policy.clone().widened(task, &crate::tools::TOOL_NAMES),
        }
    }

    /// `scopes` widened when the scopes are wide.
    pub fn role_scopes(&self, scopes: &Scopes) -> Scopes {
        match self.scopes() {
            ScopeWidth::Narrow => scopes.clone(),
            ScopeWidth::Wide => scopes.widened(&crate::tools::TOOL_NAMES),
        }
    }
}

/// Roles of a multi row taken over by a planted payload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compromised {
    /// The planner writes a malicious brief or copies a payload from its notes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planner: Option<PlannerCompromise>,
    /// The researcher relays or obeys what it read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub researcher: Option<ResearcherCompromise>,
    /// The reviewer obeys what it reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<ReviewerCompromise>,
}

static BUNDLED_WORLD: LazyLock<Result<Arc<WorldData>, String>> =
    LazyLock::new(|| WorldData::bundled().map(Arc::new).map_err(|e| e.to_string()));

/// What the extension fields of a row say, checked against a catalog and a world.
pub(crate) struct Extensions<'a> {
    /// The row's `world`.
    pub world: Option<&'a WorldPatch>,
    /// The row's `attack`.
    pub attack: Option<&'a mut RowAttack>,
    /// Its `expect.attack`.
    pub expect_attack: Option<AttackVerdict>,
    /// The row's user (who reads a document the payload is planted into).
    pub user: &'a str,
}

impl Extensions<'_> {
    /// Looks a catalog payload up, and checks the world patch and the attack's target
    /// against the bundled world (the world every command runs in).
    ///
    /// # Errors
    /// `(field, message)` of the first problem.
    pub(crate) fn check(&mut self, catalog: &[Attack]) -> Result<(), (String, String)> {
        if let Some(a) = self.attack.as_deref_mut() {
            match &a.payload {
                Payload::Catalog(id) => {
                    let found = catalog
                        .iter()
                        .find(|c| &c.id == id)
                        .ok_or_else(|| ("attack.payload".to_string(), format!("no attack {id:?} in the catalog")))?;
                    a.payload = Payload::Written(Box::new(found.clone()));
                }
                Payload::Written(w) => w.validate("attack.payload.")?,
            }
        }
        if self.expect_attack.is_some() && self.attack.is_none() {
            return Err(("expect.attack".into(), "a row without an attack has no attack verdict".into()));
        }
        let base = BUNDLED_WORLD.as_ref().map_err(|e| ("world".to_string(), e.clone()))?;
        let world = match self.world {
            Some(p) => p.apply(base).map_err(|e| ("world".to_string(), e.to_string()))?,
            None => WorldData::clone(base),
        };
        if let Some(a) = self.attack.as_deref()
            && let Some(attack) = a.attack()
        {
            if attack.template.is_some() {
                let why = "a template payload runs in the matrix (suite --matrix --templates), filled per task, user and model";
                return Err(("attack.payload".into(), why.into()));
            }
            // a payload the model would see cut is refused here as in the matrix
            plant_whole(&world, attack, &a.into, self.user).map_err(|e| ("attack.into".to_string(), e.to_string()))?;
        }
        Ok(())
    }
}

/// A row's world and the payloads planted in it.
pub(crate) type RowWorld = (Arc<WorldData>, Arc<[Attack]>);

/// The world a row runs in: `base` with the row's patch applied and its payload planted,
/// or `None` when the row changes nothing. Also the planted payloads, for the compromised
/// fakes.
///
/// # Errors
/// `(field, message)` when the patch or the target does not fit `base`.
pub(crate) fn row_world(
    base: &Arc<WorldData>,
    patch: Option<&WorldPatch>,
    attack: Option<&RowAttack>,
) -> Result<RowWorld, (String, String)> {
    let planted: Vec<Attack> = attack.and_then(RowAttack::attack).cloned().into_iter().collect();
    if patch.is_none() && planted.is_empty() {
        return Ok((base.clone(), Arc::from(planted)));
    }
    let mut world = match patch {
        Some(p) => p.apply(base).map_err(|e| ("world".to_string(), e.to_string()))?,
        None => WorldData::clone(base),
    };
    if let (Some(a), Some(attack)) = (attack, planted.first()) {
        world = plant(&world, attack, &a.into).map_err(|e| ("attack.into".to_string(), e.to_string()))?;
    }
    Ok((Arc::new(world), Arc::from(planted)))
}

/// Compares a row's expected hop and stop code with what its run showed (each only when
/// the row states it; a stated `stopped_by` of `""` expects none).
pub(crate) fn check_hop(
    hop: Option<Hop>,
    stopped_by: Option<&str>,
    got: Option<&Propagation>,
    mismatches: &mut Vec<String>,
) {
    let got_hop = got.map(|p| p.hop);
    if let Some(want) = hop
        && got_hop != Some(want)
    {
        let got = got_hop.map_or("none (no attack)".to_string(), |h| h.to_string());
        mismatches.push(format!("hop: expected {want}, got {got}"));
    }
    if let Some(want) = stopped_by {
        let got = got.and_then(|p| p.stopped_by.as_deref()).unwrap_or("");
        if got != want {
            mismatches.push(format!("stopped_by: expected {want:?}, got {got:?}"));
        }
    }
}

/// ` hop=HOP/CODE` (or ` hop=HOP`) for a table line; empty without an attack.
pub(crate) fn hop_text(p: Option<&Propagation>) -> String {
    match p {
        None => String::new(),
        Some(Propagation { hop, stopped_by: Some(code) }) => format!(" hop={hop}/{code}"),
        Some(Propagation { hop, stopped_by: None }) => format!(" hop={hop}"),
    }
}
