//! `sim fuzz merge`'s checks: every field of every shard's summary is
//! validated, the sums are checked (never wrapped), and two summaries that
//! cover the same seed (the same shard twice, overlapping ranges) are
//! refused, naming both files. Any of these is exit 2 naming the file and
//! the field.

use std::collections::BTreeSet;
use std::path::Path;

use crate::error::InputError;
use crate::faults::{Site, catalogue};
use crate::task::{EventType, Status};
use crate::world::stores::db::ReviewReason;

use crate::fuzz::summary::Summary;

/// The seeds of one `seeds` entry: `first..=last`, every `step`-th (a
/// shard `I/N` of a range steps by N).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seeds {
    pub first: u64,
    pub last: u64,
    pub step: u64,
}

impl Seeds {
    /// Reads `first..=last` or `first..=last shard I/N`, as `sim fuzz`
    /// writes them.
    pub fn parse(text: &str) -> Option<Seeds> {
        let (range, shard) = match text.split_once(" shard ") {
            Some((range, shard)) => (range, Some(shard)),
            None => (text, None),
        };
        let (first, last) = range.split_once("..=")?;
        let (first, last): (u64, u64) = (first.parse().ok()?, last.parse().ok()?);
        let step = match shard {
            Some(shard) => crate::cli::args::parse_shard(shard).ok()?.1,
            None => 1,
        };
        (first <= last && (last - first).is_multiple_of(step)).then_some(Seeds {
            first,
            last,
            step,
        })
    }

    pub fn count(&self) -> u64 {
        (self.last - self.first) / self.step + 1
    }

    pub fn contains(&self, seed: u64) -> bool {
        (self.first..=self.last).contains(&seed) && (seed - self.first).is_multiple_of(self.step)
    }

    /// Whether a seed is in both: x = a.first (mod a.step) and x = b.first
    /// (mod b.step) has a solution in the ranges' overlap (Chinese
    /// remainder theorem, in 128-bit integers).
    pub fn overlaps(&self, other: &Seeds) -> bool {
        let low = i128::from(self.first.max(other.first));
        let high = i128::from(self.last.min(other.last));
        if low > high {
            return false;
        }
        let (a, m) = (i128::from(self.first), i128::from(self.step));
        let (b, n) = (i128::from(other.first), i128::from(other.step));
        let (g, p, _) = extended_gcd(m, n);
        if (b - a) % g != 0 {
            return false;
        }
        // x = a + m * k with m * k = b - a (mod n): k = p * (b - a) / g
        // (mod n / g).
        let modulus = n / g;
        let k = (p % modulus * (((b - a) / g) % modulus)) % modulus;
        let lcm = m * modulus;
        let x = (a + m * k).rem_euclid(lcm);
        // The smallest solution at or above `low`.
        let first = x + (low - x).div_euclid(lcm) * lcm;
        let first = if first < low { first + lcm } else { first };
        first <= high
    }
}

/// (g, p, q) with m * p + n * q = g = gcd(m, n).
fn extended_gcd(m: i128, n: i128) -> (i128, i128, i128) {
    if n == 0 {
        (m, 1, 0)
    } else {
        let (g, p, q) = extended_gcd(n, m % n);
        (g, q, p - (m / n) * q)
    }
}

/// A summary's counts by name.
type Counts = std::collections::BTreeMap<String, u64>;

/// Whether a key of one of a summary's maps is one sim writes.
type KnownKey<'a> = &'a dyn Fn(&str) -> bool;

