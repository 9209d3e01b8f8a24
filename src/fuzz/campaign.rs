//! Fuzz campaigns: run seeds (each its own single-threaded simulation,
//! several seeds at once with `--jobs`), count what happened, and on a
//! violation write a reproducer scenario with the workload and faults
//! spelled out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::faults::{FaultKind, ScriptedFault, Site};
use crate::hash::Sha;
use crate::invariants::Violation;
use crate::mutants::Mutant;
use crate::scenario::{Expect, Scenario};
use crate::simulate::{Outcome, simulate};
use crate::task::{EventType, Status};
use crate::trace::{RING_LEN, Trace};
use crate::world::World;

use super::panic::{as_violation, catching};
use super::swarm::{Draw, draw};
use super::workload::Generator;

/// What a campaign is asked to do.
#[derive(Clone, Debug)]
pub struct CampaignOptions {
    pub steps: u64,
    pub jobs: usize,
    pub mutant: Option<Mutant>,
    pub check_determinism: bool,
    pub out: PathBuf,
    pub write_repro: bool,
    /// Stop at the first seed that fails, by a violation or by not
    /// converging (mutant scoring: either kills the mutant).
    pub stop_at_first: bool,
    /// Shrink each failing seed's reproducer (`sim shrink`) with this
    /// wall-clock budget in seconds: `repro-<seed>.toml` is then the
    /// shrunk scenario and `repro-<seed>.full.toml` the written-out run.
    pub shrink_seconds: Option<f64>,
    /// Start no seed after this many wall-clock seconds (the seeds running
    /// then finish): a campaign's results then depend on the machine's
    /// speed, which the summary says.
    pub time_seconds: Option<f64>,
    /// Called about every second within a seed (a single long seed) with
    /// the seed, the steps so far, the fault phase's length and the seconds
    /// so far: the command line prints it. The clock is read through
    /// `stopwatch.rs` every 65,536 steps, never by the run.
    pub progress_within_seed: Option<fn(u64, u64, u64, f64)>,
}

impl CampaignOptions {
    /// A campaign that writes nothing and stops at its first failing seed:
    /// what scoring a mutant, or asking whether anything fails, needs.
    pub fn until_first_failure(steps: u64, jobs: usize, mutant: Option<Mutant>) -> CampaignOptions {
        CampaignOptions {
            steps,
            jobs,
            mutant,
            check_determinism: false,
            out: std::env::temp_dir(),
            write_repro: false,
            stop_at_first: true,
            shrink_seconds: None,
            time_seconds: None,
            progress_within_seed: None,
        }
    }
}

/// The result of one seed.
#[derive(Clone, Debug)]
pub struct SeedResult {
    pub seed: u64,
    pub steps: u64,
    pub draw: Draw,
    pub outcome: Outcome,
    /// Its `traceSha256`, when the determinism check asked for it.
    pub trace_sha256: Option<Sha>,
    pub tasks_terminal: u64,
    pub checks: u64,
    pub faults: BTreeMap<(Site, FaultKind), u64>,
    pub sites: BTreeMap<Site, u64>,
    pub sometimes: BTreeMap<&'static str, u64>,
    pub transitions: BTreeMap<(Status, EventType), u64>,
    pub rejections: BTreeMap<&'static str, u64>,
    pub races: BTreeMap<&'static str, u64>,
    pub review: BTreeMap<&'static str, u64>,
    /// A determinism failure: the first record where two runs differ.
    pub nondeterminism: Option<String>,
    pub repro: Option<PathBuf>,
    /// How the shrink went, when the reproducer was shrunk: requests and
    /// faults before and after, and whether the time cap stopped it.
    pub shrunk: Option<ShrinkNote>,
    /// Why the reproducer could not be written (path and error).
    pub repro_error: Option<String>,
    pub report: Option<String>,
}

/// What shrinking a seed's reproducer did, for the summary.
#[derive(Clone, Debug)]
pub struct ShrinkNote {
    pub before: (usize, usize),
    pub after: (usize, usize),
    pub stopped_early: bool,
}

/// Drain steps a fuzz run allows for each step of its fault phase, when
/// that is more than the configured `drain_steps_max`. A drawn world can
/// take requests faster than it finishes them (one worker, several
/// clients), so its backlog, and the drain it needs, grow with the fault
/// phase: the longest drains of 600 seeds of 30,000 steps and 64 of
/// 100,000 took 4.6 and 4.3 times the fault phase, and a fixed budget of
/// 100,000 steps called 15 of those 64 healthy runs unconverged. A world
/// that never quiets down (a livelocking mutant) is still judged, after
/// ten times its fault phase (at most the knob's own limit).
pub const DRAIN_STEPS_PER_FAULT_STEP: u64 = 10;

