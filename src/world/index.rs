//! What the world knows of whose data a text names, built once from the world and owned by
//! it: every word that points at a user (their id, the words of their name, their e-mail
//! address, the ids of their tickets) with the users it points at, and for each record the
//! text a tool answers with and the users it names. The memory rules, the gate's result
//! labels and the single agent's finish check read texts with it.
//!
//! [`WorldData`](super::WorldData) builds its [`WorldIndex`] the first time it is asked and
//! drops it on any change (its `*_mut` accessors), so the index always describes the world
//! it sits in: nothing is kept per thread, by address or process-wide.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, LazyLock, OnceLock};

use super::WorldData;
use crate::security::fold;

/// The bundled world, read once for the checks that have no world of their own.
static BUNDLED: LazyLock<Option<WorldData>> = LazyLock::new(|| WorldData::bundled().ok());

/// A user by position in [`WorldIndex::users`].
type UserAt = u32;

/// A word that points at users, lower case.
#[derive(Debug)]
struct Word {
    text: String,
    /// The users it points at (positions, ascending): a name word two users share points
    /// at both.
    users: Vec<UserAt>,
}

/// The index of one world; see the module's note.
#[derive(Debug)]
pub(crate) struct WorldIndex {
    /// User ids in the world's order (by id, so searchable).
    users: Vec<String>,
    /// Every word but the empty one, ordered by length, then bytes: a word of a text is
    /// looked up among those of its length only, byte for byte.
    words: Vec<Word>,
    /// Bit `n` (n < 63) or bit 63 (longer) set when a word has `n` bytes.
    lens: u64,
    /// [`FIRST`] set at the first byte of a word, [`LAST`] at its last byte (an ASCII
    /// letter in both cases, so a word of a text is tested before it is lowered).
    ends: [u8; 256],
    /// What tools answered of each ticket, by id.
    tickets: BTreeMap<String, RecordIndex>,
    /// What tools answered of each document, by id.
    documents: BTreeMap<String, RecordIndex>,
}

/// What the world keeps of one record as the one tool that reads it answers it: its result
/// text, and the users a member of that result names, each worked out when first asked.
#[derive(Debug, Default)]
pub(crate) struct RecordIndex {
    text: OnceLock<Arc<str>>,
    names: OnceLock<Box<[UserAt]>>,
}

impl RecordIndex {
    /// The record's result text: `write()` the first time, the same text after that.
    pub(crate) fn text(&self, write: impl FnOnce() -> String) -> Arc<str> {
        self.text.get_or_init(|| Arc::from(write())).clone()
    }

    /// True when the record's result names a user other than `caller`. `strings` gives
    /// every member name and value of the result; they are read once per record, for
    /// every caller.
    pub(crate) fn names_other_than<'s>(
        &self,
        index: &WorldIndex,
        caller: &str,
        strings: impl FnOnce() -> Vec<&'s str>,
    ) -> bool {
        let names = self.names.get_or_init(|| {
            let mut named = BTreeSet::new();
            for text in strings() {
                index.each_word_in(text, &mut |w| {
                    named.extend(w.users.iter().copied());
                    false
                });
            }
            named.into_iter().collect()
        });
        let caller = index.user_at(caller);
        names.iter().any(|u| Some(*u) != caller)
    }
}

/// Longest word (in bytes) lowered on the stack before it is looked up; a longer one is
/// lowered into a new string.
const LOWERED_ON_STACK: usize = 64;

impl WorldIndex {
    pub(super) fn new(world: &WorldData) -> Self {
        let users: Vec<String> = world.users.keys().cloned().collect();
        let at = |id: &str| position_of(&users, id);
        let mut owners: BTreeMap<String, BTreeSet<UserAt>> = BTreeMap::new();
        let mut add = |word: String, user: Option<UserAt>| {
            if let (false, Some(user)) = (word.is_empty(), user) {
                owners.entry(word).or_default().insert(user);
            }
        };
        for u in world.users.values() {
            let user = at(&u.id);
            add(u.id.to_lowercase(), user);
            add(u.email.to_lowercase(), user);
            for w in u.name.split_whitespace().filter(|w| w.chars().count() >= 3) {
                add(w.to_lowercase(), user);
            }
        }
        for t in world.tickets.values() {
            add(t.id.to_lowercase(), at(&t.owner));
        }
        let mut words: Vec<Word> =
            owners.into_iter().map(|(text, users)| Word { text, users: users.into_iter().collect() }).collect();
        words.sort_by(|a, b| a.text.len().cmp(&b.text.len()).then_with(|| a.text.cmp(&b.text)));
        let (mut lens, mut ends) = (0u64, [0u8; 256]);
        for w in &words {
            lens |= len_bit(w.text.len());
            for (byte, flag) in [(w.text.bytes().next(), FIRST), (w.text.bytes().next_back(), LAST)] {
                if let Some(b) = byte {
                    ends[usize::from(b)] |= flag;
                    ends[usize::from(b.to_ascii_uppercase())] |= flag;
                }
            }
        }
        let records =
            |ids: &mut dyn Iterator<Item = &String>| ids.map(|id| (id.clone(), RecordIndex::default())).collect();
        Self {
            tickets: records(&mut world.tickets.keys()),
            documents: records(&mut world.documents.keys()),
            users,
            words,
            lens,
            ends,
        }
    }

