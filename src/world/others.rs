//! Whose data a text names: the words that point at another user (their id, the words of
//! their name, their e-mail address, the ids of their tickets). The memory rules and the
//! single agent's finish check read the text with it, not only a field that says whom the
//! text is about.
//!
//! The words of one user in one world are built once per thread and kept with a copy of
//! what they were built from (every user's id, name and address, every ticket's id and
//! owner): a later question uses them only when the world still holds exactly that, so a
//! world changed in place is read anew.
//!
//! A world a [`World`](super::World) was made over is shared behind an `Arc`; the thread
//! notes it by a [`Weak`] pointer, and words built from a noted world keep that pointer.
//! While it is held the world cannot change: the allocation is not freed (no other world
//! takes its address), [`Arc::get_mut`] refuses it and [`Arc::make_mut`] moves it. So the
//! words answer for a world at that very address without comparing what they were built
//! from; any other world is compared as above.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};

use super::WorldData;
use crate::security::fold;

/// The bundled world, read once for the checks that have no world of their own.
static BUNDLED: LazyLock<Option<WorldData>> = LazyLock::new(|| WorldData::bundled().ok());

/// Most (world, user) word sets a thread keeps.
const KEPT: usize = 4;

/// The foreign words of `user` in a world, with what they were built from.
struct Foreign {
    user: String,
    /// The shared world the words were built from, when the thread had noted it
    /// ([`note_shared`]): held so that the world cannot change while the words are kept.
    shared: Option<Weak<WorldData>>,
    /// `(id, name, email)` of every user, in the world's order.
    users: Vec<[String; 3]>,
    /// `(id, owner)` of every ticket, in the world's order.
    tickets: Vec<[String; 2]>,
    /// [`WorldData::foreign_words`] of `user` but the empty one (no word of a text is
    /// empty), ordered by length, then bytes: a word is looked up among those of its
    /// length only, byte for byte (a set of a handful of words, searched in order, would
    /// compare a word with most of them).
    words: Vec<String>,
    /// Bit `n` (n < 63) or bit 63 (longer) set when a word has `n` bytes.
    lens: u64,
    /// [`FIRST`] set at the first byte of a word, [`LAST`] at its last byte (an ASCII
    /// letter in both cases, so a word of a text is tested before it is lowered).
    ends: [u8; 256],
}

/// Longest word (in bytes) lowered on the stack before it is looked up; a longer one is
/// lowered into a new string.
const LOWERED_ON_STACK: usize = 64;

impl Foreign {
    fn new(world: &WorldData, user: &str) -> Self {
        let mut words: Vec<String> = world.foreign_words(user).into_iter().filter(|w| !w.is_empty()).collect();
        words.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
        let (mut lens, mut ends) = (0u64, [0u8; 256]);
        for w in &words {
            lens |= len_bit(w.len());
            for (byte, flag) in [(w.bytes().next(), FIRST), (w.bytes().next_back(), LAST)] {
                if let Some(b) = byte {
                    ends[usize::from(b)] |= flag;
                    ends[usize::from(b.to_ascii_uppercase())] |= flag;
                }
            }
        }
        Self {
            user: user.to_string(),
            shared: shared_weak(world),
            users: world.users.values().map(|u| [u.id.clone(), u.name.clone(), u.email.clone()]).collect(),
            tickets: world.tickets.values().map(|t| [t.id.clone(), t.owner.clone()]).collect(),
            words,
            lens,
            ends,
        }
    }

    /// True when these words are `user`'s in `world` as it is now.
    fn holds(&self, world: &WorldData, user: &str) -> bool {
        self.user == user && (self.built_from(world) || self.built_as(world))
    }

    /// True when `world` is the shared world these words were built from and hold: it is
    /// unchanged since (see the module's note).
    fn built_from(&self, world: &WorldData) -> bool {
        self.shared.as_ref().is_some_and(|w| std::ptr::eq(w.as_ptr(), world))
    }

