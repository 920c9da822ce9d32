//! The result texts of world records, and whether they name another user, worked out
//! once per world and thread and then shared.
//!
//! A `get_ticket` or `lookup_document` result is the same text every time one record of
//! one world is read, and whether it names a user other than the caller (what the gate's
//! result label asks of it) is the same answer every time one caller reads it: both are
//! pure functions of the world, the record, the tool and (for the answer) the caller.
//! They are kept per thread beside a [`Weak`] pointer to the world they were worked out
//! from, and served again only while the world read is that very allocation. That check
//! is exact, not a guess: while the weak pointer is held the allocation is not freed (no
//! other world can take its address), [`Arc::get_mut`] refuses it (so nothing changes it
//! in place) and [`Arc::make_mut`] moves it to a new allocation; a world that changed is
//! therefore never the one they were kept for. Within the unchanged world a record is
//! found by its address, fixed while nothing changes the world; a caller by its name.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use compact_str::CompactString;

use crate::world::WorldData;

/// Most worlds whose records a thread keeps (the oldest is let go first).
const KEPT: usize = 4;

/// Most callers whose answers are kept for one record (a later caller's is worked out
/// every time).
const CALLERS: usize = 8;

/// What is kept of the records read from one world.
struct Kept {
    /// The world they were read from (never upgraded: only its address is compared).
    world: Weak<WorldData>,
    /// By (record address, tool that answered it).
    records: BTreeMap<(usize, &'static str), Record>,
}

/// What is kept of one record as one tool answers it.
#[derive(Default)]
struct Record {
    /// Its result text, once written.
    text: Option<Arc<str>>,
    /// Whether it names a user other than the caller, by caller.
    names_other: Vec<(CompactString, bool)>,
}

thread_local! {
    static KEPT_RECORDS: RefCell<Vec<Kept>> = const { RefCell::new(Vec::new()) };
}

/// `read` of what this thread keeps of the record at address `record` of `world` as `tool`
/// answers it, if it keeps anything.
fn read<R>(
    world: &Arc<WorldData>,
    record: usize,
    tool: &'static str,
    read: impl FnOnce(&Record) -> Option<R>,
) -> Option<R> {
    KEPT_RECORDS.with_borrow(|kept| {
        kept.iter()
            .find(|k| std::ptr::eq(k.world.as_ptr(), Arc::as_ptr(world)))?
            .records
            .get(&(record, tool))
            .and_then(read)
    })
}

/// `keep` applied to what this thread keeps of the record at address `record` of `world`
/// as `tool` answers it (made room for when there is none).
fn keep(world: &Arc<WorldData>, record: usize, tool: &'static str, keep: impl FnOnce(&mut Record)) {
    KEPT_RECORDS.with_borrow_mut(|kept| {
        let at = match kept.iter().position(|k| std::ptr::eq(k.world.as_ptr(), Arc::as_ptr(world))) {
            Some(at) => at,
            None => {
                if kept.len() >= KEPT {
                    kept.remove(0);
                }
                kept.push(Kept { world: Arc::downgrade(world), records: BTreeMap::new() });
                kept.len() - 1
            }
        };
        if let Some(k) = kept.get_mut(at) {
            keep(k.records.entry((record, tool)).or_default());
        }
    });
}

/// The result text `tool` answers with for the record at address `record` (a record of
/// `world`): the kept one when this thread wrote it for this same world, else `write()`,
/// kept for the next read.
pub(super) fn text_of(
    world: &Arc<WorldData>,
    record: usize,
    tool: &'static str,
    write: impl FnOnce() -> String,
) -> Arc<str> {
    if let Some(text) = read(world, record, tool, |r| r.text.clone()) {
        return text;
    }
    let text: Arc<str> = Arc::from(write());
    keep(world, record, tool, |r| r.text = Some(text.clone()));
    text
}

/// Whether the record at address `record` of `world`, as `tool` answers it, names a user
/// other than `caller`: the kept answer when this thread worked it out for this same
/// world and caller, else `work_out()`, kept for the next read.
pub(super) fn names_other_of(
    world: &Arc<WorldData>,
    record: usize,
    tool: &'static str,
    caller: &str,
    work_out: impl FnOnce() -> bool,
) -> bool {
    let kept = |r: &Record| r.names_other.iter().find(|(c, _)| c == caller).map(|(_, other)| *other);
    if let Some(other) = read(world, record, tool, kept) {
        return other;
    }
    let other = work_out();
    keep(world, record, tool, |r| {
        if r.names_other.len() < CALLERS {
            r.names_other.push((caller.into(), other));
        }
    });
    other
}

#[cfg(test)]
mod tests {
    use crate::tools::{GetTicketArgs, LookupDocumentArgs, Output, Registry, ToolArgs, ToolData};
    use crate::world::{Document, Ticket, World, WorldData};
    use serde_json::json;
    use std::sync::Arc;