    /// The position of user `id`; `None` for someone who is not a user of the world.
    fn user_at(&self, id: &str) -> Option<UserAt> {
        position_of(&self.users, id)
    }

    /// What the world keeps of ticket `id` as `get_ticket` answers it.
    pub(crate) fn ticket(&self, id: &str) -> Option<&RecordIndex> {
        self.tickets.get(id)
    }

    /// What the world keeps of document `id` as `lookup_document` answers it.
    pub(crate) fn document(&self, id: &str) -> Option<&RecordIndex> {
        self.documents.get(id)
    }

    /// The words that point at a user other than `caller`, to read texts with.
    pub(crate) fn other_words<'i>(&'i self, caller: &str) -> OtherWords<'i> {
        OtherWords { index: self, caller: self.user_at(caller) }
    }

    /// True when a word of `len` bytes, first byte `first` and last byte `last` (in any
    /// ASCII case) may be one of the words: false rules it out without a lookup.
    fn may_hold(&self, len: usize, first: u8, last: u8) -> bool {
        self.ends[usize::from(first)] & FIRST != 0
            && self.ends[usize::from(last)] & LAST != 0
            && self.lens & len_bit(len) != 0
    }

    /// The word equal to `word` (lower case), if it is one of the words.
    fn get(&self, word: &[u8]) -> Option<&Word> {
        let (Some(&first), Some(&last)) = (word.first(), word.last()) else { return None };
        if !self.may_hold(word.len(), first, last) {
            return None;
        }
        let from = self.words.partition_point(|w| w.text.len() < word.len());
        self.words[from..].iter().take_while(|w| w.text.len() == word.len()).find(|w| w.text.as_bytes() == word)
    }

    /// Calls `found` with each word of `text` (folded, compared in lower case) that is one
    /// of the words, in the text's order, until it answers true; true when it did.
    fn each_word_in<'s>(&'s self, text: &str, found: &mut dyn FnMut(&'s Word) -> bool) -> bool {
        if text.is_ascii() {
            return self.each_word_in_ascii(text, found);
        }
        let folded = fold(text).to_lowercase();
        folded.split(|c: char| !in_word(c)).map(trimmed).filter_map(|w| self.get(w.as_bytes())).any(found)
    }

    /// [`WorldIndex::each_word_in`] of an ASCII `text`: folding leaves it as it is and
    /// lower case splits it at the same places, so each word is read in place, in one pass
    /// over the bytes; a word whose first byte starts none of the words is passed over
    /// without finding its end twice, and only a word that may be one of them is lowered
    /// (on the stack) and looked up.
    fn each_word_in_ascii<'s>(&'s self, text: &str, found: &mut dyn FnMut(&'s Word) -> bool) -> bool {
        let bytes = text.as_bytes();
        let class = |i: usize| bytes.get(i).map_or(0, |b| BYTE[usize::from(*b)]);
        let mut i = 0;
        loop {
            while i < bytes.len() && class(i) & WORD == 0 {
                i += 1;
            }
            if i >= bytes.len() {
                return false;
            }
            // the bytes trimming takes off the front of the word
            while class(i) & TRIM != 0 {
                i += 1;
            }
            let Some(&first) = bytes.get(i).filter(|_| class(i) & WORD != 0) else { continue };
            let start = i;
            while class(i) & WORD != 0 {
                i += 1;
            }
            if self.ends[usize::from(first)] & FIRST == 0 {
                continue;
            }
            // and off its end (not past its first byte, which trimming keeps)
            let mut end = i;
            while end > start + 1 && class(end - 1) & TRIM != 0 {
                end -= 1;
            }
            let word = &bytes[start..end];
            if !self.may_hold(word.len(), first, bytes[end - 1]) {
                continue;
            }
            let mut stack = [0u8; LOWERED_ON_STACK];
            let hit = match stack.get_mut(..word.len()) {
                Some(lower) => {
                    lower.copy_from_slice(word);
                    lower.make_ascii_lowercase();
                    self.get(lower)
                }
                None => self.get(&word.to_ascii_lowercase()),
            };
            if hit.is_some_and(&mut *found) {
                return true;
            }
        }
    }
}