    /// True when `world` holds the users and tickets these words were built from.
    fn built_as(&self, world: &WorldData) -> bool {
        self.users.len() == world.users.len()
            && self.tickets.len() == world.tickets.len()
            && world
                .users
                .values()
                .zip(&self.users)
                .all(|(u, [id, name, email])| u.id == *id && u.name == *name && u.email == *email)
            && world.tickets.values().zip(&self.tickets).all(|(t, [id, owner])| t.id == *id && t.owner == *owner)
    }

    /// True when a word of `len` bytes, first byte `first` and last byte `last` (in any
    /// ASCII case) may be one of the words: false rules it out without a lookup.
    fn may_hold(&self, len: usize, first: u8, last: u8) -> bool {
        self.ends[usize::from(first)] & FIRST != 0
            && self.ends[usize::from(last)] & LAST != 0
            && self.lens & len_bit(len) != 0
    }

    /// The word equal to `word` (lower case), if it is one of the words.
    fn get(&self, word: &[u8]) -> Option<&str> {
        let (Some(&first), Some(&last)) = (word.first(), word.last()) else { return None };
        if !self.may_hold(word.len(), first, last) {
            return None;
        }
        let from = self.words.partition_point(|w| w.len() < word.len());
        self.words[from..]
            .iter()
            .take_while(|w| w.len() == word.len())
            .find(|w| w.as_bytes() == word)
            .map(String::as_str)
    }

    /// The first word of `text` (folded, compared in lower case) that is one of the words.
    fn first_in(&self, text: &str) -> Option<&str> {
        if text.is_ascii() {
            return self.first_in_ascii(text);
        }
        let folded = fold(text).to_lowercase();
        folded.split(|c: char| !in_word(c)).map(trimmed).find_map(|w| self.get(w.as_bytes()))
    }

    /// [`Foreign::first_in`] of an ASCII `text`: folding leaves it as it is and lower case
    /// splits it at the same places, so each word is read in place, in one pass over the
    /// bytes; a word whose first byte starts none of the words is passed over without
    /// finding its end twice, and only a word that may be one of them is lowered (on the
    /// stack) and looked up.
    fn first_in_ascii(&self, text: &str) -> Option<&str> {
        let bytes = text.as_bytes();
        let class = |i: usize| bytes.get(i).map_or(0, |b| BYTE[usize::from(*b)]);
        let mut i = 0;
        loop {
            while i < bytes.len() && class(i) & WORD == 0 {
                i += 1;
            }
            if i >= bytes.len() {
                return None;
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
            let last = bytes[end - 1];
            if !self.may_hold(word.len(), first, last) {
                continue;
            }
            let mut stack = [0u8; LOWERED_ON_STACK];
            let found = match stack.get_mut(..word.len()) {
                Some(lower) => {
                    lower.copy_from_slice(word);
                    lower.make_ascii_lowercase();
                    self.get(lower)
                }
                None => self.get(&word.to_ascii_lowercase()),
            };
            if found.is_some() {
                return found;
            }
        }
    }

    /// The ASCII reading as it was: the words split off one by one, then each tested.
    #[cfg(test)]
    fn first_in_by_words(&self, text: &str) -> Option<&str> {
        if text.is_ascii() {
            return ascii_words(text).find_map(|w| {
                let bytes = w.as_bytes();
                let (&first, &last) = (bytes.first()?, bytes.last()?);
                if !self.may_hold(bytes.len(), first, last) {
                    return None;
                }
                let mut stack = [0u8; LOWERED_ON_STACK];
                match stack.get_mut(..bytes.len()) {
                    Some(lower) => {
                        lower.copy_from_slice(bytes);
                        lower.make_ascii_lowercase();
                        self.get(lower)
                    }
                    None => self.get(w.to_ascii_lowercase().as_bytes()),
                }
            });
        }
        let folded = fold(text).to_lowercase();
        folded.split(|c: char| !in_word(c)).map(trimmed).find_map(|w| self.get(w.as_bytes()))
    }
}

/// The words that point at users other than one user of one world
/// ([`WorldData::other_words`]), to read several texts with one lookup of the kept words.
pub(crate) struct OtherWords(Rc<Foreign>);

impl OtherWords {
    /// [`WorldData::names_other_user`] of `text`, without allocating: the word found is
    /// one of the kept words.
    pub(crate) fn first_in(&self, text: &str) -> Option<&str> {
        self.0.first_in(text)
    }
}

fn len_bit(n: usize) -> u64 {
    1 << n.min(63)
}

/// [`Foreign::ends`] flag of a first byte.
const FIRST: u8 = 1;
/// [`Foreign::ends`] flag of a last byte.
const LAST: u8 = 2;

thread_local! {
    static KEPT_WORDS: RefCell<Vec<Rc<Foreign>>> = const { RefCell::new(Vec::new()) };
    /// The worlds this thread made a `World` over, by weak pointer (at most [`KEPT`]).
    static SHARED: RefCell<Vec<Weak<WorldData>>> = const { RefCell::new(Vec::new()) };
}

/// The worlds any thread noted first (at most [`KEPT`]): a world made a `World` over on one
/// thread may be read on another (a task moves between the runtime's threads).
static SHARED_ANYWHERE: Mutex<Vec<Weak<WorldData>>> = Mutex::new(Vec::new());

/// Notes `world` in `shared` unless it is there, letting the oldest go; true when it was new.
fn note_in(shared: &mut Vec<Weak<WorldData>>, world: &Arc<WorldData>) -> bool {
    if shared.iter().any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(world))) {
        return false;
    }
    if shared.len() >= KEPT {
        shared.remove(0);
    }
    shared.push(Arc::downgrade(world));
    true
}

