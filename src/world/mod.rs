//! The synthetic environment the tools act on: users, tickets, documents and an outbox
//! that records every e-mail actually sent. Loaded from `data/world.json`; the bundled copy
//! is compiled into the binary so `rolegate` runs anywhere.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

mod index;
pub use index::bundled_names_other_user;
pub(crate) use index::{RecordIndex, WorldIndex};

/// The bundled world, `data/world.json`.
pub(crate) const BUNDLED_WORLD: &str = include_str!("../../data/world.json");

/// Errors of the world module.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorldError {
    /// The world file did not parse.
    #[error("world: {0}")]
    Parse(String),
    /// Two records share an id.
    #[error("world: duplicate {kind} id {id:?}")]
    Duplicate {
        /// "user", "ticket" or "document".
        kind: &'static str,
        /// The repeated id.
        id: String,
    },
    /// A ticket names an owner who is not a user.
    #[error("world: ticket {ticket:?} belongs to unknown user {owner:?}")]
    UnknownOwner {
        /// The ticket id.
        ticket: String,
        /// The owner it names.
        owner: String,
    },
}

/// A person who can ask, own tickets or approve.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct User {
    /// Login id, e.g. `kwame`.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Contact address (personal data: never logged in clear).
    pub email: String,
    /// Roles such as `customer`, `agent`, `approver`.
    #[serde(default)]
    pub roles: Vec<String>,
}

/// A support ticket. Its text is untrusted: it may carry an injected instruction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ticket {
    /// Id such as `T-601`.
    pub id: String,
    /// The user who owns it; only they can read it.
    pub owner: String,
    /// `open` or `closed`.
    pub status: String,
    /// One-line subject.
    pub subject: String,
    /// Free text written by the customer (untrusted).
    pub text: String,
}

/// A policy document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Document {
    /// Id such as `kc-returns-v3`.
    pub id: String,
    /// Title.
    pub title: String,
    /// Body text (untrusted, like every tool result).
    pub text: String,
}

/// The world file's shape.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldFile {
    /// Users.
    pub users: Vec<User>,
    /// Tickets.
    pub tickets: Vec<Ticket>,
    /// Documents.
    pub documents: Vec<Document>,
}

/// The read-only part of a world, indexed by id; shared between runs with an `Arc`. It
/// owns an index of whose data its texts name, built when first asked and dropped by any
/// change made through the `*_mut` accessors.
#[derive(Default)]
pub struct WorldData {
    users: BTreeMap<String, User>,
    tickets: BTreeMap<String, Ticket>,
    documents: BTreeMap<String, Document>,
    index: OnceLock<WorldIndex>,
}

impl Clone for WorldData {
    /// The same records; the clone builds its own index when first asked.
    fn clone(&self) -> Self {
        Self {
            users: self.users.clone(),
            tickets: self.tickets.clone(),
            documents: self.documents.clone(),
            index: OnceLock::new(),
        }
    }
}

/// Two worlds are equal when their records are.
impl PartialEq for WorldData {
    fn eq(&self, other: &Self) -> bool {
        self.users == other.users && self.tickets == other.tickets && self.documents == other.documents
    }
}

impl Eq for WorldData {}

impl fmt::Debug for WorldData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorldData")
            .field("users", &self.users)
            .field("tickets", &self.tickets)
            .field("documents", &self.documents)
            .finish_non_exhaustive()
    }
}

impl WorldData {
    /// Parses and indexes a world file.
    ///
    /// # Errors
    /// [`WorldError`] on bad JSON, unknown fields, duplicate ids or a ticket owned by an
    /// unknown user.
    pub fn from_json(text: &str) -> Result<Self, WorldError> {
        let file: WorldFile = serde_json::from_str(text).map_err(|e| WorldError::Parse(e.to_string()))?;
        Self::from_file(file)
    }

    /// Indexes an already parsed world file.
    ///
    /// # Errors
    /// As [`WorldData::from_json`], minus parsing.
    pub fn from_file(file: WorldFile) -> Result<Self, WorldError> {
        let mut w = WorldData::default();
        for u in file.users {
            if w.users.contains_key(&u.id) {
                return Err(WorldError::Duplicate { kind: "user", id: u.id });
            }
            w.users.insert(u.id.clone(), u);
        }
        for t in file.tickets {
            if !w.users.contains_key(&t.owner) {
                return Err(WorldError::UnknownOwner { ticket: t.id, owner: t.owner });
            }
            if w.tickets.contains_key(&t.id) {
                return Err(WorldError::Duplicate { kind: "ticket", id: t.id });
            }
            w.tickets.insert(t.id.clone(), t);
        }
        for d in file.documents {
            if w.documents.contains_key(&d.id) {
                return Err(WorldError::Duplicate { kind: "document", id: d.id });
            }
            w.documents.insert(d.id.clone(), d);
        }
        Ok(w)
    }

    /// The bundled world.
    ///
    /// # Errors
    /// Only if the bundled file were broken (a test guards it).
    pub fn bundled() -> Result<Self, WorldError> {
        Self::from_json(BUNDLED_WORLD)
    }

    /// Users by id.
    pub fn users(&self) -> &BTreeMap<String, User> {
        &self.users
    }

    /// Tickets by id.
    pub fn tickets(&self) -> &BTreeMap<String, Ticket> {
        &self.tickets
    }