/// The words that point at users other than one caller of one world
/// ([`WorldData::other_words`]), to read several texts with one lookup of the caller.
#[derive(Clone, Copy)]
pub(crate) struct OtherWords<'i> {
    index: &'i WorldIndex,
    caller: Option<UserAt>,
}

impl<'i> OtherWords<'i> {
    /// The first word of `text` (folded, compared in lower case) that points at a user
    /// other than the caller, as the index holds it (lower case).
    pub(crate) fn first_in(&self, text: &str) -> Option<&'i str> {
        let mut first = None;
        self.index.each_word_in(text, &mut |w| {
            let other = w.users.iter().any(|u| Some(*u) != self.caller);
            if other {
                first = Some(w.text.as_str());
            }
            other
        });
        first
    }
}

/// The position of user `id` among `users` (ordered by id).
fn position_of(users: &[String], id: &str) -> Option<UserAt> {
    users.binary_search_by(|u| u.as_str().cmp(id)).ok().and_then(|i| UserAt::try_from(i).ok())
}

fn len_bit(n: usize) -> u64 {
    1 << n.min(63)
}

/// [`WorldIndex::ends`] flag of a first byte.
const FIRST: u8 = 1;
/// [`WorldIndex::ends`] flag of a last byte.
const LAST: u8 = 2;

/// A character that belongs to a word (what the text is split on is everything else).
fn in_word(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '-' | '@' | '.' | '_' | '+')
}

/// [`BYTE`] bit of a byte [`in_word`] keeps in a word (no byte of ASCII text but these).
const WORD: u8 = 1;
/// [`BYTE`] bit of a byte [`trimmed`] takes off a word's ends.
const TRIM: u8 = 2;

/// [`WORD`] and [`TRIM`] of every byte.
static BYTE: [u8; 256] = {
    let mut t = [0; 256];
    let mut b = 0;
    while b < 256 {
        if ASCII_WORD[b] {
            t[b] = WORD;
        }
        if matches!(b as u8, b'.' | b'-' | b'_') {
            t[b] |= TRIM;
        }
        b += 1;
    }
    t
};

/// The bytes [`in_word`] keeps in a word, for ASCII text (no other byte is in a word).
const ASCII_WORD: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 128 {
        t[b] = (b as u8).is_ascii_alphanumeric() || matches!(b as u8, b'-' | b'@' | b'.' | b'_' | b'+');
        b += 1;
    }
    t
};

/// The words of an ASCII `text`, trimmed, as `text.split(|c| !in_word(c)).map(trimmed)`
/// gives them but without the empty ones.
#[cfg(test)]
fn ascii_words(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        loop {
            while i < bytes.len() && !ASCII_WORD[usize::from(bytes[i])] {
                i += 1;
            }
            if i >= bytes.len() {
                return None;
            }
            let mut start = i;
            while i < bytes.len() && ASCII_WORD[usize::from(bytes[i])] {
                i += 1;
            }
            // trimmed as [`trimmed`] does, on the bytes
            let mut end = i;
            while start < end && matches!(bytes[start], b'.' | b'-' | b'_') {
                start += 1;
            }
            while start < end && matches!(bytes[end - 1], b'.' | b'-' | b'_') {
                end -= 1;
            }
            if start < end {
                // the bounds are ASCII bytes, so character boundaries
                return text.get(start..end);
            }
        }
    })
}

/// A word without the punctuation that may end a sentence or join it to the next.
fn trimmed(w: &str) -> &str {
    w.trim_matches(|c: char| matches!(c, '.' | '-' | '_'))
}

