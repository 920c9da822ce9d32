//! A run's call counts through one gate, by tool: each of the first [`SLOTS`] tools the
//! gate's environment serves in a slot of its own (counting a call allocates nothing), any
//! other tool's (an added one, an MCP tool, a name restored from a checkpoint) by name.
//! Read back they are the map of names to counts they stand for (pinned by
//! `gate::counts::tests::slots_answer_as_the_map_of_names_did`).

use std::borrow::Cow;
use std::collections::BTreeMap;

/// How many of an environment's tools are counted in slots.
const SLOTS: usize = 6;

/// The call counts of one run, by tool. The slots stand for the first [`SLOTS`] tools of
/// the gate's environment: each method is handed those names (`names`), always the same
/// ones for one gate, rather than the counts holding them for every run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct RunCounts {
    /// The count of `names[i]` (a count restored as 0 is kept as given).
    slots: [Option<u32>; SLOTS],
    /// Every other tool's count, keyed by its `'static` name when the gate knows it.
    other: BTreeMap<Cow<'static, str>, u32>,
}

/// The slot of `tool` among `names`, if it has one.
fn slot(names: &[&str], tool: &str) -> Option<usize> {
    names.iter().take(SLOTS).position(|n| *n == tool)
}

impl RunCounts {
    /// The count of `tool`, if it has one.
    pub(super) fn get(&self, names: &[&str], tool: &str) -> Option<u32> {
        match slot(names, tool) {
            Some(i) => self.slots[i],
            None => self.other.get(tool).copied(),
        }
    }

    /// Sets the count of `tool` to `n`; `key` names a tool without a slot (called only
    /// when it has no count yet).
    pub(super) fn set(&mut self, names: &[&str], tool: &str, n: u32, key: impl FnOnce() -> Cow<'static, str>) {
        match slot(names, tool) {
            Some(i) => self.slots[i] = Some(n),
            None => match self.other.get_mut(tool) {
                Some(count) => *count = n,
                None => {
                    self.other.insert(key(), n);
                }
            },
        }
    }

    /// Every tool's count, by name.
    pub(super) fn to_map(&self, names: &[&str]) -> BTreeMap<String, u32> {
        let slots = names.iter().zip(self.slots).filter_map(|(name, n)| n.map(|n| ((*name).to_string(), n)));
        slots.chain(self.other.iter().map(|(tool, n)| (tool.to_string(), *n))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counts as they were kept before: a map of names to counts.
    #[derive(Default)]
    struct Reference(BTreeMap<Cow<'static, str>, u32>);

    impl Reference {
        fn get(&self, tool: &str) -> Option<u32> {
            self.0.get(tool).copied()
        }
        fn set(&mut self, tool: &str, n: u32, key: impl FnOnce() -> Cow<'static, str>) {
            match self.0.get_mut(tool) {
                Some(count) => *count = n,
                None => {
                    self.0.insert(key(), n);
                }
            }
        }
        fn to_map(&self) -> BTreeMap<String, u32> {
            self.0.iter().map(|(tool, n)| (tool.to_string(), *n)).collect()
        }
    }

    #[test]
    fn slots_answer_as_the_map_of_names_did() {
        // an environment's names (the help desk's six; one with more names than slots; none),
        // others, and names a byte away from one of its own
        let many: &'static [&'static str] = &["t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "t10"];
        for env_names in [&crate::tools::TOOL_NAMES[..], many, &[]] {
            let mut names: Vec<String> = env_names.iter().map(|n| (*n).to_string()).collect();
            names.extend(["made_up", "", "get_ticket ", "Get_ticket", "get_ticke", "t1 ", "a"].map(String::from));
            check_against_the_map(env_names, &names);
        }
    }

    fn check_against_the_map(env_names: &'static [&'static str], names: &[String]) {
        let mut seed = 7u64;
        for _ in 0..200 {
            let (mut counts, mut reference) = (RunCounts::default(), Reference::default());
            for _ in 0..12 {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                let tool = &names[(seed >> 33) as usize % names.len()];
                let n = ((seed >> 20) % 4) as u32;
                let key = || Cow::Owned(tool.clone());
                assert_eq!(counts.get(env_names, tool), reference.get(tool), "{tool}");
                counts.set(env_names, tool, n, key);
                reference.set(tool, n, key);
                for name in names {
                    assert_eq!(counts.get(env_names, name), reference.get(name), "{name}");
                }
                assert_eq!(counts.to_map(env_names), reference.to_map());
            }
        }
    }
}
