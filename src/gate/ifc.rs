//! The information-flow rules the gate checks on a consequential call when the defense is
//! on ([`IfcMode::On`]). Result labels come from the gate's environment
//! ([`Environment::result_label`]); so do who a text names and a caller's own values.
//!
//! - **Trusted-action rule.** A consequential call (one the environment names control
//!   arguments for, such as the help desk's `send_email_draft`, or any tool the policy
//!   labels `write`) is refused (`untrusted_argument`) when one of its control arguments
//!   (the help desk's e-mail: the recipient `to`; any other write: every string argument)
//!   derives from an untrusted value under [`argument_label`]. The refusal names the first
//!   untrusted source of the context (`to derives from untrusted get_ticket:T-601`). The
//!   default is to refuse, not to park: a person shown the card could approve it, and the
//!   rule is meant to hold with approval off. Content arguments (`subject`, `body`) may be
//!   untrusted: the tool sends them only to a trusted recipient.
//! - **Confidentiality rule.** A consequential call is refused (`other_users_data`) when its
//!   context holds another user's data or any of its string arguments names another user
//!   of the environment ([`Environment::names_other_user`]). Reads are left to the tools,
//!   which answer another user's record as missing (a distinct refusal would tell that it
//!   exists).
//!
//! [`IfcMode::On`]: super::IfcMode::On
//! [`Environment::result_label`]: crate::tools::Environment::result_label
//! [`Environment::names_other_user`]: crate::tools::Environment::names_other_user

use serde_json::Value;

use super::{Access, Refusal};
#[cfg(test)]
use crate::label::Label;
use crate::label::{Confidentiality, Taint, argument_label};
use crate::tools::Environment;
#[cfg(test)]
use crate::tools::Output;
#[cfg(test)]
use crate::world::WorldData;

/// The control arguments of `tool`: `Some(names)` for a consequential tool (empty: every
/// string argument), `None` for a tool that only reads. The environment names the
/// control arguments of its own tools (the help desk: an e-mail's `to`).
pub(crate) fn controls(tool: &str, access: Access, env: &dyn Environment) -> Option<&'static [&'static str]> {
    match env.control_arguments(tool) {
        Some(names) => Some(names),
        None if access == Access::Write => Some(&[]),
        None => None,
    }
}

/// The label of a successful result of `tool` for `caller`, as the help desk gives it
/// ([`crate::tools::Environment::result_label`]).
#[cfg(test)]
fn result_label<'a>(tool: &str, caller: &str, output: &'a Output<'_>, world: &WorldData) -> Option<(Label, &'a str)> {
    crate::tools::helpdesk_label(tool, caller, output, world)
}

/// True when a string of `value` (a member name or a value, at any depth) names a user
/// other than `caller`.
#[cfg(test)]
fn names_other_user_in(world: &WorldData, caller: &str, value: &Value) -> bool {
    let words = world.other_words(caller);
    crate::tools::any_string(value, &mut |text| words.first_in(text).is_some())
}

