//! Every limit bounded: a valid scenario whose world cannot make progress
//! still ends, within a budget the test states, never growing until memory
//! runs out.

use sim::run::{execute, world_for};

use crate::common::{planted_violation, scratch, sim, text};

/// One create under a projector that never acks in time (each step up to
/// an hour, one delivery allowed): its events were dead-lettered and
/// re-driven for ever, 17,167 re-drives in 10^4 steps, and with
/// `steps_max = 10^12` the process ran out of memory.
const PROJECTOR_NEVER_ACKS: &str = r#"
name = "projector-never-acks"
seed = 1
steps_max = 100000

[config]
delivery_attempts_max = 1
latency_ms_max = 3600000

[[requests]]
at = 0
kind = "create"
key = "intent-0001"
input = { doc = "doc-1" }
"#;

#[test]
fn dead_lettered_events_are_re_driven_within_redrive_max_and_the_run_ends() {
    let scenario = sim::scenario::parse::parse(PROJECTOR_NEVER_ACKS, None).expect("valid");
    let finished = execute(&scenario, world_for(&scenario), |_, _| {});
    let world = &finished.world;
    assert!(
        world.steps < 1_000,
        "the run ends by itself: {} steps",
        world.steps
    );
    let redrives = world.db.task(world.db.tasks.first().expect("one task").id);
    assert!(
        u64::from(redrives.event_redrives) <= scenario.config.redrive_max,
        "{} event re-drives",
        redrives.event_redrives
    );
    assert!(
        world.broker.dead_letters.len() < 20,
        "{} dead letters",
        world.broker.dead_letters.len()
    );
    // Past the budget a dead letter goes to a human, as a task's work does.
    assert!(
        world
            .db
            .review_items()
            .iter()
            .any(|item| item.reason.as_str() == "DEAD_LETTERED")
    );
    assert!(matches!(finished.exit, 0 | 3), "exit {}", finished.exit);
}

/// Flags that wrapped around, allocated without bound or started a thread
/// per job are refused with exit 2, naming the flag and its range, and
/// nothing on standard output.
#[test]
fn command_line_numbers_out_of_range_are_refused() {
    let max = u64::MAX.to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        // Seed + runs past 2^64 printed `runs 0` and exited 0.
        (vec!["fuzz", "--seed", &max, "--runs", "2"], "--runs"),
        // The seed list of 10^10 seeds aborted allocating.
        (vec!["fuzz", "--runs", "10000000000"], "--runs"),
        (vec!["fuzz", "--runs", "0"], "--runs"),
        // A thread per job, a million of them.
        (vec!["fuzz", "--jobs", "1000000"], "--jobs"),
        // Scenario files cap steps at 10^12; the flag did not.
        (vec!["fuzz", "--steps", &max], "--steps"),
        (
            vec!["mutants", "--score", "--seed", &max, "--runs", "2"],
            "--runs",
        ),
        (
            vec!["mutants", "--score", "--runs", "10000000000"],
            "--runs",
        ),
        (vec!["mutants", "--score", "--steps", &max], "--steps"),
        (vec!["mutants", "--score", "--jobs", "1000000"], "--jobs"),
        (vec!["bench", "--repeat", "1000000000000"], "--repeat"),
    ];
    for (args, flag) in cases {
        let output = sim(&args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            output.stdout.is_empty(),
            "{args:?}: {}",
            text(&output.stdout)
        );
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
}

