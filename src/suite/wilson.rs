//! The 95% Wilson score interval of a rate: where the true rate of `n` successes out of
//! `of` trials lies, with 95% confidence. Unlike the normal approximation it stays inside
//! 0..1 and is not empty at 0 or at `of` successes, which is where attack rates live.
//!
//! For `p = n / of` and `z` the 97.5% quantile of the standard normal distribution:
//! centre `(p + z²/2·of) / (1 + z²/of)`, half width
//! `z / (1 + z²/of) · √(p(1−p)/of + z²/4·of²)`.

use serde::Serialize;

/// The 97.5% quantile of the standard normal distribution (two-sided 95%).
const Z95: f64 = 1.959_963_984_540_054;

/// A closed interval of rates, both ends in 0..=1.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Interval {
    /// The lower end.
    pub low: f64,
    /// The upper end.
    pub high: f64,
}

impl Interval {
    /// Both ends in percent with one decimal, e.g. `17.2-54.6%`.
    pub fn percent(&self) -> String {
        format!("{:.1}-{:.1}%", self.low * 100.0, self.high * 100.0)
    }

    /// The ends rounded to four decimals (what the JSON shows).
    pub(crate) fn rounded(&self) -> Self {
        let r = |x: f64| (x * 10_000.0).round() / 10_000.0;
        Self { low: r(self.low), high: r(self.high) }
    }
}

/// The 95% Wilson score interval of `n` successes out of `of`; `None` when `of` is 0 (no
/// trial says nothing) or `n > of`.
pub fn wilson(n: usize, of: usize) -> Option<Interval> {
    if of == 0 || n > of {
        return None;
    }
    // counts are far below 2^52, so the conversions are exact
    #[allow(clippy::cast_precision_loss)]
    let (n, of) = (n as f64, of as f64);
    let p = n / of;
    let z2 = Z95 * Z95;
    let denominator = 1.0 + z2 / of;
    let centre = (p + z2 / (2.0 * of)) / denominator;
    let half = Z95 / denominator * (p * (1.0 - p) / of + z2 / (4.0 * of * of)).sqrt();
    Some(Interval { low: (centre - half).max(0.0), high: (centre + half).min(1.0) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: Interval, low: f64, high: f64) {
        assert!((got.low - low).abs() < 1e-9 && (got.high - high).abs() < 1e-9, "{got:?} vs {low}..{high}");
    }

    /// Reference values from solving `(p − p̂)² = z²·p(1−p)/n` for `p` (the score test the
    /// interval inverts), computed independently of the closed form above.
    #[test]
    fn the_interval_matches_the_score_test_at_known_counts() {
        close(wilson(0, 63).unwrap(), 0.0, 0.057_471_199_588_851_7);
        close(wilson(60, 63).unwrap(), 0.869_090_321_620_939_2, 0.983_673_831_132_004_6);
        close(wilson(7, 21).unwrap(), 0.171_947_526_050_834_7, 0.546_265_480_257_447_6);
        close(wilson(63, 63).unwrap(), 0.942_528_800_411_144, 1.0);
        close(wilson(1, 2).unwrap(), 0.094_531_205_734_230_7, 0.905_468_794_265_769_3);
        // at zero successes the upper end is z²/(n+z²)
        let z2 = Z95 * Z95;
        assert!((wilson(0, 10).unwrap().high - z2 / (10.0 + z2)).abs() < 1e-12);
    }

    #[test]
    fn no_trials_or_more_successes_than_trials_have_no_interval_and_more_trials_narrow_it() {
        assert_eq!(wilson(0, 0), None);
        assert_eq!(wilson(3, 2), None);
        let (few, many) = (wilson(5, 10).unwrap(), wilson(500, 1000).unwrap());
        assert!(many.high - many.low < few.high - few.low);
        assert!(few.low < 0.5 && few.high > 0.5, "symmetric around one half");
        assert_eq!(wilson(7, 21).unwrap().percent(), "17.2-54.6%");
        assert_eq!(wilson(7, 21).unwrap().rounded(), Interval { low: 0.1719, high: 0.5463 });
    }
}