/// Checks a consequential call of `tool` with `arguments` for `caller` against the
/// context `taint`: the confidentiality rule first, then the trusted-action rule.
///
/// # Errors
/// The refusal and its message.
pub(crate) fn check_call(
    tool: &str,
    controls: &[&str],
    arguments: &Value,
    caller: &str,
    env: &dyn Environment,
    taint: &Taint,
) -> Result<(), (Refusal, String)> {
    if taint.label().confidentiality == Confidentiality::Other {
        return Err((Refusal::OtherUsersData, format!("{tool}: the context holds another user's data")));
    }
    let strings: Vec<(&str, &str)> = arguments
        .as_object()
        .map(|o| o.iter().filter_map(|(k, v)| Some((k.as_str(), v.as_str()?))).collect())
        .unwrap_or_default();
    if let Some((key, _)) = strings.iter().find(|(_, v)| env.names_other_user(caller, v)) {
        return Err((Refusal::OtherUsersData, format!("{tool}: {key} names another user")));
    }
    let own = env.own_values(caller);
    let source = taint.source().unwrap_or("input");
    for (key, value) in strings.iter().filter(|(k, _)| controls.is_empty() || controls.contains(k)) {
        // the idempotency key only deduplicates; the gate replaces it when it parks
        if *key == "idempotency_key" {
            continue;
        }
        if !argument_label(value, taint.label(), &own).is_trusted() {
            return Err((Refusal::UntrustedArgument, format!("{tool}: {key} derives from untrusted {source}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn another_users_address_after_a_line_break_in_a_result_labels_it_theirs() {
        let world = WorldData::bundled().unwrap();
        let other = |data: &Value| {
            result_label("get_ticket", "kwame", &Output::Value(data.clone()), &world).unwrap().0.confidentiality
        };
        // written as JSON text this string reads `...\nlena@example.com`: one word, nobody's
        for text in ["status update\nlena@example.com", "tab\tT-603", "cr\rMallory"] {
            let data = json!({"id": "T-601", "owner": "kwame", "text": text});
            assert_eq!(other(&data), Confidentiality::Other, "{text:?}");
        }
        let nested = json!({"id": "T-601", "history": [{"note": "line one\nask lena"}]});
        assert_eq!(other(&nested), Confidentiality::Other);
        let own = json!({"id": "T-601", "owner": "kwame", "text": "first line\nsecond line"});
        assert_eq!(other(&own), Confidentiality::User);
    }

    /// Every member name and scalar of `value` but `null` and booleans, depth first: the
    /// strings the walk read before it read them in place.
    fn strings_of(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::String(s) => out.push(s.clone()),
            Value::Number(n) => out.push(n.to_string()),
            Value::Array(items) => items.iter().for_each(|v| strings_of(v, out)),
            Value::Object(members) => members.iter().for_each(|(k, v)| {
                out.push(k.clone());
                strings_of(v, out);
            }),
            Value::Null | Value::Bool(_) => {}
        }
    }

    #[test]
    fn the_walk_in_place_answers_as_the_list_of_strings_did() {
        let world = WorldData::bundled().unwrap();
        let values = [
            json!({"id": "T-601", "owner": "kwame", "text": "first line\nsecond line"}),
            json!({"id": "T-603", "owner": "lena"}),
            json!({"lena": 1}),
            json!({"n": 603, "m": -603, "f": 6.03e2, "big": 18446744073709551615u64, "tiny": 1.0e-300}),
            json!([null, true, false, [], {}, "", [[["deep mallory"]]]]),
            json!({"history": [{"note": "line one\nask Lena"}, {"note": "ｔ－６０３"}]}),
            json!({"text": "\u{200B}l\u{200B}ena \"quoted\" \\ back"}),
            json!({"to": "LENA@EXAMPLE.COM."}),
            json!({"a": "Quinn", "b": "Mensah"}),
            json!(-1.5e10),
            json!("T-6030 lenient"),
            json!({"é": "Vögel", "Łena": "x"}),
        ];
        for caller in ["kwame", "lena", "mallory", "nobody"] {
            for value in &values {
                let mut texts = Vec::new();
                strings_of(value, &mut texts);
                let old = texts.iter().any(|t| world.names_other_user(caller, t).is_some());
                assert_eq!(names_other_user_in(&world, caller, value), old, "{caller}: {value}");
                // and the strings are the ones the list held, in the same order
                let mut read = Vec::new();
                crate::tools::any_string(value, &mut |t| {
                    read.push(t.to_string());
                    false
                });
                assert_eq!(read, texts, "{value}");
            }
        }
    }

    #[test]
    fn a_record_is_labelled_as_the_object_it_stands_for() {
        use crate::tools::Record;
        let world = WorldData::bundled().unwrap();
        let texts = [
            "",
            "plain",
            "ask lena",
            "line one\nlena@example.com",
            "LENA@EXAMPLE.COM.",
            "T-603",
            "t-603 again",
            "Mallory",
            "ｔ－６０３",
            "Quinn Mensah",
            "\u{200B}l\u{200B}ena",
            "kwame",
        ];
        let mut other = 0;
        for caller in ["kwame", "lena", "mallory", "nobody"] {
            for tool in ["get_ticket", "lookup_document", "search_documents", "calculator", "remember", "added"] {
                for a in texts {
                    for b in texts {
                        let records = [
                            Record::new([("id", a), ("status", b), ("subject", a), ("text", b)]),
                            Record::new([("id", b), ("text", a), ("title", b)]),
                        ];
                        for record in records {
                            let (record, object) = (Output::Record(record), Output::Value(record.to_value()));
                            let read = result_label(tool, caller, &record, &world);
                            let walked = result_label(tool, caller, &object, &world);
                            assert_eq!(read, walked, "{tool} {caller} {a:?} {b:?}");
                            other +=
                                usize::from(read.is_some_and(|(l, _)| l.confidentiality == Confidentiality::Other));
                        }
                    }
                }
            }
        }
        assert!(other > 100, "the corpus names other users");
    }

    /// A world whose records name users in the ways the words are found (an address after
    /// a line break, full-width letters, JSON escapes, a zero-width space, a name with
    /// letters lower case changes), with more users than an answer is kept for.
    fn naming_world() -> WorldData {
        let mut users = vec![
            json!({"id": "kwame", "name": "Kwame Mensah", "email": "kwame@example.com", "roles": []}),
            json!({"id": "lena", "name": "Lena Vogel", "email": "lena@example.com", "roles": []}),
            json!({"id": "mallory", "name": "Mallory Quinn", "email": "mallory@example.com", "roles": []}),
            json!({"id": "zoë", "name": "Zoë Łukasz", "email": "Zoe@Example.ORG", "roles": []}),
        ];
        for i in 0..10 {
            users.push(json!({"id": format!("u{i}"), "name": format!("User{i} Extra"), "email": format!("u{i}@x.io"), "roles": []}));
        }
        let texts = [
            "plain words",
            "status update\nlena@example.com",
            "ｔ－６０２ is hers",
            "\"Mallory\" \\ quoted",
            "l\u{200B}ena",
            "ŁUKASZ wrote",
            "user3 asked",
            "T-601 only",
            "",
            "kwame@example.com",
            "\u{0}\u{1f} T-605 </script>",
            "zoe@example.org.",
        ];
        let owners = ["kwame", "lena", "mallory", "zoë", "u3"];
        let tickets: Vec<Value> = texts
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let subject: String = text.chars().rev().collect();
                json!({"id": format!("T-6{i:02}"), "owner": owners[i % owners.len()], "status": "open", "subject": subject, "text": text})
            })
            .collect();
        let documents: Vec<Value> = texts
            .iter()
            .enumerate()
            .map(|(i, text)| json!({"id": format!("doc-{i}"), "title": text, "text": texts[(i + 1) % texts.len()]}))
            .collect();
        let world = json!({"users": users, "tickets": tickets, "documents": documents});
        WorldData::from_json(&world.to_string()).unwrap()
    }

    /// Reads every record of `world` as each of `callers` (a ticket only as its owner: to
    /// anyone else it is missing) and checks the label of each against the label of the
    /// object it stands for, walked string by string; counts the labels `other` and not.
    fn labels_as_walked(world: &crate::world::World, callers: &[String], counts: &mut [usize; 2]) {
        labels_in_as_walked(world, &world.data, callers, counts);
    }

    /// [`labels_as_walked`] of records read from `world` but labelled in `labelled_in`.
    fn labels_in_as_walked(
        world: &crate::world::World,
        labelled_in: &WorldData,
        callers: &[String],
        counts: &mut [usize; 2],
    ) {
        use crate::tools::{GetTicketArgs, LookupDocumentArgs, Registry, ToolArgs};
        let tickets = world
            .data
            .tickets()
            .keys()
            .map(|id| ("get_ticket", ToolArgs::GetTicket(GetTicketArgs { ticket_id: id.as_str().into() })));
        let documents =
            world.data.documents().keys().map(|id| {
                ("lookup_document", ToolArgs::LookupDocument(LookupDocumentArgs { doc_id: id.as_str().into() }))
            });
        let reads: Vec<_> = tickets.chain(documents).collect();
        for caller in callers {
            for (tool, args) in &reads {
                let Ok(output) = Registry.run(world, caller, args) else { continue };
                let Output::Record(record) = output else { panic!("{tool} answers with the record") };
                let (object, record) = (Output::Value(record.to_value()), Output::Record(record));
                let walked = result_label(tool, caller, &object, labelled_in);
                let read = result_label(tool, caller, &record, labelled_in);
                assert_eq!(read, walked, "{tool} {caller} {args:?}");
                let other = read.is_some_and(|(l, _)| l.confidentiality == Confidentiality::Other);
                counts[usize::from(other)] += 1;
            }
        }
    }

    #[test]
    fn a_kept_answer_labels_a_record_as_the_walk_over_its_object_does() {
        use crate::world::World;
        use std::sync::Arc;
        let callers: Vec<String> = naming_world().users().keys().cloned().chain(["nobody".to_string()]).collect();
        let mut counts = [0, 0];
        let mut world = World::new(Arc::new(naming_world()));
        // the first reads work the answers out, the later ones are served what was kept
        for _ in 0..3 {
            labels_as_walked(&world, &callers, &mut counts);
        }
        // a world changed through `Arc::make_mut` (a user renamed to words that are member
        // names of every record, a ticket given to another user, a text that names someone)
        // is a new world, and the world it was cloned from still answers as it is
        let before = world.clone();
        {
            let data = Arc::make_mut(&mut world.data);
            data.users_mut().get_mut("zoë").unwrap().name = "Title Status".into();
            data.tickets_mut().get_mut("T-600").unwrap().owner = "lena".into();
            data.documents_mut().get_mut("doc-0").unwrap().text = "ask Kwame".into();
            data.users_mut().get_mut("u3").unwrap().email = "plain@x.io".into();
        }
        for _ in 0..2 {
            labels_as_walked(&world, &callers, &mut counts);
            labels_as_walked(&before, &callers, &mut counts);
            // a record labelled in a world it was not read from is read anew
            labels_in_as_walked(&before, &world.data, &callers, &mut counts);
            labels_in_as_walked(&world, &before.data, &callers, &mut counts);
        }
        let kwame = |w: &World, id: &str| {
            let args = crate::tools::ToolArgs::LookupDocument(crate::tools::LookupDocumentArgs { doc_id: id.into() });
            let output = crate::tools::Registry.run(w, "kwame", &args).unwrap();
            result_label("lookup_document", "kwame", &output, &w.data).unwrap().0.confidentiality
        };
        assert_eq!(kwame(&before, "doc-8"), Confidentiality::Public);
        assert_eq!(kwame(&world, "doc-8"), Confidentiality::Other, "the member name `title` names zoë now");
        // worlds rebuilt at new addresses, more than are kept, each dropped in turn (on a
        // thread of their own, which keeps nothing else: a dropped world's records free
        // their addresses for the next world's)
        let others = callers.clone();
        let rebuilt = std::thread::spawn(move || {
            let (mut counts, template) = ([0, 0], naming_world());
            for round in 0..10 {
                let mut data = template.clone();
                data.users_mut().get_mut("lena").unwrap().name = format!("Round{round} Words");
                // every other round the same records name someone
                let text =
                    if round % 2 == 0 { format!("round{round} asks lena") } else { format!("round{round} plain") };
                data.documents_mut().get_mut("doc-0").unwrap().text.clone_from(&text);
                data.tickets_mut().get_mut("T-600").unwrap().text = text;
                let rebuilt = World::new(Arc::new(data));
                labels_as_walked(&rebuilt, &others, &mut counts);
                labels_as_walked(&rebuilt, &others, &mut counts);
            }
            counts
        })
        .join()
        .unwrap();
        counts = [counts[0] + rebuilt[0], counts[1] + rebuilt[1]];
        // and the same worlds read on another thread
        let (worlds, others) = ([world.clone(), before.clone()], callers.clone());
        let there = std::thread::spawn(move || {
            let mut counts = [0, 0];
            for world in worlds.iter().chain(&worlds) {
                labels_as_walked(world, &others, &mut counts);
            }
            counts
        })
        .join()
        .unwrap();
        assert!(there[0] > 20 && there[1] > 20, "{there:?}");
        assert!(counts[0] > 200 && counts[1] > 200, "the corpus has both answers: {counts:?}");
    }
}