    /// Documents by id.
    pub fn documents(&self) -> &BTreeMap<String, Document> {
        &self.documents
    }

    /// Users by id, to change; the index is built anew when next asked.
    pub fn users_mut(&mut self) -> &mut BTreeMap<String, User> {
        self.index.take();
        &mut self.users
    }

    /// Tickets by id, to change; the index is built anew when next asked.
    pub fn tickets_mut(&mut self) -> &mut BTreeMap<String, Ticket> {
        self.index.take();
        &mut self.tickets
    }

    /// Documents by id, to change; the index is built anew when next asked.
    pub fn documents_mut(&mut self) -> &mut BTreeMap<String, Document> {
        self.index.take();
        &mut self.documents
    }

    /// The index of this world as it is now (built the first time it is asked).
    pub(crate) fn index(&self) -> &WorldIndex {
        self.index.get_or_init(|| WorldIndex::new(self))
    }

    /// Back to the file shape (ordered by id), e.g. to let a scenario override parts.
    pub fn to_file(&self) -> WorldFile {
        WorldFile {
            users: self.users.values().cloned().collect(),
            tickets: self.tickets.values().cloned().collect(),
            documents: self.documents.values().cloned().collect(),
        }
    }
}

/// One e-mail that was really sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SentEmail {
    /// Sequential id within the outbox, `e1`, `e2`, …
    pub id: String,
    /// Recipient.
    pub to: String,
    /// Subject.
    pub subject: String,
    /// Body.
    pub body: String,
    /// The application-derived idempotency key it was sent under.
    pub idempotency_key: String,
}

/// Where sent e-mails land. Cloning shares the same outbox; the lock is never held across
/// an `.await`.
#[derive(Clone, Debug, Default)]
pub struct Outbox {
    /// The sent mail, shared by every clone.
    sent: Arc<Mutex<Vec<SentEmail>>>,
}

impl Outbox {
    /// An empty outbox.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a sent e-mail and returns its id. A key already used returns the earlier
    /// id and sends nothing (the last line of defence against a double send).
    pub fn send(&self, to: &str, subject: &str, body: &str, idempotency_key: &str) -> (String, bool) {
        let mut sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = sent.iter().find(|e| e.idempotency_key == idempotency_key) {
            return (e.id.clone(), false);
        }
        let id = format!("e{}", sent.len() + 1);
        sent.push(SentEmail {
            id: id.clone(),
            to: to.to_string(),
            subject: subject.to_string(),
            body: body.to_string(),
            idempotency_key: idempotency_key.to_string(),
        });
        (id, true)
    }

    /// Replaces what this outbox (and every clone of it) holds with `sent`, loaded from a
    /// durable store.
    pub fn load(&self, sent: Vec<SentEmail>) {
        *self.sent.lock().unwrap_or_else(PoisonError::into_inner) = sent;
    }

    /// An outbox holding mail sent earlier (e.g. loaded from a durable store), so the
    /// per-key dedupe and the ids carry on across processes.
    pub fn restore(sent: Vec<SentEmail>) -> Self {
        Self { sent: Arc::new(Mutex::new(sent)) }
    }

    /// A copy of everything sent so far.
    pub fn sent(&self) -> Vec<SentEmail> {
        self.sent.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// How many e-mails were sent.
    pub fn len(&self) -> usize {
        self.sent.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// True when nothing was sent.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A world for one or more runs: shared read-only data and an outbox.
#[derive(Clone, Debug)]
pub struct World {
    /// Tickets, documents and users.
    pub data: Arc<WorldData>,
    /// The outbox every `send_email_draft` writes to.
    pub outbox: Outbox,
}

impl World {
    /// A world over `data` with an empty outbox.
    pub fn new(data: Arc<WorldData>) -> Self {
        Self { data, outbox: Outbox::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_world_has_the_three_tickets_and_the_injected_note() {
        let w = WorldData::bundled().unwrap();
        assert_eq!(w.tickets["T-601"].owner, "kwame");
        assert_eq!(w.tickets["T-603"].owner, "lena");
        assert_eq!(w.tickets["T-603"].status, "closed");
        assert!(w.tickets["T-602"].text.contains("NOTE TO THE ASSISTANT"));
        for d in ["kc-returns-v3", "kc-warranty-v2", "kc-battery-v1"] {
            assert!(w.documents.contains_key(d), "{d}");
        }
    }

    #[test]
    fn bad_worlds_are_refused() {
        assert!(WorldData::from_json("{").is_err());
        assert!(WorldData::from_json(r#"{"users": [], "tickets": [], "documents": [], "x": 1}"#).is_err());
        let orphan = r#"{"users": [], "documents": [], "tickets": [{"id": "T-1", "owner": "nobody", "status": "open", "subject": "s", "text": "t"}]}"#;
        assert!(matches!(WorldData::from_json(orphan), Err(WorldError::UnknownOwner { .. })));
    }

    #[test]
    fn outbox_sends_once_per_key() {
        let o = Outbox::new();
        assert_eq!(o.send("a@example.com", "s", "b", "k1"), ("e1".to_string(), true));
        assert_eq!(o.send("a@example.com", "s", "b", "k1"), ("e1".to_string(), false));
        assert_eq!(o.len(), 1);
    }
}