/// The scenario a fuzz seed runs (no scripted requests or faults).
pub fn fuzz_scenario(seed: u64, steps: u64, mutant: Option<Mutant>, draw: &Draw) -> Scenario {
    let mut config = draw.config.clone();
    let longest = crate::config::integer_max("drain_steps_max").expect("an integer knob");
    config.drain_steps_max = config.drain_steps_max.max(
        steps
            .saturating_mul(DRAIN_STEPS_PER_FAULT_STEP)
            .min(longest),
    );
    Scenario {
        name: format!("fuzz-seed-{seed}"),
        description: format!("sim fuzz --seed {seed} --steps {steps}"),
        seed,
        steps_max: steps,
        mutant,
        config,
        requests: Vec::new(),
        faults: Vec::new(),
        schedule: Vec::new(),
        expect: Expect::default(),
        path: None,
        sim_version: None,
        config_sha256: None,
    }
}

/// Builds the world of one fuzz seed.
pub fn fuzz_world(seed: u64, steps: u64, mutant: Option<Mutant>) -> (Scenario, World, Draw) {
    let draw = draw(seed);
    let (scenario, world) = world_of_draw(seed, steps, mutant, &draw);
    (scenario, world, draw)
}

/// The world a draw describes, with the fuzz workload from `seed`.
pub fn world_of_draw(
    seed: u64,
    steps: u64,
    mutant: Option<Mutant>,
    draw: &Draw,
) -> (Scenario, World) {
    let scenario = fuzz_scenario(seed, steps, mutant, draw);
    let generator = Generator::new(
        seed,
        &draw.mix,
        draw.config.clients as u16,
        draw.config.apis as u16,
    );
    let world = World::new(scenario.setup(), &draw.rates, Some(Box::new(generator)));
    (scenario, world)
}

/// Runs one seed to its end.
pub fn run_seed(seed: u64, options: &CampaignOptions) -> SeedResult {
    let (scenario, mut world, draw) = fuzz_world(seed, options.steps, options.mutant);
    // Only the determinism check reads a seed's trace hash.
    if !options.check_determinism {
        world.trace = Trace::unhashed();
    }
    let outcome = catching(|| {
        if let Some(report) = options.progress_within_seed {
            let clock = crate::stopwatch::Stopwatch::start();
            let mut shown = 0.0;
            simulate(&mut world, options.steps, |world, _| {
                if world.steps % 65_536 == 0 && clock.seconds() - shown >= 1.0 {
                    shown = clock.seconds();
                    report(seed, world.steps, options.steps, shown);
                }
            })
        } else {
            simulate(&mut world, options.steps, |_, _| {})
        }
    })
    .unwrap_or_else(|message| panicked(&world, message));
    let result = summarize(seed, &world, draw, outcome);
    // The world logs no requests (the log grows with every one), so a
    // failing seed's reproducer needs a second run with the log on. That
    // run is also the determinism check's, when one is asked for: a run
    // that goes another way is nondeterminism, and its requests would not
    // reproduce the failure. Under a mutant most seeds fail, but a
    // violation ends its run early, so the second run is short.
    let log_requests = logs_requests(&result, options);
    // The logging run also watches for the reproducer's timeline page.
    let mut timeline = log_requests.then(crate::timeline::Recorder::new);
    let again = (options.check_determinism || log_requests).then(|| {
        // Hashed: the determinism check compares its hash with the first
        // run's, and the timeline page it feeds shows it.
        let (_, mut again, _) = fuzz_world(seed, options.steps, options.mutant);
        again.keep_request_log = log_requests;
        // A failing seed's report shows the causal slice of the whole trace.
        if !result.outcome.converged() {
            again.trace.kept = Some(Vec::new());
        }
        // A run that panicked panics again here, at the same step: what it
        // logged up to there is the reproducer.
        let _ = catching(|| {
            simulate(&mut again, options.steps, |world, added| {
                if let Some(timeline) = timeline.as_mut() {
                    timeline.observe(world, added);
                }
            })
        });
        again
    });
    conclude(options, &scenario, &world, result, again, timeline.as_ref())
}