/// Checks one summary read from `path`; returns its seed sets.
pub fn validate(summary: &Summary, path: &Path) -> Result<Vec<Seeds>, InputError> {
    let fail = |key: &str, message: String| Err(InputError::new(message).in_file(path).key(key));
    if !summary.seconds.is_finite() || summary.seconds < 0.0 {
        return fail(
            "seconds",
            format!(
                "expected a finite number of seconds, 0 or more, found {}",
                summary.seconds
            ),
        );
    }
    let mut sets: Vec<Seeds> = Vec::new();
    let mut runs = 0u64;
    for (index, text) in summary.seeds.iter().enumerate() {
        let key = format!("seeds[{index}]");
        let Some(set) = Seeds::parse(text) else {
            return fail(
                &key,
                format!(
                    "expected FIRST..=LAST or FIRST..=LAST shard I/N, found {:?}",
                    text
                ),
            );
        };
        if let Some(other) = sets.iter().position(|seen| seen.overlaps(&set)) {
            return fail(&key, format!("covers seeds of seeds[{other}] again"));
        }
        runs = runs.saturating_add(set.count());
        sets.push(set);
    }
    if runs != summary.runs {
        return fail(
            "runs",
            format!(
                "expected {runs}, the number of seeds in `seeds`, found {}",
                summary.runs
            ),
        );
    }
    let covered = |seed: u64| sets.iter().any(|set| set.contains(seed));
    let mut seen = BTreeSet::new();
    for (index, failure) in summary.failures.iter().enumerate() {
        let key = format!("failures[{index}]");
        if !covered(failure.seed) || !seen.insert(failure.seed) {
            return fail(
                &format!("{key}.seed"),
                format!("expected a seed of `seeds`, once, found {}", failure.seed),
            );
        }
        let invariant = failure.invariant.as_str();
        if invariant != crate::invariants::CONVERGES && !crate::invariants::is_invariant(invariant)
        {
            return fail(
                &format!("{key}.invariant"),
                format!(
                    "expected an invariant id (`sim invariants`), found {:?}",
                    invariant
                ),
            );
        }
    }
    let mut seen = BTreeSet::new();
    for (index, seed) in summary.nondeterministic.iter().enumerate() {
        if !covered(*seed) || !seen.insert(*seed) {
            return fail(
                &format!("nondeterministic[{index}]"),
                format!("expected a seed of `seeds`, once, found {seed}"),
            );
        }
    }
    let faults: Vec<String> = catalogue()
        .into_iter()
        .map(|(site, kind)| format!("{}/{}", site.as_str(), kind.as_str()))
        .collect();
    let known: [(&str, KnownKey<'_>, &Counts); 5] = [
        (
            "faults",
            &|key| faults.iter().any(|known| known == key),
            &summary.faults,
        ),
        ("sites", &|key| Site::parse(key).is_some(), &summary.sites),
        (
            "transitions",
            &|key| {
                key.split_once('/').is_some_and(|(status, event)| {
                    Status::parse(status).is_some() && EventType::parse(event).is_some()
                })
            },
            &summary.transitions,
        ),
        (
            "races",
            &|key| crate::report::RACES.contains(&key),
            &summary.races,
        ),
        // Printed as they are by the report's `manual review` line.
        (
            "review",
            &|key| {
                ReviewReason::ALL
                    .iter()
                    .any(|reason| reason.as_str() == key)
            },
            &summary.review,
        ),
    ];
    for (field, is_known, map) in known {
        if let Some(key) = map.keys().find(|key| !is_known(key)) {
            return fail(
                &format!("{field}.{key}"),
                format!("unknown key in `{field}`, expected what `sim fuzz --json` writes"),
            );
        }
    }
    Ok(sets)
}

/// Adds `other` to `total`, refusing a sum that does not fit; `Err` names
/// the field.
pub fn add(total: &mut Summary, other: &Summary) -> Result<(), String> {
    let sum = |a: u64, b: u64, field: &str| {
        a.checked_add(b)
            .ok_or_else(|| format!("`{field}`: the sum passes {}", u64::MAX))
    };
    let mut next = total.clone();
    next.runs = sum(total.runs, other.runs, "runs")?;
    next.steps = sum(total.steps, other.steps, "steps")?;
    next.tasks_terminal = sum(total.tasks_terminal, other.tasks_terminal, "tasksTerminal")?;
    next.checks = sum(total.checks, other.checks, "checks")?;
    next.seconds = total.seconds + other.seconds;
    if !next.seconds.is_finite() {
        return Err("`seconds`: the sum is not a finite number".into());
    }
    for (field, into, from) in [
        ("faults", &mut next.faults, &other.faults),
        ("sites", &mut next.sites, &other.sites),
        ("sometimes", &mut next.sometimes, &other.sometimes),
        ("transitions", &mut next.transitions, &other.transitions),
        ("rejections", &mut next.rejections, &other.rejections),
        ("races", &mut next.races, &other.races),
        ("review", &mut next.review, &other.review),
    ] {
        for (key, n) in from {
            let slot = into.entry(key.clone()).or_insert(0);
            *slot = sum(*slot, *n, &format!("{field}.{key}"))?;
        }
    }
    // The lists, as `Summary::merge` joins them.
    next.failures.extend(other.failures.iter().cloned());
    next.failures.sort_by_key(|failure| failure.seed);
    next.nondeterministic
        .extend(other.nondeterministic.iter().copied());
    next.nondeterministic.sort();
    next.seeds.extend(other.seeds.iter().cloned());
    *total = next;
    Ok(())
}

/// Reads, checks and adds up the summaries in `files`.
pub fn merge_files(
    files: &[std::path::PathBuf],
    read: impl Fn(&Path) -> Result<Summary, InputError>,
) -> Result<Summary, InputError> {
    let mut total = Summary::default();
    let mut covered: Vec<(usize, Seeds)> = Vec::new();
    for (index, file) in files.iter().enumerate() {
        let summary = read(file)?;
        let sets = validate(&summary, file)?;
        for set in &sets {
            if let Some((other, _)) = covered.iter().find(|(_, seen)| seen.overlaps(set)) {
                return Err(InputError::new(format!(
                    "covers seeds that {} covers too; each shard must be merged once",
                    files[*other].display()
                ))
                .in_file(file)
                .key("seeds"));
            }
        }
        covered.extend(sets.into_iter().map(|set| (index, set)));
        add(&mut total, &summary).map_err(|message| InputError::new(message).in_file(file))?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeds(text: &str) -> Seeds {
        Seeds::parse(text).unwrap()
    }

    #[test]
    fn shards_of_one_range_do_not_overlap_and_a_range_overlaps_itself() {
        let a = seeds("1..=99 shard 0/2");
        let b = seeds("2..=100 shard 1/2");
        assert!(!a.overlaps(&b));
        assert!(a.overlaps(&a));
        assert!(seeds("1..=10").overlaps(&seeds("10..=20")));
        assert!(!seeds("1..=10").overlaps(&seeds("11..=20")));
        // 1, 4, 7, 10 against 2, 4, 6, 8, 10: 4 is in both.
        assert!(seeds("1..=10 shard 0/3").overlaps(&seeds("2..=10 shard 0/2")));
        assert!(!seeds("1..=4 shard 0/3").overlaps(&seeds("2..=3")));
        assert!(seeds("1..=4 shard 0/3").overlaps(&seeds("4..=9")));
        assert_eq!(seeds("2..=100 shard 1/2").count(), 50);
        assert_eq!(Seeds::parse("5..=1"), None);
        assert_eq!(Seeds::parse("1..=3 shard 0/3"), None);
    }

    #[test]
    fn overlaps_agrees_with_counting_every_seed() {
        let mut all = Vec::new();
        for first in 0..7u64 {
            for step in 1..5u64 {
                for n in 0..4u64 {
                    all.push(Seeds {
                        first,
                        last: first + n * step,
                        step,
                    });
                }
            }
        }
        for a in &all {
            for b in &all {
                let brute = (0..40).any(|seed| a.contains(seed) && b.contains(seed));
                assert_eq!(a.overlaps(b), brute, "{a:?} {b:?}");
            }
        }
    }
}
