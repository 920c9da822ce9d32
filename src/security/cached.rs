//! A regex set searched with its calling thread's own cache.
//!
//! A `regex::RegexSet` keeps its search caches in a pool: the first thread to use it owns a
//! fast slot, and every other thread takes a mutex to borrow a cache and another to give it
//! back. The runtime's worker threads are mostly not that first thread, so most trace
//! lines paid two lock round trips to learn that a text holds nothing to hide. A
//! [`CachedSet`] is the same `regex_automata::meta::Regex` the `regex` crate builds for a
//! set (same configuration, same answers), searched with a cache kept in a thread-local
//! beside it; a thread that cannot borrow that cache (a search inside a search, or one
//! during thread teardown) takes the regex's own pool, as before.

use regex_automata::meta::{self, Cache, Regex};
use regex_automata::nfa::thompson::WhichCaptures;
use regex_automata::util::syntax;
use regex_automata::{Input, MatchKind, PatternSet};
use std::cell::RefCell;
use std::thread::LocalKey;

/// One thread's cache for one [`CachedSet`] (`None` until the thread's first search).
pub(super) type ThreadCache = RefCell<Option<Cache>>;

/// A set of patterns, compiled as `regex::RegexSet::new` compiles them, with a cache per
/// thread.
pub(super) struct CachedSet {
    regex: Regex,
    /// This set's own thread-local: a cache is only ever used with the regex that made it.
    cache: &'static LocalKey<ThreadCache>,
}

impl CachedSet {
    /// Compiles `patterns` with the configuration `regex::RegexSetBuilder` uses by
    /// default (a 10 MiB NFA limit, a 2 MiB lazy DFA cache, every match kind, no
    /// captures, UTF-8). `cache` must be a thread-local given to no other set.
    pub(super) fn new(patterns: &[&str], cache: &'static LocalKey<ThreadCache>) -> Result<Self, Box<meta::BuildError>> {
        let config = meta::Config::new()
            .nfa_size_limit(Some(10 * (1 << 20)))
            .hybrid_cache_capacity(2 * (1 << 20))
            .match_kind(MatchKind::All)
            .utf8_empty(true)
            .which_captures(WhichCaptures::None);
        let regex = meta::Builder::new()
            .configure(config)
            .syntax(syntax::Config::new().utf8(true))
            .build_many(patterns)
            .map_err(Box::new)?;
        Ok(Self { regex, cache })
    }

    /// True when any pattern matches `text` (`RegexSet::is_match`).
    pub(super) fn is_match(&self, text: &str) -> bool {
        let input = Input::new(text);
        let cached = self.cache.try_with(|cell| {
            let mut slot = cell.try_borrow_mut().ok()?;
            let cache = slot.get_or_insert_with(|| self.regex.create_cache());
            Some(self.regex.is_match_with(cache, &input))
        });
        match cached {
            Ok(Some(found)) => found,
            _ => self.regex.is_match(input),
        }
    }

    /// The patterns that match `text` (`RegexSet::matches`); its `iter` goes in
    /// ascending order.
    pub(super) fn matches(&self, text: &str) -> PatternSet {
        let input = Input::new(text);
        let mut set = PatternSet::new(self.regex.pattern_len());
        let cached = self.cache.try_with(|cell| {
            let mut slot = cell.try_borrow_mut().ok()?;
            let cache = slot.get_or_insert_with(|| self.regex.create_cache());
            self.regex.which_overlapping_matches_with(cache, &input, &mut set);
            Some(())
        });
        if !matches!(cached, Ok(Some(()))) {
            self.regex.which_overlapping_matches(&input, &mut set);
        }
        set
    }
}
