//! Paired outcomes of two designs on the same cases, and McNemar's exact test.
//!
//! When two designs (a single agent and three roles, say) run the same (task, payload,
//! repetition), each case gives a pair of outcomes. Only the discordant pairs say whether
//! the designs differ: `first_only` cases where only the first design's attack succeeded,
//! `second_only` where only the second's did. Under the hypothesis that the designs do
//! not differ, each discordant pair falls either way with probability one half, so the
//! exact two-sided p-value is twice the smaller binomial tail, at most 1.

use serde::Serialize;
use std::collections::BTreeMap;

use super::matrix::{DefenseConfig, Matrix};
use crate::lab::AttackVerdict;

/// The four kinds of pairs, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Paired {
    /// Both designs had the outcome.
    pub both: usize,
    /// Only the first design had it.
    pub first_only: usize,
    /// Only the second design had it.
    pub second_only: usize,
    /// Neither had it.
    pub neither: usize,
}

impl Paired {
    /// Counts one pair of outcomes.
    pub fn add(&mut self, first: bool, second: bool) {
        match (first, second) {
            (true, true) => self.both += 1,
            (true, false) => self.first_only += 1,
            (false, true) => self.second_only += 1,
            (false, false) => self.neither += 1,
        }
    }

    /// How many pairs were counted.
    pub fn pairs(&self) -> usize {
        self.both + self.first_only + self.second_only + self.neither
    }

    /// McNemar's exact two-sided p-value of the discordant pairs; 1 when there are none.
    pub fn mcnemar_exact(&self) -> f64 {
        mcnemar_exact(self.first_only, self.second_only)
    }
}

/// McNemar's exact two-sided p-value for `b` and `c` discordant pairs: twice the
/// probability of at most `min(b, c)` successes in `b + c` fair coin tosses, at most 1.
pub fn mcnemar_exact(b: usize, c: usize) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let k = b.min(c);
    // the binomial terms in log space: C(n, 0) = 1, C(n, i + 1) = C(n, i) (n - i) / (i + 1)
    let ln_half_n = n as f64 * std::f64::consts::LN_2;
    let (mut ln_choose, mut tail) = (0.0_f64, 0.0_f64);
    for i in 0..=k {
        tail += (ln_choose - ln_half_n).exp();
        ln_choose += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
    }
    (2.0 * tail).min(1.0)
}

/// One three-role configuration paired with the single agent under the same scopes,
/// approval and information-flow switch (and its loop check on).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairedRow {
    /// The single agent's configuration.
    pub single: String,
    /// The three roles' configuration.
    pub multi: String,
    /// Attack success (the planted effect executed), single agent first.
    pub attack_success: Paired,
    /// Utility under attack (done, covered and a correct answer), single agent first.
    pub utility_under_attack: Paired,
}

impl PairedRow {
    /// The aligned table line of this row (see [`paired_lines`]).
    fn line(&self) -> String {
        let a = &self.attack_success;
        let u = &self.utility_under_attack;
        format!(
            "{:<66} {:>5} {:>5} {:>6} {:>6} {:>5} {:>7} {:>5} {:>5} {:>7}",
            self.multi,
            a.pairs(),
            a.both,
            a.first_only,
            a.second_only,
            a.neither,
            p_cell(a.mcnemar_exact()),
            u.first_only,
            u.second_only,
            p_cell(u.mcnemar_exact())
        )
    }
}

/// A configuration's attacked runs by (task, payload, repetition): attack success and
/// utility under attack.
type Cases<'m> = BTreeMap<(&'m str, &'m str, u32), (bool, bool)>;