/// Notes that `world` is shared behind an `Arc` (so that words built from it may keep a
/// [`Weak`] pointer to it): in this thread, and the first time in this thread, for all.
pub(super) fn note_shared(world: &Arc<WorldData>) {
    if SHARED.with_borrow_mut(|shared| note_in(shared, world)) {
        note_in(&mut SHARED_ANYWHERE.lock().unwrap_or_else(PoisonError::into_inner), world);
    }
}

/// A weak pointer to the noted shared world `world` is, if it is one (asked when words
/// are built, not when they are reused). A reference to a world at the address a held
/// weak pointer points at is a reference to that world: the allocation is not freed while
/// the pointer is held, and only a live value is referred to.
fn shared_weak(world: &WorldData) -> Option<Weak<WorldData>> {
    let same = |w: &&Weak<WorldData>| std::ptr::eq(w.as_ptr(), world);
    SHARED
        .with_borrow(|shared| shared.iter().find(same).cloned())
        .or_else(|| SHARED_ANYWHERE.lock().unwrap_or_else(PoisonError::into_inner).iter().find(same).cloned())
}

/// The foreign words of `user` in `world`: kept ones when the world is unchanged.
fn foreign(world: &WorldData, user: &str) -> Rc<Foreign> {
    KEPT_WORDS.with(|kept| {
        let mut kept = kept.borrow_mut();
        let found = kept.iter().find(|f| f.user == user && f.built_from(world));
        if let Some(f) = found.or_else(|| kept.iter().find(|f| f.holds(world, user))) {
            return f.clone();
        }
        let f = Rc::new(Foreign::new(world, user));
        if kept.len() >= KEPT {
            kept.remove(0);
        }
        kept.push(f.clone());
        f
    })
}

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
        foreign(self, user).first_in(text).map(str::to_string)
    }

    /// The words that point at a user other than `user`, looked up once, to read several
    /// texts with [`OtherWords::first_in`] (each answers as [`WorldData::names_other_user`]).
    pub(crate) fn other_words(&self, user: &str) -> OtherWords {
        OtherWords(foreign(self, user))
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

    /// The words as they were read before they were kept per thread: built anew for every
    /// text, the whole text folded and lowered first.
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
    fn kept_words_answer_as_words_read_anew() {
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
        w.tickets.get_mut("T-601").unwrap().owner = "lena".into();
        assert_eq!(w.names_other_user("kwame", "T-601 status is open"), Some("t-601".into()));
        w.users.get_mut("lena").unwrap().name = "Lena Okafor".into();
        assert_eq!(w.names_other_user("kwame", "ask okafor"), Some("okafor".into()));
        assert_eq!(w.names_other_user("kwame", "ask vogel"), None);
        w.users.get_mut("lena").unwrap().email = "l.okafor@example.org".into();
        assert_eq!(w.names_other_user("kwame", "to l.okafor@example.org"), Some("l.okafor@example.org".into()));
        let mut other = w.clone();
        other.users.remove("mallory");
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
                    let words = foreign(w, user);
                    let anew = read_anew(w, user, text);
                    proptest::prop_assert_eq!(words.first_in(text).map(str::to_string), anew.clone(), "{}: {:?}", user, text);
                    proptest::prop_assert_eq!(words.first_in_by_words(text).map(str::to_string), anew, "{}: {:?}", user, text);
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
    fn words_of_a_shared_world_are_kept_by_its_address_and_a_changed_world_is_read_anew() {
        let mut world = crate::world::World::new(Arc::new(WorldData::bundled().unwrap()));
        let (first, again) = (world.data.other_words("kwame"), world.data.other_words("kwame"));
        assert!(Rc::ptr_eq(&first.0, &again.0), "the kept words are reused");
        assert!(first.0.built_from(&world.data), "and known by the world's address");
        for text in NAMING {
            assert_eq!(first.first_in(text).map(str::to_string), read_anew(&world.data, "kwame", text), "{text:?}");
        }
        // the weak pointer forbids changing this world in place ...
        assert!(Arc::get_mut(&mut world.data).is_none());
        // ... so a change moves it, and the words are built from what it holds now
        let lena = Arc::make_mut(&mut world.data).users.get_mut("lena").unwrap();
        (lena.name, lena.email) = ("Zora Quist".into(), "zora@example.org".into());
        assert!(!first.0.built_from(&world.data));
        let after = world.data.other_words("kwame");
        assert!(!Rc::ptr_eq(&first.0, &after.0));
        assert_eq!(after.first_in("ask Zora"), Some("zora"));
        assert_eq!(after.first_in("Lena Vogel"), Some("lena"), "her id is still a word of hers");
        assert_eq!(after.first_in("Vogel only"), None);
        for user in ["kwame", "lena", "mallory", "nobody"] {
            for text in NAMING {
                let words = world.data.other_words(user);
                assert_eq!(words.first_in(text).map(str::to_string), read_anew(&world.data, user, text), "{text:?}");
            }
        }
        // a world not made a `World` over (no `Arc` noted) is compared as before
        let mut plain = WorldData::bundled().unwrap();
        assert_eq!(plain.names_other_user("kwame", "ask Lena"), Some("lena".into()));
        plain.users.get_mut("lena").unwrap().name = "Zora Quist".into();
        assert_eq!(plain.names_other_user("kwame", "ask Zora"), Some("zora".into()));
    }

    #[test]
    fn a_world_made_on_one_thread_is_known_by_its_address_on_another() {
        let world = crate::world::World::new(Arc::new(WorldData::bundled().unwrap()));
        let data = world.data.clone();
        let kept = std::thread::spawn(move || {
            let words = data.other_words("kwame");
            (words.0.built_from(&data), words.first_in("ask Lena").map(str::to_string))
        })
        .join()
        .unwrap();
        assert_eq!(kept, (true, Some("lena".to_string())));
    }

    #[test]
    fn more_shared_worlds_than_are_kept_each_answer_with_their_own_words() {
        // each world is dropped before the next is made (an address may come back once
        // nothing holds a weak pointer to it)
        for round in 0..3 * KEPT {
            let mut data = WorldData::bundled().unwrap();
            let name = format!("Name{round} Other{round}");
            data.users.get_mut("lena").unwrap().name.clone_from(&name);
            let world = crate::world::World::new(Arc::new(data));
            for user in ["kwame", "lena"] {
                for text in NAMING.iter().copied().chain([name.as_str(), "Name0", "Vogel"]) {
                    let found = world.data.names_other_user(user, text);
                    assert_eq!(found, read_anew(&world.data, user, text), "{round} {user}: {text:?}");
                }
            }
            assert_eq!(world.data.names_other_user("kwame", &name), Some(format!("name{round}")));
        }
    }
}