    fn ticket(world: &World, id: &str) -> ToolData {
        let owner = world.data.tickets[id].owner.clone();
        let args = ToolArgs::GetTicket(GetTicketArgs { ticket_id: id.into() });
        Registry.run(world, &owner, &args).map(Output::into_data).unwrap()
    }

    fn document(world: &World, id: &str) -> ToolData {
        let args = ToolArgs::LookupDocument(LookupDocumentArgs { doc_id: id.into() });
        Registry.run(world, "kwame", &args).map(Output::into_data).unwrap()
    }

    fn written_ticket(t: &Ticket) -> String {
        serde_json::to_string(&json!({"id": t.id, "status": t.status, "subject": t.subject, "text": t.text})).unwrap()
    }

    fn written_document(d: &Document) -> String {
        serde_json::to_string(&json!({"id": d.id, "title": d.title, "text": d.text})).unwrap()
    }

    /// Ticket and document texts that need every escape, and some that need none.
    fn varied_world() -> WorldData {
        let mut data = WorldData::bundled().unwrap();
        let owner = data.tickets.values().next().unwrap().owner.clone();
        let texts =
            ["", "plain", "\"q\" \\ \n\r\t\u{0}\u{1f}\u{7f}", "ünï 😀 \u{2028}</script>", "T-601 kwame@example.com"];
        for (i, text) in texts.iter().enumerate() {
            let id = format!("T-8{i}");
            let subject: String = text.chars().rev().collect();
            let t =
                Ticket { id: id.clone(), owner: owner.clone(), status: "open".into(), subject, text: (*text).into() };
            data.tickets.insert(id, t);
            let doc = format!("odd-{i}");
            data.documents.insert(doc.clone(), Document { id: doc, title: format!("{text}{i}"), text: (*text).into() });
        }
        data
    }

    #[test]
    fn a_kept_text_is_the_written_one_and_is_shared_by_later_reads() {
        let world = World::new(Arc::new(varied_world()));
        for _ in 0..3 {
            for t in world.data.tickets.values() {
                let (first, again) = (ticket(&world, &t.id), ticket(&world, &t.id));
                assert_eq!(first.text(), written_ticket(t));
                assert!(std::ptr::eq(first.text(), again.text()), "the second read shares the text");
                assert_eq!(first.value(), &serde_json::from_str::<serde_json::Value>(&written_ticket(t)).unwrap());
            }
            for d in world.data.documents.values() {
                let (first, again) = (document(&world, &d.id), document(&world, &d.id));
                assert_eq!(first.text(), written_document(d));
                assert!(std::ptr::eq(first.text(), again.text()));
            }
        }
        // a clone of the world shares its data, and so its texts
        let clone = world.clone();
        assert!(std::ptr::eq(ticket(&world, "T-601").text(), ticket(&clone, "T-601").text()));
    }

