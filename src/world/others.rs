//! Whose data a text names: the words that point at another user (their id, the words of
//! their name, their e-mail address, the ids of their tickets). The memory rules and the
//! single agent's finish check read the text with it, not only a field that says whom the
//! text is about.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use super::WorldData;
use crate::security::fold;

/// The bundled world, read once for the checks that have no world of their own.
static BUNDLED: LazyLock<Option<WorldData>> = LazyLock::new(|| WorldData::bundled().ok());

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
        let foreign = self.foreign_words(user);
        let folded = fold(text).to_lowercase();
        folded
            .split(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '@' | '.' | '_' | '+')))
            .map(|w| w.trim_matches(|c: char| matches!(c, '.' | '-' | '_')))
            .find(|w| !w.is_empty() && foreign.contains(*w))
            .map(str::to_string)
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
}
