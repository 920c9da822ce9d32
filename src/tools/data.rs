//! A tool's successful result: [`ToolData`], its compact JSON text with the value behind it,
//! and [`Output`], what a built-in tool hands the gate before it becomes one.
//!
//! The two reads a run makes most (`get_ticket`, `lookup_document`) answer with an object
//! of string members borrowed from one world record. Their result is not built as a
//! [`Value`]: serde writes the members as a map straight from the record (in key order,
//! the text `json!` would give), and the gate reads the same members in place to label
//! the result. A caller that reads the
//! result as a value gets the value the text is of, built when first asked for. The world
//! keeps each record's text once written, and the users its members name once worked out
//! ([`RecordIndex`]), for every later read of it.

use serde_json::{Map, Value};
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use crate::tools::{RecordFact, helpdesk_fact_of};
use crate::world::{RecordIndex, WorldData};

/// A successful tool result: the compact JSON text a run observes of it, and the JSON
/// value it is the text of. It reads as that [`Value`] (`data["id"]`,
/// `data.get("replayed")`); a result written as text builds its value the first time it is
/// read so.
#[derive(Clone)]
pub struct ToolData {
    /// What `serde_json::to_string` writes for the value.
    text: Text,
    /// The value, kept when the result was built as one, else parsed from `text` once.
    value: OnceLock<Value>,
    /// The fact the help desk stated with a record it answered with, read from the
    /// record's members ([`Record::fact`]): the one its text states, without reading the
    /// text again.
    stated: Option<Box<RecordFact>>,
}

impl ToolData {
    /// The compact JSON text of the result (exactly what `serde_json::to_string` writes for
    /// its value): what a run observes.
    pub fn text(&self) -> &str {
        self.text.as_str()
    }

    /// The result as a JSON value.
    pub fn value(&self) -> &Value {
        // the text is always one this crate wrote from a value (flat objects of strings, or
        // `serde_json`'s own output), so it parses; `Null` is never reached
        self.value.get_or_init(|| serde_json::from_str(self.text()).unwrap_or(Value::Null))
    }

    /// The fact the tool stated with this result, when it answered with one of the help
    /// desk's records; `None` for any other result (its fact is read in its text).
    pub(crate) fn stated_fact(&self) -> Option<&RecordFact> {
        self.stated.as_deref()
    }

    /// The result as an owned JSON value.
    pub fn into_value(self) -> Value {
        match self.value.into_inner() {
            Some(value) => value,
            None => serde_json::from_str(self.text.as_str()).unwrap_or(Value::Null),
        }
    }
}

impl From<Value> for ToolData {
    fn from(value: Value) -> Self {
        // serialising a `Value` cannot fail; `Display` writes the same compact text
        let text = serde_json::to_string(&value).unwrap_or_else(|_| value.to_string());
        Self { text: Text::Written(text), value: OnceLock::from(value), stated: None }
    }
}

/// The text of a [`ToolData`]: written for it, or a record's text shared with every other
/// read of that record.
#[derive(Clone)]
enum Text {
    Written(String),
    Kept(Arc<str>),
}

impl Text {
    fn as_str(&self) -> &str {
        match self {
            Self::Written(text) => text,
            Self::Kept(text) => text,
        }
    }
}

impl Deref for ToolData {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.value()
    }
}

/// Two results are equal when their values are (as when a result was a bare [`Value`]).
impl PartialEq for ToolData {
    fn eq(&self, other: &Self) -> bool {
        self.text() == other.text() || self.value() == other.value()
    }
}

impl Eq for ToolData {}

impl fmt::Debug for ToolData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ToolData").field(&self.text()).finish()
    }
}

/// Most members a record result has (`get_ticket`'s four).
const MAX_MEMBERS: usize = 4;

/// A result that is one JSON object of string members, each borrowed from the world.
#[derive(Clone, Copy, Debug)]
pub struct Record<'w> {
    members: [(&'static str, &'w str); MAX_MEMBERS],
    len: usize,
    /// The world the members were read from and what it keeps of the record, when the
    /// record is one of its tickets or documents.
    source: Option<(&'w WorldData, &'w RecordIndex)>,
}

impl<'w> Record<'w> {
    /// The record of these members, given in key order (the order `serde_json`'s map
    /// keeps, so the text lists them as before).
    pub(crate) fn new<const N: usize>(members: [(&'static str, &'w str); N]) -> Self {
        const { assert!(N <= MAX_MEMBERS) };
        debug_assert!(members.windows(2).all(|w| w[0].0 < w[1].0), "members in key order");
        let mut all = [("", ""); MAX_MEMBERS];
        all[..N].copy_from_slice(&members);
        Self { members: all, len: N, source: None }
    }

