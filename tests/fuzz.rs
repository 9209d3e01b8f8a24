//! Fuzz campaigns: threads and shards change nothing in the results, a
//! violation planted on purpose (a mutant) yields a reproducer that
//! `sim run` replays to the same violation, and determinism holds.

use crate::common::{planted_violation, scratch, sim, text};

fn summary(args: &[&str]) -> serde_json::Value {
    let output = sim(args);
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", text(&output.stderr)))
}

/// The parts of a summary that do not depend on the wall clock.
fn stable(mut value: serde_json::Value) -> serde_json::Value {
    let object = value.as_object_mut().expect("a summary is an object");
    object.remove("seconds");
    object.remove("seeds");
    value
}

#[test]
fn jobs_and_shards_give_the_same_results_as_one_thread() {
    let base = [
        "fuzz", "--seed", "11", "--runs", "6", "--steps", "1500", "--json", "--quiet",
    ];
    let one = stable(summary(&base));
    let mut two_threads = base.to_vec();
    two_threads.extend(["--jobs", "2"]);
    assert_eq!(stable(summary(&two_threads)), one);
    let dir = scratch("shards");
    let mut files = Vec::new();
    for shard in ["0/2", "1/2"] {
        let mut args = base.to_vec();
        args.extend(["--shard", shard]);
        let output = sim(&args);
        let file = dir.join(format!("shard-{}.json", shard.replace('/', "-")));
        std::fs::write(&file, &output.stdout).expect("write shard");
        files.push(file);
    }
    let mut merge = vec!["fuzz", "merge", "--json"];
    merge.extend(files.iter().map(|f| f.to_str().unwrap()));
    assert_eq!(stable(summary(&merge)), one);
    assert_eq!(one["runs"], 6);
}

#[test]
fn a_planted_violation_gives_a_reproducer_that_replays_it() {
    let dir = scratch("repro");
    let mut args = planted_violation(&dir);
    // Checked for determinism too: the second run, which checks it, is
    // also the one that logs the requests for the reproducer, and it must
    // agree with the first.
    args.extend(["--quiet", "--check-determinism"]);
    let output = sim(&args);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stdout));
    let stdout = text(&output.stdout);
    assert!(!stdout.contains("NONDETERMINIS"), "{stdout}");
    assert!(
        stdout.contains("VIOLATION key-bound-to-fingerprint"),
        "{stdout}"
    );
    assert!(stdout.contains("reproduce: sim run"), "{stdout}");
    // The written-out run replays step for step; the shrunk reproducer
    // breaks the same invariant with less.
    let full = dir.join("repro-1.full.toml");
    let shrunk = dir.join("repro-1.toml");
    let written = std::fs::read_to_string(&full).expect("the full reproducer was written");
    let small = std::fs::read_to_string(&shrunk).expect("the shrunk reproducer was written");
    assert!(
        written.contains("[[requests]]") && written.contains("mutant = \"no-fingerprint-check\"")
    );
    assert!(
        small.contains("mutant = \"no-fingerprint-check\""),
        "{small}"
    );
    assert!(
        small.matches("[[requests]]").count() < written.matches("[[requests]]").count(),
        "{small}"
    );
    assert!(stdout.contains("shrunk from"), "{stdout}");
    assert!(written.contains("key-bound-to-fingerprint at step"));
    let original_step = stdout
        .lines()
        .find(|l| l.starts_with("VIOLATION"))
        .expect("a violation line");
    for (repro, same_step) in [(&full, true), (&shrunk, false)] {
        let text_of = std::fs::read_to_string(repro).unwrap();
        assert!(!text_of.contains("[expect]"), "{text_of}");
        let replay = sim(&["run", repro.to_str().unwrap(), "--quiet"]);
        let replayed = text(&replay.stdout);
        assert_eq!(
            replay.status.code(),
            Some(1),
            "the reproducer fails as the fuzz run did: {replayed}"
        );
        assert!(
            replayed.contains("VIOLATION key-bound-to-fingerprint"),
            "{replayed}"
        );
        if same_step {
            assert!(
                replayed.contains(original_step),
                "same invariant at the same step: {original_step}"
            );
        }
    }
}

#[test]
fn a_clean_campaign_with_determinism_checks_passes() {
    let output = sim(&[
        "fuzz",
        "--seed",
        "3",
        "--runs",
        "4",
        "--steps",
        "1500",
        "--check-determinism",
        "--quiet",
    ]);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("violations    none"), "{stdout}");
    assert!(!stdout.contains("NONDETERMINISM"), "{stdout}");
}

