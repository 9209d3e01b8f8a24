//! A campaign's summary: what its seeds add up to (steps, faults fired,
//! targets reached, failures), keyed by stable names so shards' JSON merges
//! by adding, and its text form.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::error::{EXIT_NOT_CONVERGED, EXIT_OK, EXIT_VIOLATION};
use crate::faults::{Site, catalogue};
use crate::fuzz::campaign::SeedResult;
use crate::report::{Coverage, SOMETIMES};

/// A seed that failed, for the summary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    pub seed: u64,
    /// The invariant that fired, or `converges`.
    pub invariant: String,
    pub step: u64,
}

/// Everything a campaign (or several shards of one) adds up to. Maps are
/// keyed by stable names, so shards' JSON merges by adding.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Summary {
    pub runs: u64,
    pub steps: u64,
    /// Wall-clock seconds the runs took, summed over shards.
    pub seconds: f64,
    pub tasks_terminal: u64,
    pub checks: u64,
    pub faults: BTreeMap<String, u64>,
    pub sites: BTreeMap<String, u64>,
    pub sometimes: BTreeMap<String, u64>,
    pub transitions: BTreeMap<String, u64>,
    pub rejections: BTreeMap<String, u64>,
    pub races: BTreeMap<String, u64>,
    pub review: BTreeMap<String, u64>,
    pub failures: Vec<Failure>,
    pub nondeterministic: Vec<u64>,
    /// The seeds these runs covered, as `first..=last` ranges per shard.
    pub seeds: Vec<String>,
}

fn add(into: &mut BTreeMap<String, u64>, key: String, n: u64) {
    *into.entry(key).or_insert(0) += n;
}

impl Summary {
    pub fn add_seed(&mut self, result: &SeedResult) {
        self.runs += 1;
        self.steps += result.steps;
        self.tasks_terminal += result.tasks_terminal;
        self.checks += result.checks;
        for ((site, kind), n) in &result.faults {
            add(
                &mut self.faults,
                format!("{}/{}", site.as_str(), kind.as_str()),
                *n,
            );
        }
        for (site, n) in &result.sites {
            add(&mut self.sites, site.as_str().to_string(), *n);
        }
        for (key, n) in &result.sometimes {
            add(&mut self.sometimes, key.to_string(), *n);
        }
        for ((status, event), n) in &result.transitions {
            add(
                &mut self.transitions,
                format!("{}/{}", status.as_str(), event.as_str()),
                *n,
            );
        }
        for (key, n) in &result.rejections {
            add(&mut self.rejections, key.to_string(), *n);
        }
        for (key, n) in &result.races {
            add(&mut self.races, key.to_string(), *n);
        }
        for (key, n) in &result.review {
            add(&mut self.review, key.to_string(), *n);
        }
        if let Some(invariant) = result.outcome.fired() {
            self.failures.push(Failure {
                seed: result.seed,
                invariant: invariant.to_string(),
                step: result.outcome.failed_at(result.steps),
            });
        }
        if result.nondeterminism.is_some() {
            self.nondeterministic.push(result.seed);
        }
    }

    /// Adds another summary (a shard) to this one.
    pub fn merge(&mut self, other: &Summary) {
        self.runs += other.runs;
        self.steps += other.steps;
        self.seconds += other.seconds;
        self.tasks_terminal += other.tasks_terminal;
        self.checks += other.checks;
        for (into, from) in [
            (&mut self.faults, &other.faults),
            (&mut self.sites, &other.sites),
            (&mut self.sometimes, &other.sometimes),
            (&mut self.transitions, &other.transitions),
            (&mut self.rejections, &other.rejections),
            (&mut self.races, &other.races),
            (&mut self.review, &other.review),
        ] {
            for (key, n) in from {
                add(into, key.clone(), *n);
            }
        }
        self.failures.extend(other.failures.iter().cloned());
        self.failures.sort_by_key(|failure| failure.seed);
        self.nondeterministic
            .extend(other.nondeterministic.iter().copied());
        self.nondeterministic.sort();
        self.seeds.extend(other.seeds.iter().cloned());
    }