    /// This record as the answer of the one tool that reads `record`, a record of `world`
    /// whose members these are: its text is written once and kept by the world.
    pub(crate) fn of(self, world: &'w WorldData, record: Option<&'w RecordIndex>) -> Self {
        Self { source: record.map(|r| (world, r)), ..self }
    }

    /// The fact this record states as the answer of `tool`, by the help desk's one rule
    /// ([`helpdesk_fact_of`]) read from its members; `None` for a record that is not one of
    /// a world's (its fact, if any, is read in its text).
    /// `tests::a_record_states_the_fact_its_text_states` holds it to the rule read from the
    /// text.
    pub(crate) fn fact(&self, tool: &str) -> Option<RecordFact> {
        self.source?;
        helpdesk_fact_of(tool, self.get("id")?, self.get("status"), self.get("title"))
    }

    /// Member names and values, in key order.
    pub(crate) fn members(&self) -> &[(&'static str, &'w str)] {
        &self.members[..self.len]
    }

    /// The value of member `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&'w str> {
        self.members().iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    /// True when a member name or value of this record names a user of `world` other than
    /// `caller` ([`WorldData::names_other_user`]). For a record of `world` itself the users
    /// it names are worked out once and kept by the world ([`RecordIndex`]).
    pub(crate) fn names_other_user(&self, world: &WorldData, caller: &str) -> bool {
        match self.source {
            Some((from, record)) if std::ptr::eq(from, world) => {
                let strings = || self.members().iter().flat_map(|(k, v)| [*k, *v]).collect();
                record.names_other_than(world.index(), caller, strings)
            }
            _ => {
                let words = world.other_words(caller);
                self.members().iter().any(|(k, v)| words.first_in(k).is_some() || words.first_in(v).is_some())
            }
        }
    }

    /// The object as a JSON value (as `json!` builds it).
    pub(crate) fn to_value(self) -> Value {
        let map: Map<String, Value> =
            self.members().iter().map(|(k, v)| ((*k).to_string(), Value::String((*v).to_string()))).collect();
        Value::Object(map)
    }

    /// The compact JSON text of the object: serde writes its members as a map, in order.
    pub(crate) fn to_text(self) -> String {
        struct Members<'r, 'w>(&'r [(&'static str, &'w str)]);
        impl serde::Serialize for Members<'_, '_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
            }
        }
        // writing strings into a string cannot fail
        serde_json::to_string(&Members(self.members())).unwrap_or_default()
    }
}

/// What an environment's tool answered: one of its records, written as text straight
/// from it (the help desk's reads), or any JSON value.
#[derive(Clone, Debug)]
pub enum Output<'w> {
    /// An object of string members from one world record.
    Record(Record<'w>),
    /// Any other result.
    Value(Value),
}

