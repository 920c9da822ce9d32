//! A run's call counts through one gate, by tool: a built-in tool's in a slot of its own
//! (counting a call allocates nothing), any other tool's (an added one, or a name restored
//! from a checkpoint) by name. Read back they are the map of names to counts they stand
//! for (pinned by `gate::counts::tests::slots_answer_as_the_map_of_names_did`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::tools::TOOL_NAMES;

/// The call counts of one run, by tool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct RunCounts {
    /// The count of `TOOL_NAMES[i]` (a count restored as 0 is kept as given).
    builtin: [Option<u32>; TOOL_NAMES.len()],
    /// Every other tool's count, keyed by its `'static` name when the gate knows it.
    other: BTreeMap<Cow<'static, str>, u32>,
}

/// The slot of a built-in tool.
fn slot(tool: &str) -> Option<usize> {
    TOOL_NAMES.iter().position(|n| *n == tool)
}

impl RunCounts {
    /// The count of `tool`, if it has one.
    pub(super) fn get(&self, tool: &str) -> Option<u32> {
        match slot(tool) {
            Some(i) => self.builtin[i],
            None => self.other.get(tool).copied(),
        }
    }

    /// Sets the count of `tool` to `n`; `key` names a tool that is not built in (called
    /// only when it has no count yet).
    pub(super) fn set(&mut self, tool: &str, n: u32, key: impl FnOnce() -> Cow<'static, str>) {
        match slot(tool) {
            Some(i) => self.builtin[i] = Some(n),
            None => match self.other.get_mut(tool) {
                Some(count) => *count = n,
                None => {
                    self.other.insert(key(), n);
                }
            },
        }
    }

    /// Every tool's count, by name.
    pub(super) fn to_map(&self) -> BTreeMap<String, u32> {
        let builtin = TOOL_NAMES.iter().zip(self.builtin).filter_map(|(name, n)| n.map(|n| ((*name).to_string(), n)));
        builtin.chain(self.other.iter().map(|(tool, n)| (tool.to_string(), *n))).collect()
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
        // built-in names, others, and names a byte away from a built-in one
        let mut names: Vec<String> = TOOL_NAMES.iter().map(|n| (*n).to_string()).collect();
        names.extend(["made_up", "", "get_ticket ", "Get_ticket", "get_ticke", "zzz", "a"].map(String::from));
        let mut seed = 7u64;
        for _ in 0..200 {
            let (mut counts, mut reference) = (RunCounts::default(), Reference::default());
            for _ in 0..12 {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                let tool = &names[(seed >> 33) as usize % names.len()];
                let n = ((seed >> 20) % 4) as u32;
                let key = || Cow::Owned(tool.clone());
                assert_eq!(counts.get(tool), reference.get(tool), "{tool}");
                counts.set(tool, n, key);
                reference.set(tool, n, key);
                for name in &names {
                    assert_eq!(counts.get(name), reference.get(name), "{name}");
                }
                assert_eq!(counts.to_map(), reference.to_map());
            }
        }
    }
}