/// Judges a seed's runs against each other and, when it failed, writes
/// its report, reproducer and timeline page. `again` is the second run,
/// when one was made: the determinism check's, or the one that logged the
/// requests of a failing seed.
fn conclude(
    options: &CampaignOptions,
    scenario: &Scenario,
    world: &World,
    mut result: SeedResult,
    again: Option<World>,
    timeline: Option<&crate::timeline::Recorder>,
) -> SeedResult {
    let seed = result.seed;
    let failed = !result.outcome.converged();
    let log_requests = logs_requests(&result, options);
    let same = again
        .as_ref()
        .is_none_or(|again| match result.trace_sha256 {
            Some(sha) => again.trace.sha256() == sha,
            None => same_ending(world, again),
        });
    if !same {
        result.nondeterminism = Some(first_difference(seed, options));
    }
    if failed {
        let path = options.out.join(format!("repro-{seed}.toml"));
        let command = format!("sim run {}", path.display());
        // A second run that went another way logged requests that would
        // not reproduce the first: no reproducer is written, and the
        // report says so instead of naming a file that is not there.
        let reproduce = if log_requests && !same {
            "none: the seed's second run went another way (NONDETERMINISM below)"
        } else {
            &command
        };
        result.report = Some(match &result.outcome.violation {
            Some(violation) => crate::report::violation_report(
                world,
                violation,
                reproduce,
                again
                    .as_ref()
                    .filter(|_| same)
                    .and_then(|again| again.trace.kept.as_deref()),
            ),
            None => format!(
                "DID NOT CONVERGE (seed {seed}): {}\n  reproduce: {reproduce}\n",
                result.outcome.not_converged.join("; ")
            ),
        });
        if let Some(logged) = again.filter(|_| log_requests && same) {
            let repro = reproducer(scenario, &logged, &result.outcome);
            let text = crate::scenario::write::to_toml(&repro);
            // Shrinking: the run as it was goes to `.full.toml`, the shrunk
            // scenario to `repro-<seed>.toml`.
            let full = options.out.join(format!("repro-{seed}.full.toml"));
            let first = if options.shrink_seconds.is_some() {
                &full
            } else {
                &path
            };
            match std::fs::create_dir_all(&options.out).and_then(|()| std::fs::write(first, &text))
            {
                Ok(()) => {
                    let shrunk = options.shrink_seconds.and_then(|seconds| {
                        let mut original = repro.clone();
                        original.path = Some(full.display().to_string());
                        let shrunk = crate::shrink::shrink(&original, seconds, &mut |_| {}).ok()?;
                        let written = crate::cli::shrink::shrunk_scenario(&original, &shrunk);
                        Some((original, written, shrunk.stopped_early))
                    });
                    // A written-out run that no longer fails is kept whole.
                    let small = shrunk.as_ref().map_or_else(
                        || text.clone(),
                        |(_, written, _)| crate::scenario::write::to_toml_compact(written),
                    );
                    let written = if first == &path {
                        Ok(())
                    } else {
                        std::fs::write(&path, small)
                    };
                    match written {
                        Ok(()) => {
                            result.repro = Some(path.clone());
                            result.shrunk =
                                shrunk.map(|(original, written, stopped_early)| ShrinkNote {
                                    before: crate::shrink::size(&original),
                                    after: crate::shrink::size(&written),
                                    stopped_early,
                                });
                        }
                        Err(error) => {
                            crate::output::remove_partial(&path);
                            result.repro_error = Some(format!("{}: {error}", path.display()));
                        }
                    }
                }
                Err(error) => {
                    crate::output::remove_partial(first);
                    result.repro_error = Some(format!("{}: {error}", first.display()));
                }
            }
            if let Some(timeline) = timeline {
                let info = crate::timeline::PageInfo {
                    title: &repro.name,
                    description: &repro.description,
                    command: &command,
                };
                let page = options.out.join(format!("repro-{seed}.html"));
                let _ = crate::timeline::write_timeline(
                    &page,
                    &logged,
                    &result.outcome,
                    timeline,
                    &info,
                );
            }
        }
    }
    result
}

/// Whether a seed's second run logs its requests, for a reproducer: when
/// it failed and reproducers are written.
fn logs_requests(result: &SeedResult, options: &CampaignOptions) -> bool {
    !result.outcome.converged() && options.write_repro
}

/// Whether two runs of a seed, the first of which was not hashed, ended
/// alike: the same number of steps, the same last records (step, time,
/// actor, verb, outcome, ids), the same counters, violation and faults
/// injected. Without `--check-determinism` a failing seed's second run,
/// which writes its reproducer, is held to this: a run that went another
/// way would hardly end on the same records with the same counts.
fn same_ending(first: &World, second: &World) -> bool {
    first.steps == second.steps
        && first.trace.tail(RING_LEN) == second.trace.tail(RING_LEN)
        && first.counters == second.counters
        && first.violation == second.violation
        && first.faults.injected == second.faults.injected
}