impl WorldData {
    /// The lower-case words that point at a user other than `user`: ids, name words of
    /// three letters or more, e-mail addresses, and the ids of tickets they own.
    pub fn foreign_words(&self, user: &str) -> BTreeSet<String> {
        let mut words = BTreeSet::new();
        for u in self.users.values().filter(|u| u.id != user) {
            words.insert(u.id.to_lowercase());
            words.insert(u.email.to_lowercase());
            words.extend(u.name.split_whitespace().filter(|w| w.chars().count() >= 3).map(str::to_lowercase));
        }
        for t in self.tickets.values().filter(|t| t.owner != user) {
            words.insert(t.id.to_lowercase());
        }
        words
    }

    /// The first word of `text` (folded, compared in lower case) that points at a user
    /// other than `user`; `None` when it names nobody else.
    pub fn names_other_user(&self, user: &str, text: &str) -> Option<String> {
        self.other_words(user).first_in(text).map(str::to_string)
    }

    /// The words that point at a user other than `user`, to read several texts with
    /// [`OtherWords::first_in`] (each answers as [`WorldData::names_other_user`]).
    pub(crate) fn other_words(&self, user: &str) -> OtherWords<'_> {
        self.index().other_words(user)
    }
}

/// [`WorldData::names_other_user`] over the bundled world (false when it does not load,
/// which a test rules out).
pub fn bundled_names_other_user(user: &str, text: &str) -> Option<String> {
    BUNDLED.as_ref().and_then(|w| w.names_other_user(user, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_users_ticket_name_or_address_is_found_in_the_text() {
        let w = WorldData::bundled().unwrap();
        assert_eq!(w.names_other_user("kwame", "T-603 status is closed"), Some("t-603".into()));
        assert_eq!(w.names_other_user("kwame", "ask Lena about it."), Some("lena".into()));
        assert_eq!(w.names_other_user("kwame", "mail lena@example.com"), Some("lena@example.com".into()));
        assert_eq!(w.names_other_user("kwame", "ｔ－６０３ is hers"), Some("t-603".into()));
        assert_eq!(w.names_other_user("kwame", "T-601 status is open"), None);
        assert_eq!(w.names_other_user("lena", "T-603 status is open"), None);
        assert_eq!(w.names_other_user("kwame", "the lenient policy"), None);
        assert!(bundled_names_other_user("kwame", "T-603").is_some());
    }

    /// The reference reading: the words built anew for every text, the whole text folded
    /// and lowered first.
    fn read_anew(w: &WorldData, user: &str, text: &str) -> Option<String> {
        let foreign = w.foreign_words(user);
        let folded = fold(text).to_lowercase();
        folded
            .split(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '@' | '.' | '_' | '+')))
            .map(|w| w.trim_matches(|c: char| matches!(c, '.' | '-' | '_')))
            .find(|w| !w.is_empty() && foreign.contains(*w))
            .map(str::to_string)
    }

    #[test]
    fn indexed_words_answer_as_words_read_anew() {
        let w = WorldData::bundled().unwrap();
        let texts = [
            "T-603 status is closed",
            "t-603.",
            "--T-603--",
            "_Lena_ and MALLORY",
            "write to Lena@Example.COM today",
            "lena@example.com.",
            "Vogel, Quinn; Mensah",
            "T-601 status is open; kc-returns-v3 is titled Returns and refunds (v3)",
            r#"{"id":"T-602","owner":"kwame","status":"open","text":"ask lena"}"#,
            "ｔ－６０３ is hers",
            "ＬＥＮＡ wrote",
            "Łena Vögel T‐603",
            "l\u{200B}ena",
            "",
            "...",
            "lenient kwame T-6030 mallory1",
            "a\nlena\tT-603\r\"mallory\" (quinn) <lena@example.com>, +lena+ @lena@ .-_",
            "._-T-603-_. .lena. _ - . ..x.. -a- x.-.y",
        ];
        for user in ["kwame", "lena", "mallory", "nobody"] {
            for text in texts {
                assert_eq!(w.names_other_user(user, text), read_anew(&w, user, text), "{user}: {text:?}");
                let words: Vec<&str> =
                    text.split(|c: char| !in_word(c)).map(trimmed).filter(|w| !w.is_empty()).collect();
                if text.is_ascii() {
                    assert_eq!(ascii_words(text).collect::<Vec<_>>(), words, "{text:?}");
                }
            }
        }
    }

    #[test]
    fn words_looked_up_by_length_and_end_bytes_answer_as_words_read_anew() {
        // words of the same length, a word longer than the stack buffer, words that no
        // word of a text can be (an apostrophe, a trailing dot, an empty address), digits
        // that share their low bits with letters, and names that lower case changes
        let long = format!("{}@example.com", "x".repeat(70));
        let world = serde_json::json!({
            "users": [
                {"id": "ann", "name": "Ann O'Brien Jr.", "email": "", "roles": []},
                {"id": "bob", "name": "Bob Ebo Obe Boe", "email": long, "roles": []},
                {"id": "p4", "name": "Qxy Pqrs 123456", "email": "p+4@x.io", "roles": []},
                {"id": "zoe", "name": "\u{212A}elvin ÉMILE Łukasz", "email": "Zoe@Example.COM", "roles": []}
            ],
            "tickets": [
                {"id": "T-1", "owner": "ann", "status": "open", "subject": "s", "text": "t"},
                {"id": "T-2", "owner": "bob", "status": "open", "subject": "s", "text": "t"},
                {"id": "A-1", "owner": "zoe", "status": "open", "subject": "s", "text": "t"}
            ],
            "documents": []
        });
        let w = WorldData::from_json(&world.to_string()).unwrap();
        let long_upper = long.to_uppercase();
        let texts = [
            "ann bob obe boe ebo",
            "Ebo, OBE; boe.",
            "o'brien o brien jr. jr",
            "123456 1234567 p4 P4. p+4@x.io +p+4@x.io+",
            "qxy pqrs 4xy 6xy tqrs",
            long.as_str(),
            long_upper.as_str(),
            "kelvin \u{212A}elvin émile ÉMILE łukasz",
            "zoe@example.com. ZOE@EXAMPLE.COM",
            "t-1 T-2 a-1 A-1. -a-1- t-12",
            "the them then than lena",
            "",
            "@ + . - _ @@ ++",
        ];
        for user in ["ann", "bob", "p4", "zoe", "nobody"] {
            for text in texts {
                assert_eq!(w.names_other_user(user, text), read_anew(&w, user, text), "{user}: {text:?}");
                let words = w.other_words(user);
                assert_eq!(words.first_in(text).map(str::to_string), read_anew(&w, user, text), "{user}: {text:?}");
            }
        }
    }

    #[test]
    fn a_world_changed_in_place_is_read_anew() {
        let mut w = WorldData::bundled().unwrap();
        assert_eq!(w.names_other_user("kwame", "T-601 status is open"), None);
        w.tickets_mut().get_mut("T-601").unwrap().owner = "lena".into();
        assert_eq!(w.names_other_user("kwame", "T-601 status is open"), Some("t-601".into()));
        w.users_mut().get_mut("lena").unwrap().name = "Lena Okafor".into();
        assert_eq!(w.names_other_user("kwame", "ask okafor"), Some("okafor".into()));
        assert_eq!(w.names_other_user("kwame", "ask vogel"), None);
        w.users_mut().get_mut("lena").unwrap().email = "l.okafor@example.org".into();
        assert_eq!(w.names_other_user("kwame", "to l.okafor@example.org"), Some("l.okafor@example.org".into()));
        let mut other = w.clone();
        other.users_mut().remove("mallory");
        assert_eq!(other.names_other_user("kwame", "mallory"), None);
        assert_eq!(w.names_other_user("kwame", "mallory"), Some("mallory".into()));
    }

    /// Pieces of texts: the words of the test worlds in several cases, parts and
    /// extensions of them, words that hold one another, every byte a word is split on or
    /// trimmed of, and non-ASCII look-alikes.
    const PIECES: &[&str] = &[
        "lena",
        "LENA",
        "Lena",
        "len",
        "enа",
        "lenient",
        "vogel",
        "VOGEL",
        "mallory",
        "Mallory",
        "quinn",
        "mensah",
        "kwame",
        "t-603",
        "T-603",
        "T-6030",
        "t-60",
        "-603",
        "lena@example.com",
        "LENA@EXAMPLE.COM",
        "@example.com",
        "lena@",
        "mallory@example.com",
        "x",
        "1",
        "T",
        "ann",
        "anna",
        "o'brien",
        "brien",
        "ebo",
        "obe",
        "boe",
        "bob",
        "p+4@x.io",
        "p4",
        "+",
        "@",
        ".",
        "..",
        "-",
        "--",
        "_",
        "'",
        " ",
        "\n",
        "\t",
        "\"",
        ",",
        ";",
        "(",
        ")",
        "<",
        ">",
        "é",
        "ｔ－６０３",
        "\u{200B}",
        "\u{212A}",
        "日本",
    ];

    fn piece_text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop::collection::vec(prop::sample::select(PIECES), 0..12).prop_map(|v| v.concat())
    }

    /// A world with words inside words, a long address, and words no word of a text can be.
    fn nested_world() -> WorldData {
        let long = format!("{}@example.com", "y".repeat(70));
        let world = serde_json::json!({
            "users": [
                {"id": "ann", "name": "Anna O'Brien Ebo", "email": "anna@ann.io", "roles": []},
                {"id": "bob", "name": "Bob Obe Boe", "email": "p+4@x.io", "roles": []},
                {"id": "zed", "name": "Zed", "email": "-zed-@x.io", "roles": []},
                {"id": "yy", "name": "Yves", "email": long, "roles": []}
            ],
            "tickets": [
                {"id": "T-60", "owner": "ann", "status": "open", "subject": "s", "text": "t"},
                {"id": "T-603", "owner": "bob", "status": "open", "subject": "s", "text": "t"}
            ],
            "documents": []
        });
        WorldData::from_json(&world.to_string()).unwrap()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 3000, ..Default::default() })]

        #[test]
        fn one_pass_over_the_bytes_finds_the_word_read_anew_finds(text in piece_text()) {
            let bundled = WorldData::bundled().unwrap();
            let nested = nested_world();
            let long = format!("{text} {}@example.COM. x", "Y".repeat(70));
            for (w, user) in [(&bundled, "kwame"), (&bundled, "lena"), (&nested, "ann"), (&nested, "bob"), (&nested, "nobody")] {
                for text in [text.as_str(), long.as_str()] {
                    let words = w.other_words(user);
                    let anew = read_anew(w, user, text);
                    proptest::prop_assert_eq!(words.first_in(text).map(str::to_string), anew, "{}: {:?}", user, text);
                }
            }
        }
    }

    /// Texts that name each user of the bundled world in each way, or nobody.
    const NAMING: [&str; 8] = [
        "T-603 status is closed",
        "ask Lena about it.",
        "mail lena@example.com",
        "Kwame Mensah wrote",
        "zora@example.org and Zora Quist",
        "T-601 and T-602",
        "the lenient policy",
        "ｔ－６０３ is hers",
    ];

    #[test]
    fn the_index_belongs_to_its_world_and_a_change_drops_it() {
        let mut world = crate::world::World::new(Arc::new(WorldData::bundled().unwrap()));
        assert!(std::ptr::eq(world.data.index(), world.data.index()), "built once");
        for text in NAMING {
            let words = world.data.other_words("kwame");
            assert_eq!(words.first_in(text).map(str::to_string), read_anew(&world.data, "kwame", text), "{text:?}");
        }
        // nothing outside the world holds on to it: the world may be changed in place
        let data = Arc::get_mut(&mut world.data).expect("no one else holds the world");
        let lena = data.users_mut().get_mut("lena").unwrap();
        (lena.name, lena.email) = ("Zora Quist".into(), "zora@example.org".into());
        let after = world.data.other_words("kwame");
        assert_eq!(after.first_in("ask Zora"), Some("zora"));
        assert_eq!(after.first_in("Lena Vogel"), Some("lena"), "her id is still a word of hers");
        assert_eq!(after.first_in("Vogel only"), None);
        for user in ["kwame", "lena", "mallory", "nobody"] {
            for text in NAMING {
                let words = world.data.other_words(user);
                assert_eq!(words.first_in(text).map(str::to_string), read_anew(&world.data, user, text), "{text:?}");
            }
        }
    }

    #[test]
    fn a_record_is_answered_from_what_its_world_holds_now() {
        let mut data = WorldData::bundled().unwrap();
        let index = data.index();
        let doc = index.document("kc-returns-v3").unwrap();
        assert!(!doc.names_other_than(index, "kwame", || vec!["returns", "within 30 days"]));
        assert_eq!(&*doc.text(|| "first".into()), "first");
        assert_eq!(&*doc.text(|| "second".into()), "first", "written once");
        data.documents_mut().get_mut("kc-returns-v3").unwrap().text = "ask lena".into();
        let index = data.index();
        let doc = index.document("kc-returns-v3").unwrap();
        assert_eq!(&*doc.text(|| "second".into()), "second", "a changed world is indexed anew");
        assert!(doc.names_other_than(index, "kwame", || vec!["ask lena"]));
        assert!(!doc.names_other_than(index, "lena", || unreachable!("the names are worked out once")));
    }
}