    pub fn exit_code(&self) -> u8 {
        let safety = self
            .failures
            .iter()
            .any(|failure| failure.invariant != crate::invariants::CONVERGES);
        if !self.nondeterministic.is_empty() || safety {
            EXIT_VIOLATION
        } else if !self.failures.is_empty() {
            EXIT_NOT_CONVERGED
        } else {
            EXIT_OK
        }
    }

    pub fn text(&self) -> String {
        let mut out = String::new();
        let rate = if self.seconds > 0.0 {
            self.steps as f64 / self.seconds
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "runs          {} (seeds {})",
            self.runs,
            self.seeds.join(", ")
        );
        let _ = writeln!(
            out,
            "steps         {} ({:.0} steps/s over {:.2}s)",
            self.steps, rate, self.seconds
        );
        let _ = writeln!(
            out,
            "tasks         {} brought to a terminal state",
            self.tasks_terminal
        );
        let _ = writeln!(out, "checks        {} invariant checks", self.checks);
        let _ = writeln!(out, "faults injected by site/kind:");
        for (site, kind) in catalogue() {
            let key = format!("{}/{}", site.as_str(), kind.as_str());
            let n = self.faults.get(&key).copied().unwrap_or(0);
            let _ = writeln!(out, "  {key:<40} {n}");
        }
        let reached: Vec<String> = Site::ALL
            .iter()
            .map(|site| {
                format!(
                    "{} {}",
                    site.as_str(),
                    self.sites.get(site.as_str()).copied().unwrap_or(0)
                )
            })
            .collect();
        let _ = writeln!(out, "fault sites reached: {}", reached.join(", "));
        let coverage = Coverage::of(
            self.transitions.len(),
            |reason| self.rejections.contains_key(reason),
            |race| self.races.contains_key(race),
        );
        let _ = writeln!(out, "coverage      {}", coverage.line());
        let missing = crate::report::not_reached(
            |status, event| {
                self.transitions
                    .contains_key(&format!("{}/{}", status.as_str(), event.as_str()))
            },
            |reason| self.rejections.contains_key(reason),
            |race| self.races.contains_key(race),
        );
        out.push_str(&crate::report::not_reached_lines(&missing));
        let _ = writeln!(out, "sometimes targets:");
        for target in SOMETIMES {
            let n = self.sometimes.get(target).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "  {:<40} {n}{}",
                target,
                if n == 0 { "  (NOT REACHED)" } else { "" }
            );
        }
        let unreached: Vec<&str> = crate::report::SITUATIONS
            .into_iter()
            .filter(|name| !self.sometimes.contains_key(*name))
            .collect();
        let _ = writeln!(
            out,
            "situations   {} of {} reached{}",
            crate::report::SITUATIONS.len() - unreached.len(),
            crate::report::SITUATIONS.len(),
            if unreached.is_empty() {
                String::new()
            } else {
                format!("; not reached: {}", unreached.join(", "))
            }
        );
        let review: Vec<String> = self
            .review
            .iter()
            .map(|(reason, n)| format!("{reason} {n}"))
            .collect();
        let _ = writeln!(
            out,
            "manual review {}",
            if review.is_empty() {
                "0".to_string()
            } else {
                review.join(", ")
            }
        );
        if self.failures.is_empty() {
            let _ = writeln!(out, "violations    none");
        } else {
            let _ = writeln!(out, "failures      {}", self.failures.len());
            for failure in &self.failures {
                let _ = writeln!(
                    out,
                    "  seed {}: {} at step {}",
                    failure.seed, failure.invariant, failure.step
                );
            }
        }
        if !self.nondeterministic.is_empty() {
            let _ = writeln!(
                out,
                "NONDETERMINISTIC seeds (a bug in sim itself): {:?}",
                self.nondeterministic
            );
        }
        out
    }
}