/// The outcome of a run that panicked: a failure of sim itself at the
/// step it had reached.
fn panicked(world: &World, message: String) -> Outcome {
    Outcome {
        violation: Some(as_violation(world, message)),
        not_converged: Vec::new(),
        fault_steps: world.steps,
        drain_steps: 0,
    }
}

fn summarize(seed: u64, world: &World, draw: Draw, outcome: Outcome) -> SeedResult {
    let mut review = BTreeMap::new();
    for item in &world.db.manual_review {
        *review.entry(item.reason.as_str()).or_insert(0) += 1;
    }
    SeedResult {
        seed,
        steps: world.steps,
        draw,
        trace_sha256: world.trace.hashed().then(|| world.trace.sha256()),
        tasks_terminal: world.counters.tasks_terminal,
        checks: world.counters.invariant_checks,
        faults: crate::report::fault_counts(world),
        sites: world.faults.site_occurrences().into_iter().collect(),
        sometimes: world.counters.sometimes.clone(),
        transitions: world.counters.transitions.clone(),
        rejections: world.counters.rejections.clone(),
        races: world.counters.races.clone(),
        review,
        outcome,
        nondeterminism: None,
        repro: None,
        shrunk: None,
        repro_error: None,
        report: None,
    }
}

/// Runs the seed twice in lockstep and names the first record that differs.
fn first_difference(seed: u64, options: &CampaignOptions) -> String {
    let (_, mut a, _) = fuzz_world(seed, options.steps, options.mutant);
    let (_, mut b, _) = fuzz_world(seed, options.steps, options.mutant);
    a.trace.kept = Some(Vec::new());
    b.trace.kept = Some(Vec::new());
    let _ = catching(|| simulate(&mut a, options.steps, |_, _| {}));
    let _ = catching(|| simulate(&mut b, options.steps, |_, _| {}));
    let left = a.trace.kept.take().unwrap_or_default();
    let right = b.trace.kept.take().unwrap_or_default();
    for (x, y) in left.iter().zip(right.iter()) {
        if x != y {
            return format!(
                "seed {seed}: first difference at step {}:\n  run 1: {}\n  run 2: {}",
                x.step,
                x.story_line(false),
                y.story_line(false)
            );
        }
    }
    if left.len() == right.len() {
        // The two runs made here agree: only the campaign's first run of
        // the seed went another way.
        return format!(
            "seed {seed}: two more runs agreed on all {} records, unlike the campaign's first run",
            left.len()
        );
    }
    format!(
        "seed {seed}: traces differ in length ({} vs {} records)",
        left.len(),
        right.len()
    )
}

/// A scenario that replays a fuzz failure: the same shape and seed, every
/// request issued and every fault injected written out, the failure named
/// in its description.
pub fn reproducer(scenario: &Scenario, world: &World, outcome: &Outcome) -> Scenario {
    let mut repro = scenario.clone();
    repro.name = format!("repro-{}", scenario.seed);
    repro.description = format!(
        "Reproducer of {} ({}). Requests and faults are written out; the seed only drives latencies.",
        scenario.name,
        match &outcome.violation {
            Some(Violation {
                invariant, step, ..
            }) => format!("{invariant} at step {step}"),
            None => "did not converge".to_string(),
        }
    );
    repro.requests = world.requests.to_vec();
    repro.faults = world
        .faults
        .injected
        .iter()
        .map(|fault| ScriptedFault {
            site: fault.site,
            kind: fault.kind,
            placement: fault.placement(),
            actor: Some(fault.actor),
        })
        .collect();
    // No expectation: the reproducer fails as the fuzz run did (exit 1 for
    // a violation, 3 for no convergence) until the bug is fixed, and then
    // passes, so it can be kept as a regression scenario as it is.
    repro.expect = Expect::default();
    repro
}

/// Runs `seeds` on `jobs` threads (one thread is just `jobs = 1`);
/// results in seed order whatever the threads did.
pub fn run_seeds(
    seeds: &[u64],
    options: &CampaignOptions,
    mut progress: impl FnMut(&SeedResult) + Send,
) -> Vec<SeedResult> {
    let jobs = options.jobs.max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (sender, receiver) = std::sync::mpsc::channel::<SeedResult>();
    let clock = crate::stopwatch::Stopwatch::start();
    let mut results: Vec<SeedResult> = Vec::new();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let sender = sender.clone();
            let next = &next;
            let stop = &stop;
            scope.spawn(move || {
                loop {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    if options
                        .time_seconds
                        .is_some_and(|limit| clock.seconds() > limit)
                    {
                        break;
                    }
                    let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(seed) = seeds.get(index) else {
                        break;
                    };
                    let result = run_seed(*seed, options);
                    if options.stop_at_first && !result.outcome.converged() {
                        stop.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    if sender.send(result).is_err() {
                        break;
                    }
                }
            });
        }
        drop(sender);
        for result in receiver {
            progress(&result);
            results.push(result);
        }
    });
    results.sort_by_key(|result| result.seed);
    if options.stop_at_first
        && let Some(first) = results.iter().position(|r| !r.outcome.converged())
    {
        results.truncate(first + 1);
    }
    results
}

