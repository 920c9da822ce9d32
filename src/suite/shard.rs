//! Shards: a deterministic share of an experiment's cells. A cell belongs to shard `I` of
//! `N` when the first eight bytes of the SHA-256 of its id, read big-endian, are `I`
//! modulo `N`: the same on every machine, every build and every run, so shards started
//! anywhere (a CI matrix, a Kubernetes Indexed Job, a Slurm array) cover every cell once.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Most shards of one experiment.
pub const MAX_SHARDS: u32 = 10_000;

/// Shard `index` of `count` (0-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shard {
    /// Which share, `0..count`.
    pub index: u32,
    /// How many shares.
    pub count: u32,
}

/// Why a `--shard` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShardError {
    /// Not `I/N` or `env/N`.
    #[error("--shard takes I/N (0 <= I < N <= {MAX_SHARDS}) or env/N, not {0:?}")]
    Form(String),
    /// `env/N` with neither `JOB_COMPLETION_INDEX` nor `SLURM_ARRAY_TASK_ID` set.
    #[error("--shard env/N: neither JOB_COMPLETION_INDEX nor SLURM_ARRAY_TASK_ID is set")]
    NoIndex,
    /// Both engines' index variables are set, with different values.
    #[error("--shard env/N: JOB_COMPLETION_INDEX ({0}) and SLURM_ARRAY_TASK_ID ({1}) disagree")]
    TwoIndexes(String, String),
    /// The index is not a number.
    #[error("shard index {index:?} is not a number in 0..{count}")]
    Index {
        /// What was given.
        index: String,
        /// The shard count.
        count: u32,
    },
    /// The index is a number, but no shard of `count` has it (shards are numbered from 0).
    #[error("shard {index} of {count} does not exist: shards are numbered 0 to {}", .count.saturating_sub(1))]
    NoSuchShard {
        /// What was given.
        index: u32,
        /// The shard count.
        count: u32,
    },
}

impl Shard {
    /// Parses `I/N`, or `env/N` with `I` read through `var` from `JOB_COMPLETION_INDEX`
    /// (Kubernetes Indexed Job) or `SLURM_ARRAY_TASK_ID` (a Slurm array started `0-(N-1)`).
    ///
    /// # Errors
    /// [`ShardError`] naming what is wrong.
    pub fn parse(text: &str, var: &dyn Fn(&str) -> Option<String>) -> Result<Self, ShardError> {
        let form = || ShardError::Form(text.to_string());
        let (index, count) = text.split_once('/').ok_or_else(form)?;
        let count: u32 = count.parse().map_err(|_| form())?;
        if count == 0 || count > MAX_SHARDS {
            return Err(form());
        }
        let index = if index == "env" {
            match (var("JOB_COMPLETION_INDEX"), var("SLURM_ARRAY_TASK_ID")) {
                (Some(k), Some(s)) if k.trim() != s.trim() => return Err(ShardError::TwoIndexes(k, s)),
                (Some(i), _) | (None, Some(i)) => i,
                (None, None) => return Err(ShardError::NoIndex),
            }
        } else {
            index.to_string()
        };
        match index.trim().parse::<u32>() {
            Ok(i) if i < count => Ok(Self { index: i, count }),
            Ok(i) => Err(ShardError::NoSuchShard { index: i, count }),
            Err(_) => Err(ShardError::Index { index, count }),
        }
    }

    /// True when the cell `id` is in this shard.
    pub fn holds(&self, id: &str) -> bool {
        shard_of(id, self.count) == self.index
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The shard of `count` that the cell `id` belongs to.
pub fn shard_of(id: &str, count: u32) -> u32 {
    let digest = Sha256::digest(id.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let n = u64::from_be_bytes(first) % u64::from(count.max(1));
    u32::try_from(n).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn the_forms_parse_and_bad_ones_are_named() {
        assert_eq!(Shard::parse("2/4", &none), Ok(Shard { index: 2, count: 4 }));
        assert!(matches!(Shard::parse("4/4", &none), Err(ShardError::NoSuchShard { index: 4, count: 4 })));
        for bad in ["", "1", "1/0", "a/b", "1/99999", "-1/4"] {
            assert!(Shard::parse(bad, &none).is_err(), "{bad}");
        }
        let k8s = |k: &str| (k == "JOB_COMPLETION_INDEX").then(|| "3".to_string());
        assert_eq!(Shard::parse("env/8", &k8s), Ok(Shard { index: 3, count: 8 }));
        let slurm = |k: &str| (k == "SLURM_ARRAY_TASK_ID").then(|| "1".to_string());
        assert_eq!(Shard::parse("env/2", &slurm), Ok(Shard { index: 1, count: 2 }));
        assert_eq!(Shard::parse("env/2", &none), Err(ShardError::NoIndex));
        let both = |k: &str| Some(if k == "JOB_COMPLETION_INDEX" { "0" } else { "1" }.to_string());
        assert!(matches!(Shard::parse("env/2", &both), Err(ShardError::TwoIndexes(..))));
        assert!(matches!(Shard::parse("env/2", &k8s), Err(ShardError::NoSuchShard { index: 3, count: 2 })));
    }

    #[test]
    fn a_shard_past_the_last_says_shards_are_numbered_from_zero() {
        assert_eq!(
            Shard::parse("2/2", &none).unwrap_err().to_string(),
            "shard 2 of 2 does not exist: shards are numbered 0 to 1"
        );
        assert_eq!(
            Shard::parse("1/1", &none).unwrap_err().to_string(),
            "shard 1 of 1 does not exist: shards are numbered 0 to 0"
        );
        let k8s = |k: &str| (k == "JOB_COMPLETION_INDEX").then(|| "3".to_string());
        assert_eq!(
            Shard::parse("env/2", &k8s).unwrap_err().to_string(),
            "shard 3 of 2 does not exist: shards are numbered 0 to 1"
        );
        // not a number at all keeps its own message
        assert_eq!(Shard::parse("x/2", &none).unwrap_err().to_string(), "shard index \"x\" is not a number in 0..2");
    }

    #[test]
    fn every_cell_is_in_exactly_one_shard_and_the_hash_is_sha256() {
        let ids: Vec<String> = (0..500).map(|i| format!("cell-{i}")).collect();
        let shards: Vec<Shard> = (0..4).map(|index| Shard { index, count: 4 }).collect();
        let mut sizes = [0usize; 4];
        for id in &ids {
            let holders: Vec<_> = shards.iter().filter(|s| s.holds(id)).collect();
            assert_eq!(holders.len(), 1, "{id}");
            sizes[holders[0].index as usize] += 1;
        }
        assert!(sizes.iter().all(|n| *n > 80), "roughly even: {sizes:?}");
        // SHA-256("abc") starts ba7816bf8f01cfea: that, modulo 1000, is the shard
        assert_eq!(shard_of("abc", 1000), u32::try_from(0xba78_16bf_8f01_cfea_u64 % 1000).unwrap());
    }
}
