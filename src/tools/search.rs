//! `search_documents`: a keyword search over the policy documents. Deterministic: each
//! distinct query word (three letters or more, common words left out) scores two points
//! when it is in a document's title and one when it is only in its text; ties go to the
//! smaller id; at most [`MAX_HITS`] hits, each with a clipped snippet. No hit is an empty
//! list, not an error.

use serde_json::{Value, json};
use std::collections::BTreeSet;

use crate::security::clip;
use crate::world::WorldData;

/// Most hits one search returns.
pub(super) const MAX_HITS: usize = 2;
/// Most characters of a hit's snippet.
pub(super) const SNIPPET_CHARS: usize = 80;

/// Words too common to rank by.
const STOP_WORDS: [&str; 16] = [
    "the", "and", "our", "for", "what", "does", "how", "can", "with", "about", "say", "policy", "policies", "from",
    "that", "this",
];

fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 3 && !STOP_WORDS.contains(&w.as_str()))
        .collect()
}

/// Searches `data`'s documents for `query`.
pub(crate) fn search(data: &WorldData, query: &str) -> Value {
    let wanted = words(query);
    let mut scored: Vec<(usize, &str, Value)> = data
        .documents()
        .values()
        .filter_map(|d| {
            let (title, text) = (words(&d.title), words(&d.text));
            let score: usize =
                wanted.iter().map(|w| if title.contains(w) { 2 } else { usize::from(text.contains(w)) }).sum();
            (score > 0).then(|| {
                (score, d.id.as_str(), json!({"id": d.id, "title": d.title, "snippet": clip(&d.text, SNIPPET_CHARS)}))
            })
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let results: Vec<Value> = scored.into_iter().take(MAX_HITS).map(|(_, _, v)| v).collect();
    json!({"query": query, "results": results})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_ranks_by_shared_words_and_finds_nothing_for_unknown_topics() {
        let w = WorldData::bundled().unwrap();
        let hits = search(&w, "swollen battery");
        assert_eq!(hits["results"][0]["id"], "kc-battery-v1");
        let none = search(&w, "work from home after parental leave");
        assert_eq!(none["results"], json!([]));
        assert_eq!(search(&w, "warranty")["results"][0]["id"], "kc-warranty-v2");
    }
}