/// The attacked runs of `m` paired: every three-role configuration against the single
/// agent with the same scopes, approval and information-flow switch and its loop check on,
/// on the same (task, payload, repetition). A configuration without such a partner in the
/// matrix is left out.
pub fn paired_single_vs_multi(m: &Matrix) -> Vec<PairedRow> {
    // the attacked runs of each configuration, by (task, payload, repetition)
    let mut by_config: Vec<Cases<'_>> = vec![BTreeMap::new(); m.figures.len()];
    for r in &m.runs {
        if let (Some(attack), Some(cases)) = (r.attack.as_deref(), by_config.get_mut(r.config)) {
            let success = r.verdict == Some(AttackVerdict::Executed);
            cases.insert((r.task.as_str(), attack, r.rep), (success, r.done && r.covered && r.answer_ok));
        }
    }
    let partner = |multi: &DefenseConfig| {
        m.figures.iter().position(|f| match (f.config, *multi) {
            (DefenseConfig::Single { scopes, loop_check, approval, ifc }, DefenseConfig::Multi { .. }) => {
                scopes == multi.scopes()
                    && approval == multi.approval()
                    && ifc == multi.ifc()
                    && loop_check == crate::eval::Switch::On
            }
            _ => false,
        })
    };
    let mut rows = Vec::new();
    for (i, f) in m.figures.iter().enumerate() {
        let Some(s) = matches!(f.config, DefenseConfig::Multi { .. }).then(|| partner(&f.config)).flatten() else {
            continue;
        };
        let mut row = PairedRow {
            single: m.figures[s].label.clone(),
            multi: f.label.clone(),
            attack_success: Paired::default(),
            utility_under_attack: Paired::default(),
        };
        for (case, (multi_success, multi_utility)) in &by_config[i] {
            if let Some((single_success, single_utility)) = by_config[s].get(case) {
                row.attack_success.add(*single_success, *multi_success);
                row.utility_under_attack.add(*single_utility, *multi_utility);
            }
        }
        rows.push(row);
    }
    rows
}

/// A p-value with four decimals, or `<0.0001`.
fn p_cell(p: f64) -> String {
    if p < 0.0001 { "<0.0001".to_string() } else { format!("{p:.4}") }
}

/// The paired table: a header, one line per three-role configuration, and a legend.
pub fn paired_lines(rows: &[PairedRow]) -> Vec<String> {
    let mut lines = vec![format!(
        "{:<66} {:>5} {:>5} {:>6} {:>6} {:>5} {:>7} {:>5} {:>5} {:>7}",
        "multi configuration (vs single: same scopes, approval, ifc)",
        "pairs",
        "both",
        "s-only",
        "m-only",
        "none",
        "p",
        "u:s",
        "u:m",
        "u:p"
    )];
    lines.extend(rows.iter().map(PairedRow::line));
    lines.push(
        "pairs: attacked (task, payload, repetition) both designs ran; attack success in both, the single \
         agent only (s-only), the three roles only (m-only), neither (none); p: McNemar's exact two-sided test \
         of the discordant pairs; u:s, u:m, u:p: the same for utility under attack"
            .to_string(),
    );
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exact_test_matches_known_binomial_tails() {
        // no discordant pair says nothing
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        // one pair either way cannot be told from chance
        assert_eq!(mcnemar_exact(1, 0), 1.0);
        // 0 of 5: 2 * (1/32)
        assert!((mcnemar_exact(5, 0) - 0.0625).abs() < 1e-12);
        // 1 of 10: 2 * (1 + 10) / 1024
        assert!((mcnemar_exact(1, 9) - 22.0 / 1024.0).abs() < 1e-12);
        // symmetric in its arguments
        assert_eq!(mcnemar_exact(3, 12), mcnemar_exact(12, 3));
        // balanced counts are p = 1
        assert_eq!(mcnemar_exact(7, 7), 1.0);
        // 0 of 20: 2 / 2^20
        assert!((mcnemar_exact(0, 20) - 2.0 / 1_048_576.0).abs() < 1e-15);
        // large counts stay finite and in range (no underflow to NaN)
        let p = mcnemar_exact(400, 600);
        assert!(p > 0.0 && p < 1e-9, "{p}");
        assert!((mcnemar_exact(5000, 5000) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn pairs_are_counted_by_kind() {
        let mut p = Paired::default();
        for (a, b) in [(true, true), (true, false), (true, false), (false, true), (false, false)] {
            p.add(a, b);
        }
        assert_eq!(p, Paired { both: 1, first_only: 2, second_only: 1, neither: 1 });
        assert_eq!(p.pairs(), 5);
        assert_eq!(p.mcnemar_exact(), 1.0);
    }
}
