//! What the fake planners and fake PolicyPal models read from a goal: ticket ids, the
//! policy documents it names, an e-mail address, and its clauses. Plain string scanning,
//! the same for every fake, so their differences are in behaviour, not in reading.

/// Documents a goal can name, by keyword, in a fixed order.
pub(crate) const DOC_KEYWORDS: [(&[&str], &str); 3] = [
    (&["refund", "refunds", "return", "returns"], "kc-returns-v3"),
    (&["warranty"], "kc-warranty-v2"),
    (&["battery", "batteries"], "kc-battery-v1"),
];

/// The goal's words, lower-cased, split on anything that is not a letter, digit or `-`.
fn words(goal: &str) -> impl Iterator<Item = String> + '_ {
    goal.split(|c: char| !(c.is_alphanumeric() || c == '-')).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

/// Ticket ids (`T-` and 1 to 6 digits) in the order they appear, without repeats.
pub(crate) fn tickets(goal: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in goal.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
        let id = w.trim_end_matches('-');
        let digits = id.strip_prefix("T-").unwrap_or("");
        if (1..=6).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) && !out.iter().any(|t| t == id)
        {
            out.push(id.to_string());
        }
    }
    out
}

/// The documents the goal names by keyword, in [`DOC_KEYWORDS`] order.
pub(crate) fn docs(goal: &str) -> Vec<&'static str> {
    let ws: Vec<String> = words(goal).collect();
    DOC_KEYWORDS.iter().filter(|(keys, _)| ws.iter().any(|w| keys.contains(&w.as_str()))).map(|(_, d)| *d).collect()
}

/// The first word that looks like an e-mail address, with trailing punctuation removed.
pub(crate) fn address(goal: &str) -> Option<String> {
    goal.split_whitespace()
        .map(|w| w.trim_end_matches(['.', ',', '?', '!', ';', ':']))
        .find(|w| w.contains('@') && w.contains('.'))
        .map(str::to_string)
}

/// True when the goal asks for an e-mail to be sent.
pub(crate) fn wants_email(goal: &str) -> bool {
    let g = goal.to_lowercase();
    (g.contains("e-mail") || g.contains("email") || g.contains("send")) && address(goal).is_some()
}

/// The goal's clauses (split on commas and "and"), trimmed, without empty ones.
pub(crate) fn clauses(goal: &str) -> Vec<String> {
    goal.split([',', '?', '.', ';'])
        .flat_map(|part| part.split(" and "))
        .map(|c| c.trim().trim_start_matches("and ").trim().to_string())
        .filter(|c| c.split_whitespace().count() >= 2)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goals_are_read_the_same_way_by_every_fake() {
        assert_eq!(tickets("Is the battery policy relevant to T-601? And T-601, T-9."), ["T-601", "T-9"]);
        assert_eq!(docs("What do the warranty and battery policies say?"), ["kc-warranty-v2", "kc-battery-v1"]);
        assert_eq!(docs("Status of T-601 and our refund policy?"), ["kc-returns-v3"]);
        assert!(docs("Status of T-601?").is_empty());
        assert_eq!(address("E-mail it to kwame@example.com."), Some("kwame@example.com".into()));
        assert!(wants_email("E-mail the refund policy for T-601 to kwame@example.com."));
        assert!(!wants_email("What is the refund policy?"));
        assert_eq!(
            clauses("Can I work from home after parental leave, and how do I fix my VPN?"),
            ["Can I work from home after parental leave", "how do I fix my VPN"]
        );
    }
}