/// More jobs than seeds start one thread per seed, and say so.
#[test]
fn jobs_beyond_the_seeds_are_clamped_and_said() {
    let output = sim(&["fuzz", "--seed", "3", "--steps", "200", "--jobs", "64"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("--jobs 64 clamped to 1"),
        "{}",
        text(&output.stderr)
    );
}

/// `--out` that cannot hold reproducers is refused before the campaign
/// runs; it used to run, find the failure, skip the reproducer without a
/// word and still print `reproduce: sim run <that path>`.
#[test]
fn an_out_that_cannot_hold_reproducers_is_refused_before_the_campaign() {
    let dir = scratch("out-file");
    let file = dir.join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let output = sim(&planted_violation(&file));
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(output.stdout.is_empty(), "{}", text(&output.stdout));
    assert!(
        stderr.contains("--out") && stderr.contains("not a directory"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
}

/// A reproducer that cannot be written later (here its path is taken by a
/// directory) is said loudly, and the exit code is 2, not the violation's 1.
#[test]
fn a_reproducer_that_cannot_be_written_is_reported_with_exit_2() {
    let dir = scratch("out-blocked");
    std::fs::create_dir_all(dir.join("repro-1.toml")).unwrap();
    let output = sim(&planted_violation(&dir));
    let stderr = text(&output.stderr);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains("cannot write reproducer") && stderr.contains("repro-1.toml"),
        "{stderr}"
    );
    assert!(stdout.contains("REPRODUCER NOT WRITTEN"), "{stdout}");
    assert!(!stdout.contains("reproducer written"), "{stdout}");
}

/// Runs `sim` with `stdin` fed from `input` and a deadline: a run that
/// outlives it is killed and the test fails, rather than hanging.
fn sim_with_deadline(args: &[&str], input: Vec<u8>, seconds: u64) -> std::process::Output {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = crate::common::sim_command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sim starts");
    let mut stdin = child.stdin.take().expect("piped");
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let started = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed().as_secs() > seconds {
            let _ = child.kill();
            panic!("sim {args:?} still running after {seconds} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("output");
    let _ = feeder.join();
    output
}

/// One line of 3 GB of zeros made `sim transition` abort (134) allocating
/// it; a line past 1 MiB is now an error line, and the next line is read.
#[test]
fn a_line_past_the_bound_is_an_error_and_the_next_line_is_read() {
    let mut input = vec![b'0'; 5 << 20];
    input.extend_from_slice(b"\n\n");
    let output = sim_with_deadline(&["transition"], input, 60);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        stdout.contains("longer than 1048576 bytes") && stdout.contains("\"line\":1"),
        "{stdout}"
    );
    let dir = scratch("long-history-line");
    let history = dir.join("h.jsonl");
    let mut bytes = vec![b' '; 5 << 20];
    bytes.extend_from_slice(b"x\n");
    std::fs::write(&history, bytes).unwrap();
    let output = sim(&["replay-events", history.to_str().unwrap()]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(output.stdout.is_empty());
    assert!(
        stderr.contains(":1") && stderr.contains("longer than"),
        "{stderr}"
    );
}

/// `sim run /dev/zero` read without end; a scenario is now at most 256 MiB.
#[cfg(target_os = "linux")]
#[test]
fn an_endless_scenario_file_is_refused() {
    let output = sim_with_deadline(&["run", "/dev/zero"], Vec::new(), 120);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("/dev/zero: is longer than"), "{stderr}");
    assert!(output.stdout.is_empty());
}

/// A fuzz world keeps every finished task's row, so a run of 10^12 steps
/// grew until memory ran out. Past the bound on tasks (here lowered to
/// 100 for the test) the run stops and does not converge, saying why.
#[test]
fn a_world_that_outgrows_its_bound_on_tasks_stops_and_says_why() {
    let outcome = sim::simulate::with_tasks_max(100, || {
        let (_, mut world, _) = sim::fuzz::campaign::fuzz_world(2, 1_000_000, None);
        let outcome = sim::simulate::simulate(&mut world, 1_000_000, |_, _| {});
        assert!(world.steps < 20_000, "{} steps", world.steps);
        outcome
    });
    assert!(outcome.violation.is_none(), "{outcome:?}");
    assert!(
        outcome
            .not_converged
            .iter()
            .any(|reason| reason.contains("more than sim keeps (100)")),
        "{outcome:?}"
    );
}

/// Twenty creates behind one worker, issued in a fault phase of 60 steps;
/// the backlog then takes about 460 drain steps to finish.
fn backlog(drain_steps_max: u64) -> String {
    let mut text = format!(
        "name = \"backlog\"\nseed = 1\nsteps_max = 60\n\n[config]\nworkers = 1\ndrain_steps_max = {drain_steps_max}\n"
    );
    for n in 1..=20 {
        text.push_str(&format!(
            "\n[[requests]]\nat = 0\nkind = \"create\"\nkey = \"intent-{n:04}\"\ninput = {{ doc = \"doc-{n}\" }}\n"
        ));
    }
    text
}

#[test]
fn a_drain_still_making_progress_gets_more_steps_within_five_budgets() {
    let ample = sim::scenario::parse::parse(&backlog(100_000), None).expect("valid");
    let needed = execute(&ample, world_for(&ample), |_, _| {}).outcome;
    assert!(needed.converged(), "{needed:?}");
    // Past one budget of 100 steps, within five: it converges by the
    // tenths it is given while tasks still finish.
    assert!(
        (100..500).contains(&needed.drain_steps),
        "the backlog drains in {} steps",
        needed.drain_steps
    );
    let scenario = sim::scenario::parse::parse(&backlog(100), None).expect("valid");
    let outcome = execute(&scenario, world_for(&scenario), |_, _| {}).outcome;
    assert!(outcome.converged(), "{outcome:?}");
    assert_eq!(outcome.drain_steps, needed.drain_steps);
    // With a budget so small that five of them are not enough, it is
    // judged at five budgets, not before and not after.
    let scenario = sim::scenario::parse::parse(&backlog(20), None).expect("valid");
    let outcome = execute(&scenario, world_for(&scenario), |_, _| {}).outcome;
    assert!(!outcome.converged());
    assert_eq!(
        outcome.drain_steps,
        20 * sim::simulate::DRAIN_BUDGETS_WHILE_PROGRESSING
    );
}