pub fn out_dir(path: Option<&Path>) -> PathBuf {
    path.map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seed's run, unhashed as a campaign runs it, for `steps` steps.
    fn ran(seed: u64, steps: u64) -> World {
        let (_, mut world, _) = fuzz_world(seed, steps, None);
        world.trace = Trace::unhashed();
        simulate(&mut world, steps, |_, _| {});
        world
    }

    /// A failing seed whose second run (the one that logs its requests)
    /// goes another way writes no reproducer, and its report names none;
    /// one whose second run agrees writes both.
    #[test]
    fn a_second_run_that_went_another_way_writes_no_reproducer() {
        let (seed, steps, mutant) = (1, 10_000, Some(Mutant::NoInboxDedupe));
        let out = std::env::temp_dir().join(format!("sim-conclude-{}", std::process::id()));
        let _removed = RemovedAtEnd(out.clone());
        let options = CampaignOptions {
            write_repro: true,
            out: out.clone(),
            ..CampaignOptions::until_first_failure(steps, 1, mutant)
        };
        let first = || {
            let (scenario, mut world, draw) = fuzz_world(seed, steps, mutant);
            world.trace = Trace::unhashed();
            let outcome = simulate(&mut world, steps, |_, _| {});
            assert!(!outcome.converged(), "the mutant fails seed {seed}");
            let result = summarize(seed, &world, draw, outcome);
            (scenario, world, result)
        };
        // The second run: of this seed, or of another standing in for a
        // run that went another way.
        let second = |of: u64| {
            let (_, mut again, _) = fuzz_world(of, steps, mutant);
            again.keep_request_log = true;
            let _ = simulate(&mut again, steps, |_, _| {});
            again
        };
        // The seed's first run, concluded with a second run of `of`.
        let concluded = |of: u64| {
            let (scenario, world, result) = first();
            conclude(&options, &scenario, &world, result, Some(second(of)), None)
        };
        let repro = out.join(format!("repro-{seed}.toml"));

        let diverged = concluded(seed + 1);
        assert!(diverged.nondeterminism.is_some());
        assert_eq!(diverged.repro, None);
        let report = diverged.report.expect("a failing seed has a report");
        assert!(report.contains("reproduce: none"), "{report}");
        assert!(!report.contains("repro-1.toml"), "{report}");
        assert!(!repro.exists());

        let agreed = concluded(seed);
        assert_eq!(agreed.nondeterminism, None);
        assert_eq!(agreed.repro.as_ref(), Some(&repro));
        let report = agreed.report.expect("a failing seed has a report");
        assert!(report.contains(&format!("reproduce: sim run {}", repro.display())));
        assert!(repro.exists());
    }

    /// Removes a test's directory however the test ends.
    struct RemovedAtEnd(PathBuf);

    impl Drop for RemovedAtEnd {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Two runs of a seed end alike; a run that went another way (another
    /// seed, a shorter budget, one count apart) does not.
    #[test]
    fn same_ending_tells_a_run_that_went_another_way() {
        let first = ran(3, 2_000);
        assert!(same_ending(&first, &ran(3, 2_000)));
        assert!(!same_ending(&first, &ran(4, 2_000)));
        assert!(!same_ending(&first, &ran(3, 1_000)));
        let mut counted = ran(3, 2_000);
        counted.counters.idle_wakes += 1;
        assert!(!same_ending(&first, &counted));
        let mut reached = ran(3, 2_000);
        *reached
            .counters
            .sometimes
            .entry("never-reached")
            .or_insert(0) += 1;
        assert!(!same_ending(&first, &reached));
        // Only the last record differs.
        let mut recorded = ran(3, 2_000);
        let mut last = recorded.trace.last().expect("a step was taken").clone();
        last.outcome = "went-another-way";
        recorded.trace.push(&last);
        assert_eq!(recorded.steps, first.steps);
        assert!(!same_ending(&first, &recorded));
        let mut injected = ran(3, 2_000);
        injected.faults.injected.pop();
        assert!(!same_ending(&first, &injected));
    }
}