impl Output<'_> {
    /// The result as a JSON value.
    pub(crate) fn into_value(self) -> Value {
        match self {
            Self::Record(r) => r.to_value(),
            Self::Value(v) => v,
        }
    }

    /// The result of `tool` as the data a gate outcome holds.
    pub(crate) fn into_data(self, tool: &str) -> ToolData {
        match self {
            Self::Record(r) => {
                let text = match r.source {
                    Some((_, record)) => Text::Kept(record.text(|| r.to_text())),
                    None => Text::Written(r.to_text()),
                };
                ToolData { text, value: OnceLock::new(), stated: r.fact(tool).map(Box::new) }
            }
            Self::Value(v) => ToolData::from(v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{GetTicketArgs, LookupDocumentArgs, Registry, ToolArgs};
    use crate::world::{Document, Ticket, World, WorldData};
    use serde_json::json;
    use std::sync::Arc;

    /// Text that exercises every escape `serde_json` writes, and text it leaves alone.
    fn corpus() -> Vec<String> {
        let mut texts: Vec<String> = [
            "",
            "plain",
            "T-601",
            "\"quoted\" and \\back\\slashed\\",
            "line one\nline two\r\n\ttabbed",
            "\u{8}\u{c}\u{0}\u{1}\u{1f}\u{7f}",
            "ünïcödé Łena Vögel ｔ－６０３ 😀 \u{200B}\u{2028}\u{2029}\u{FEFF}",
            "</script><b>&amp;</b> '",
            "\\u0041 is not A",
            "ends with an escape\n",
            "\"",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .collect();
        texts.push((0u8..0x80).map(char::from).collect());
        // an escape (or a byte next to one) at every place in an eight-byte word
        for p in 0..18 {
            for c in ["\n", "\u{1f}", "\"", "\\", " ", "\u{7f}", "é", "!", "#", "[", "]", "\u{0}"] {
                texts.push(format!("{}{c}{}", "a".repeat(p), "b".repeat(17 - p)));
            }
        }
        texts.push("é\"".repeat(300));
        texts
    }

    #[test]
    fn a_record_is_written_byte_for_byte_as_serde_json_writes_its_object() {
        let texts = corpus();
        for a in &texts {
            for b in &texts {
                let record = Record::new([("id", a.as_str()), ("status", b), ("subject", a), ("text", b)]);
                let old = json!({"id": a, "status": b, "subject": a, "text": b});
                assert_eq!(record.to_text(), serde_json::to_string(&old).unwrap(), "{a:?} {b:?}");
                assert_eq!(record.to_value(), old);
                let data = Output::Record(record).into_data("get_ticket");
                assert_eq!(data.value(), &old, "the text parses back to the value");
                assert_eq!(data, ToolData::from(old.clone()));
                assert_eq!(data.into_value(), old);
                let doc = Record::new([("id", b.as_str()), ("text", a), ("title", b)]);
                assert_eq!(doc.to_text(), json!({"id": b, "title": b, "text": a}).to_string(), "{a:?} {b:?}");
            }
        }
        assert_eq!(Record::new([]).to_text(), "{}");
    }

    #[test]
    fn the_record_reads_answer_what_the_json_objects_answered() {
        let mut data = WorldData::bundled().unwrap();
        let owner = data.tickets().values().next().unwrap().owner.clone();
        for (i, text) in corpus().into_iter().enumerate() {
            let id = format!("T-9{i:02}");
            let ticket = Ticket {
                id: id.clone(),
                owner: owner.clone(),
                status: text.clone(),
                subject: text.chars().rev().collect(),
                text: text.clone(),
            };
            data.tickets_mut().insert(id, ticket);
            let doc = format!("weird-{i}");
            data.documents_mut().insert(doc.clone(), Document { id: doc, title: text.clone(), text: text.clone() });
            // ids that need escapes too (the tools look a record up as given)
            let odd = format!("{text}#{i}");
            let ticket = Ticket {
                id: odd.clone(),
                owner: owner.clone(),
                status: "open".into(),
                subject: String::new(),
                text: text.clone(),
            };
            data.tickets_mut().insert(odd.clone(), ticket);
            data.documents_mut().insert(odd.clone(), Document { id: odd, title: "t".into(), text });
        }
        let world = World::new(Arc::new(data));
        let mut checked = 0;
        for t in world.data.tickets().values() {
            for caller in world.data.users().keys() {
                let args = ToolArgs::GetTicket(GetTicketArgs { ticket_id: t.id.as_str().into() });
                let run = Registry.run(&world, caller, &args).map(|o| o.into_data("get_ticket"));
                if t.owner != *caller {
                    assert!(run.is_err());
                    continue;
                }
                let old = json!({"id": t.id, "status": t.status, "subject": t.subject, "text": t.text});
                let run = run.unwrap();
                assert_eq!(run.text(), serde_json::to_string(&old).unwrap());
                assert_states_what_its_text_states(&run, "get_ticket");
                assert_eq!(Registry.execute(&world, caller, &args).unwrap(), old);
                checked += 1;
            }
        }
        for d in world.data.documents().values() {
            let args = ToolArgs::LookupDocument(LookupDocumentArgs { doc_id: d.id.as_str().into() });
            let old = json!({"id": d.id, "title": d.title, "text": d.text});
            let run = Registry.run(&world, "kwame", &args).map(|o| o.into_data("lookup_document")).unwrap();
            assert_eq!(run.text(), serde_json::to_string(&old).unwrap());
            assert_states_what_its_text_states(&run, "lookup_document");
            assert_eq!(Registry.execute(&world, "kwame", &args).unwrap(), old);
            checked += 1;
        }
        assert!(checked > 2 * corpus().len());
    }

    /// The fact a record states with its result is the one the help desk reads in the
    /// result's text, and one is stated.
    fn assert_states_what_its_text_states(data: &ToolData, tool: &str) {
        let read = crate::tools::helpdesk_fact(tool, data.text());
        assert!(read.is_some(), "{}", data.text());
        assert_eq!(data.stated_fact(), read.as_ref(), "{}", data.text());
    }

    #[test]
    fn a_record_states_the_fact_its_text_states() {
        let texts = corpus();
        let world = WorldData::bundled().unwrap();
        let index = world.index();
        for a in &texts {
            for b in texts.iter().step_by(5) {
                let ticket = Record::new([("id", a.as_str()), ("status", b), ("subject", a), ("text", b)]);
                let doc = Record::new([("id", b.as_str()), ("text", a), ("title", a)]);
                let no_status = Record::new([("id", a.as_str()), ("subject", a), ("text", b)]);
                for record in [ticket, doc, no_status] {
                    let of_world = record.of(&world, index.ticket("T-601"));
                    let text = record.to_text();
                    for tool in ["get_ticket", "lookup_document", "search_documents"] {
                        assert_eq!(of_world.fact(tool), crate::tools::helpdesk_fact(tool, &text), "{tool} {text}");
                        // a record that is no world's states nothing: its text is read
                        assert_eq!(record.fact(tool), None);
                        assert_eq!(Output::Record(record).into_data(tool).stated_fact(), None);
                    }
                }
            }
        }
    }

    fn ticket(world: &World, id: &str) -> ToolData {
        let owner = world.data.tickets()[id].owner.clone();
        let args = ToolArgs::GetTicket(GetTicketArgs { ticket_id: id.into() });
        Registry.run(world, &owner, &args).map(|o| o.into_data("get_ticket")).unwrap()
    }

    fn document(world: &World, id: &str) -> ToolData {
        let args = ToolArgs::LookupDocument(LookupDocumentArgs { doc_id: id.into() });
        Registry.run(world, "kwame", &args).map(|o| o.into_data("lookup_document")).unwrap()
    }

    #[test]
    fn a_record_text_is_written_once_by_its_world_and_a_changed_world_writes_it_anew() {
        let mut world = World::new(Arc::new(WorldData::bundled().unwrap()));
        let (first, again) = (ticket(&world, "T-601"), ticket(&world, "T-601"));
        assert!(std::ptr::eq(first.text(), again.text()), "the second read shares the text");
        let doc = document(&world, "kc-returns-v3");
        assert!(std::ptr::eq(doc.text(), document(&world.clone(), "kc-returns-v3").text()), "clones share the data");
        // nothing but the world holds its index: the world may be changed in place
        let data = Arc::get_mut(&mut world.data).expect("only this world holds its data");
        data.tickets_mut().get_mut("T-601").unwrap().text = "changed \"now\"".into();
        data.documents_mut().get_mut("kc-returns-v3").unwrap().title = "new title".into();
        let after = ticket(&world, "T-601");
        let t = &world.data.tickets()["T-601"];
        let written = json!({"id": t.id, "status": t.status, "subject": t.subject, "text": t.text});
        assert_eq!(after.text(), serde_json::to_string(&written).unwrap());
        assert_ne!(after.text(), first.text());
        assert!(document(&world, "kc-returns-v3").text().contains("new title"));
    }

    #[test]
    fn a_record_names_another_user_as_a_scan_of_its_members_does() {
        let mut data = WorldData::bundled().unwrap();
        data.tickets_mut().get_mut("T-601").unwrap().text = "see T-603 and mail lena@example.com".into();
        data.documents_mut().get_mut("kc-returns-v3").unwrap().text = "Kwame Mensah wrote this".into();
        let world = World::new(Arc::new(data));
        let scan = |r: &Record<'_>, caller: &str| {
            let words = world.data.other_words(caller);
            r.members().iter().any(|(k, v)| words.first_in(k).is_some() || words.first_in(v).is_some())
        };
        for (tool, id) in [("get_ticket", "T-601"), ("get_ticket", "T-602"), ("lookup_document", "kc-returns-v3")] {
            for caller in ["kwame", "lena", "mallory", "nobody"] {
                let args = match tool {
                    "get_ticket" => ToolArgs::GetTicket(GetTicketArgs { ticket_id: id.into() }),
                    _ => ToolArgs::LookupDocument(LookupDocumentArgs { doc_id: id.into() }),
                };
                let reader = if tool == "get_ticket" { "kwame" } else { caller };
                let Ok(Output::Record(r)) = Registry.run(&world, reader, &args) else { panic!("{id}") };
                // asked twice: the second answer is the one the world kept
                for _ in 0..2 {
                    assert_eq!(r.names_other_user(&world.data, caller), scan(&r, caller), "{id} for {caller}");
                }
            }
        }
        let doc = ToolArgs::LookupDocument(LookupDocumentArgs { doc_id: "kc-returns-v3".into() });
        let Ok(Output::Record(r)) = Registry.run(&world, "kwame", &doc) else { panic!("kc-returns-v3") };
        assert!(!r.names_other_user(&world.data, "kwame"), "Kwame's own name");
        assert!(r.names_other_user(&world.data, "lena"), "another user's name");
    }
}