    #[test]
    fn a_world_changed_after_a_read_is_read_anew() {
        let mut world = World::new(Arc::new(varied_world()));
        let before = ticket(&world, "T-601");
        document(&world, "kc-returns-v3");
        // the kept text's weak pointer forbids changing this world in place ...
        assert!(Arc::get_mut(&mut world.data).is_none());
        // ... so a change moves it to a new allocation, whose records are written anew
        let data = Arc::make_mut(&mut world.data);
        data.tickets.get_mut("T-601").unwrap().text = "changed \"now\"".into();
        data.documents.get_mut("kc-returns-v3").unwrap().title = "new title".into();
        let after = ticket(&world, "T-601");
        assert_ne!(after.text(), before.text());
        assert_eq!(after.text(), written_ticket(&world.data.tickets["T-601"]));
        assert!(after.text().contains(r#"changed \"now\""#));
        let doc = document(&world, "kc-returns-v3");
        assert_eq!(doc.text(), written_document(&world.data.documents["kc-returns-v3"]));
        // and a shared world changed through a clone of its data is a new world too
        let shared = world.clone();
        Arc::make_mut(&mut world.data).tickets.get_mut("T-601").unwrap().status = "closed".into();
        assert_eq!(ticket(&world, "T-601").text(), written_ticket(&world.data.tickets["T-601"]));
        assert_eq!(ticket(&shared, "T-601").text(), written_ticket(&shared.data.tickets["T-601"]));
        assert_ne!(ticket(&world, "T-601").text(), ticket(&shared, "T-601").text());
    }

    #[test]
    fn many_worlds_built_and_dropped_in_turn_each_answer_their_own_text() {
        // more worlds than are kept, each dropped before the next is built (so an address
        // may come back once its texts are let go)
        for round in 0..3 * super::KEPT {
            let mut data = WorldData::bundled().unwrap();
            data.tickets.get_mut("T-601").unwrap().text = format!("round {round}");
            data.documents.get_mut("kc-returns-v3").unwrap().text = format!("doc round {round}");
            let world = World::new(Arc::new(data));
            assert_eq!(ticket(&world, "T-601").text(), written_ticket(&world.data.tickets["T-601"]));
            assert_eq!(
                document(&world, "kc-returns-v3").text(),
                written_document(&world.data.documents["kc-returns-v3"])
            );
        }
    }

    #[test]
    fn an_answer_is_worked_out_once_per_world_record_tool_and_caller() {
        use super::{CALLERS, names_other_of, text_of};
        use std::cell::Cell;
        let worked = Cell::new(0);
        let ask = |world: &Arc<WorldData>, record: usize, tool: &'static str, caller: &str, answer: bool| {
            names_other_of(world, record, tool, caller, || {
                worked.set(worked.get() + 1);
                answer
            })
        };
        let world = Arc::new(WorldData::bundled().unwrap());
        assert!(ask(&world, 1, "get_ticket", "kwame", true));
        assert!(ask(&world, 1, "get_ticket", "kwame", false), "the kept answer");
        assert_eq!(worked.get(), 1);
        // another caller, tool, record or world is another answer
        assert!(!ask(&world, 1, "get_ticket", "lena", false));
        assert!(!ask(&world, 1, "lookup_document", "kwame", false));
        assert!(!ask(&world, 2, "get_ticket", "kwame", false));
        let other = Arc::new(WorldData::bundled().unwrap());
        assert!(!ask(&other, 1, "get_ticket", "kwame", false));
        assert_eq!(worked.get(), 5);
        assert!(ask(&world, 1, "get_ticket", "kwame", false) && !ask(&world, 1, "get_ticket", "lena", true));
        assert_eq!(worked.get(), 5);
        // the text kept beside the answers is kept as before
        let text = text_of(&world, 1, "get_ticket", || "text one".into());
        assert_eq!(&*text_of(&world, 1, "get_ticket", || "text two".into()), "text one");
        assert!(ask(&world, 1, "get_ticket", "kwame", false));
        assert_eq!(&*text, "text one");
        // past the callers kept for one record, a caller's answer is worked out each time
        for i in 0..CALLERS + 3 {
            let caller = format!("caller{i}");
            let (first, again) =
                (ask(&world, 3, "get_ticket", &caller, i % 2 == 0), ask(&world, 3, "get_ticket", &caller, i % 2 == 1));
            assert_eq!(first, i % 2 == 0);
            assert_eq!(again, if i < CALLERS { first } else { !first }, "{i}");
        }
    }
}