#[test]
fn merge_refuses_a_file_that_is_not_a_summary() {
    let dir = scratch("merge-bad");
    let file = dir.join("bad.json");
    std::fs::write(&file, "{\"runs\": \"many\"}").unwrap();
    let output = sim(&["fuzz", "merge", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("bad.json"));
}

/// A drawn world may take requests faster than it finishes them, so a long
/// fault phase leaves a long drain. Seed 65's world has one worker: after
/// 30,000 fault steps it needs about 130,000 drain steps, more than the
/// default `drain_steps_max`, and a fuzz run allows ten drain steps per
/// fault step, so it converges; a short run keeps the default budget.
#[test]
fn a_long_fuzz_run_gets_a_drain_that_grows_with_it() {
    use sim::fuzz::campaign::{DRAIN_STEPS_PER_FAULT_STEP, fuzz_world};
    let default = sim::config::Config::default().drain_steps_max;
    let (short, _, _) = fuzz_world(65, 10_000, None);
    assert_eq!(short.config.drain_steps_max, default);

    let (scenario, mut world, _) = fuzz_world(65, 30_000, None);
    assert_eq!(
        scenario.config.drain_steps_max,
        30_000 * DRAIN_STEPS_PER_FAULT_STEP
    );
    let outcome = sim::simulate::simulate(&mut world, 30_000, |_, _| {});
    assert!(outcome.violation.is_none(), "{:?}", outcome.violation);
    assert!(
        outcome.not_converged.is_empty(),
        "{:?}",
        outcome.not_converged.first()
    );
    assert!(
        outcome.drain_steps > default,
        "the drain ({} steps) needed more than the default budget",
        outcome.drain_steps
    );
}

/// A panic inside one seed (here one a test asks for) is reported as a
/// failure of sim itself, with its message, a reproducer and exit 1 in
/// the summary, and the seeds around it still run.
#[test]
fn a_panic_inside_a_seed_is_a_failure_and_the_campaign_goes_on() {
    use sim::fuzz::campaign::{CampaignOptions, run_seeds};
    use sim::fuzz::panic::{PANIC_AT_SEED, SIM_PANIC};
    use sim::fuzz::summary::Summary;
    // A seed no other test runs: the hook is process-wide.
    let doomed = 9_000_001;
    PANIC_AT_SEED.store(doomed, std::sync::atomic::Ordering::Relaxed);
    let dir = scratch("seed-panic");
    let options = CampaignOptions {
        steps: 6000,
        jobs: 2,
        mutant: None,
        check_determinism: false,
        out: dir.clone(),
        write_repro: true,
        stop_at_first: false,
        shrink_seconds: None,
        time_seconds: None,
        progress_within_seed: None,
    };
    let results = run_seeds(&[doomed - 1, doomed, doomed + 1], &options, |_| {});
    PANIC_AT_SEED.store(u64::MAX, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(results.len(), 3, "every seed ran");
    let failed: Vec<u64> = results
        .iter()
        .filter(|result| !result.outcome.converged())
        .map(|result| result.seed)
        .collect();
    assert_eq!(failed, vec![doomed]);
    let result = &results[1];
    let violation = result.outcome.violation.as_ref().expect("a failure");
    assert_eq!(violation.invariant, SIM_PANIC);
    assert_eq!(violation.step, 4096, "the first look at the world's size");
    assert!(
        violation.message.contains("the panic a test asked for"),
        "{}",
        violation.message
    );
    let report = result.report.as_deref().unwrap_or_default();
    assert!(report.contains("SIM PANICKED"), "{report}");
    let repro = result.repro.as_ref().expect("a reproducer");
    let text = std::fs::read_to_string(repro).expect("the reproducer is written");
    assert!(text.contains("seed = 9000001"), "{text}");
    let mut summary = Summary::default();
    for result in &results {
        summary.add_seed(result);
    }
    assert_eq!(summary.exit_code(), 1);
}

/// The fuzz client is a closed loop: at its bound on live tasks (created
/// and not compacted) it waits, so a world whose pipeline falls behind
/// stays that far behind instead of queueing without end. Seed 1 draws one
/// worker for a client that creates every few milliseconds.
#[test]
fn the_fuzz_client_waits_while_the_world_holds_its_bound_of_live_tasks() {
    use sim::fuzz::campaign::world_of_draw;
    let (bound, in_flight) = (40, 20);
    let mut draw = sim::fuzz::swarm::draw(1);
    draw.mix.live_tasks_max = bound;
    draw.mix.requests_in_flight_max = in_flight;
    let (_, mut world) = world_of_draw(1, 40_000, None, &draw);
    let mut most = 0;
    let outcome = sim::simulate::simulate(&mut world, 40_000, |world, _| {
        most = most.max(world.live_tasks());
    });
    assert!(outcome.violation.is_none(), "{:?}", outcome.violation);
    assert!(
        outcome.not_converged.is_empty(),
        "{:?}",
        outcome.not_converged
    );
    assert!(world.counters.tasks_compacted > 100);
    // Creates sent before the bound was reached still commit: it is
    // overshot by no more than the requests in flight then.
    assert!(
        (bound..=bound + in_flight + 1).contains(&most),
        "{most} live tasks"
    );
}

/// The same for requests in flight: seed 140 draws one API for two
/// clients that send every few milliseconds, and pauses aimed at it; open
/// loop, its requests in flight grow past 6,000 in 10^4 steps.
#[test]
fn the_fuzz_client_waits_while_its_bound_of_requests_is_in_flight() {
    use sim::fuzz::campaign::world_of_draw;
    use sim::world::actors::client::ClientOp;
    let bound = 100;
    let mut draw = sim::fuzz::swarm::draw(140);
    draw.mix.requests_in_flight_max = bound;
    let (_, mut world) = world_of_draw(140, 20_000, None, &draw);
    // Status reads aside: a waiting client polls now and then, and those
    // pile up while the API is paused.
    let mut most = 0;
    let outcome = sim::simulate::simulate(&mut world, 20_000, |world, _| {
        let sent = world.outgoing.values();
        let writes = sent.filter(|o| !matches!(*o.op, ClientOp::Read { .. }));
        most = most.max(writes.count() as u64);
    });
    assert!(outcome.violation.is_none(), "{:?}", outcome.violation);
    assert!(
        outcome.not_converged.is_empty(),
        "{:?}",
        outcome.not_converged
    );
    // One more than the bound: the twin of a create sent to two APIs.
    assert!(
        (bound - 20..=bound + 1).contains(&most),
        "{most} requests in flight"
    );
}

/// A waiting client polls now and then, so a world in which nothing is
/// ever compacted (records kept for a day) still takes steps while the
/// client waits, and its run ends.
#[test]
fn a_world_that_never_compacts_still_runs_to_its_steps() {
    use sim::fuzz::campaign::world_of_draw;
    use sim::world::engine::ids::ActorKind;
    use sim::world::engine::step::Verb;
    let mut draw = sim::fuzz::swarm::draw(1);
    draw.mix.live_tasks_max = 20;
    draw.config.idempotency_ttl_ms = 86_400_000;
    let (_, mut world) = world_of_draw(1, 20_000, None, &draw);
    // The bound stops new creates: no create is first sent while the
    // world holds 20 tasks (with nothing compacted, every task is live).
    // Those already on their way when it reached the bound still land
    // (an API paused for seconds holds a queue of them), so how far above
    // it the world ends is the world's, not the bound's.
    let (mut sent, mut sent_at_bound) = (0, 0);
    let outcome = sim::simulate::simulate(&mut world, 20_000, |world, _| {
        let Some(record) = world.trace.last() else {
            return;
        };
        if record.actor.kind == ActorKind::Client
            && record.verb == Verb::Send
            && record.outcome == "create"
        {
            sent += 1;
            if world.db.tasks.len() >= 20 {
                sent_at_bound += 1;
            }
        }
    });
    assert!(outcome.violation.is_none(), "{:?}", outcome.violation);
    assert_eq!(world.counters.tasks_compacted, 0);
    assert!(outcome.fault_steps >= 20_000);
    assert!(world.db.tasks.len() >= 20, "{} tasks", world.db.tasks.len());
    assert!(sent >= 20, "{sent} creates sent");
    assert_eq!(sent_at_bound, 0, "creates sent at the bound");
}

/// A reproducer replays the turns the fuzz client waited through (written
/// as `waits` and `wait_ms` on the request after them), so its requests
/// take the same places among the world's wakes: the written-out run has
/// the fuzz run's trace, byte for byte, from the client's first wait on.
#[test]
fn a_reproducer_replays_the_turns_a_waiting_client_let_pass() {
    use sim::fuzz::campaign::reproducer;
    use sim::scenario::parse::parse;
    use sim::scenario::write::to_toml;
    let steps = 20_000;
    let mut draw = sim::fuzz::swarm::draw(1);
    draw.mix.live_tasks_max = 40;
    let (scenario, mut world) = sim::fuzz::campaign::world_of_draw(1, steps, None, &draw);
    world.keep_request_log = true;
    let outcome = sim::simulate::simulate(&mut world, steps, |_, _| {});
    let waited: Vec<u32> = world
        .requests
        .iter()
        .map(|r| r.waits)
        .filter(|w| *w > 0)
        .collect();
    assert!(
        waited.len() > 100,
        "the client waited {} times",
        waited.len()
    );
    assert!(waited.contains(&63), "and polled");
    let text = to_toml(&reproducer(&scenario, &world, &outcome));
    assert!(text.contains("\nwaits = 63\nwait_ms = "), "written out");
    let repro = parse(&text, None).expect("a reproducer parses");
    // What a reproducer writes of a request (an operator's names no
    // client or API).
    let written = |r: &sim::world::input::Request| (r.at_ms, r.kind.clone(), r.waits, r.wait_ms);
    let differs =
        (repro.requests.iter().zip(&world.requests)).position(|(r, w)| written(r) != written(w));
    assert_eq!(differs, None, "the first request read back otherwise");
    assert_eq!(repro.requests.len(), world.requests.len());
    let replayed = sim::run::execute(&repro, sim::run::world_for(&repro), |_, _| {});
    assert_eq!(replayed.world.steps, world.steps);
    assert_eq!(replayed.world.trace.sha256(), world.trace.sha256());
}
