//! The result texts of world records, written once per world and thread and then shared.
//!
//! A `get_ticket` or `lookup_document` result is the same text every time one record of
//! one world is read. The text is kept per thread beside a [`Weak`] pointer to the world
//! it was written from, and served again only while the world read is that very
//! allocation. That check is exact, not a guess: while the weak pointer is held the
//! allocation is not freed (no other world can take its address), [`Arc::get_mut`]
//! refuses it (so nothing changes it in place) and [`Arc::make_mut`] moves it to a new
//! allocation; a world that changed is therefore never the one the text was kept for.
//! Within the unchanged world a record is found by its address, fixed while nothing
//! changes the world.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use crate::world::WorldData;

/// Most worlds whose texts a thread keeps (the oldest is let go first).
const KEPT: usize = 4;

/// The texts of the records read from one world.
struct Kept {
    /// The world they were written from (never upgraded: only its address is compared).
    world: Weak<WorldData>,
    /// Text by (record address, tool that answered it).
    texts: BTreeMap<(usize, &'static str), Arc<str>>,
}

thread_local! {
    static KEPT_TEXTS: RefCell<Vec<Kept>> = const { RefCell::new(Vec::new()) };
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
    let key = (record, tool);
    let same = |k: &Kept| std::ptr::eq(k.world.as_ptr(), Arc::as_ptr(world));
    if let Some(text) =
        KEPT_TEXTS.with_borrow(|kept| kept.iter().find(|k| same(k)).and_then(|k| k.texts.get(&key).cloned()))
    {
        return text;
    }
    let text: Arc<str> = Arc::from(write());
    KEPT_TEXTS.with_borrow_mut(|kept| {
        let at = match kept.iter().position(same) {
            Some(at) => at,
            None => {
                if kept.len() >= KEPT {
                    kept.remove(0);
                }
                kept.push(Kept { world: Arc::downgrade(world), texts: BTreeMap::new() });
                kept.len() - 1
            }
        };
        if let Some(k) = kept.get_mut(at) {
            k.texts.insert(key, text.clone());
        }
    });
    text
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
}
