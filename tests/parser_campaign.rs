//! A parser campaign that stays: the shipped scenarios, mutated thousands
//! of times from one seed (byte flips, truncations, dropped and doubled
//! lines, extreme numbers, deep nesting, control characters), each parsed
//! and, when valid, run with its steps capped. Every answer must be an
//! exit code 0-3 within a time bound, with no panic; a handful of the
//! mutants go through the `sim` binary, where exit 2 must leave standard
//! output empty.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::common::{scenario_files, scratch, sim, text};

/// The campaign's seed: change it to explore, keep it to reproduce.
const SEED: u64 = 19;
/// Mutated scenarios parsed (and run when valid).
const CASES: usize = 3000;
/// The fault phase and the drain of a valid mutant are capped here, in the
/// test: a mutant may ask for 10^12 steps, which sim honours.
const STEPS_CAP: u64 = 150;
/// The longest one case may take (parse and capped run, debug build).
const CASE_SECONDS_MAX: u64 = 10;
/// Mutants also run through the binary.
const SPAWNED: usize = 16;

struct Draws(ChaCha8Rng);

impl Draws {
    fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const EXTREMES: &[&str] = &[
    "0",
    "-1",
    "1000000000000",
    "1000000000001",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "99999999999999999999999999",
    "-9223372036854775808",
    "1e308",
    "1.5",
    "nan",
    "inf",
    "0x7fffffff",
    "\"5\"",
];

const CONTROLS: &[char] = &[
    '\u{0}', '\u{1b}', '\u{7}', '\u{7f}', '\u{9b}', '\u{2028}', '\u{202e}', '\r', '\t', '"', '[',
    ']', '=', '{', '\\', '#',
];

/// One mutation of `bytes`; the mutation's name, for the report.
fn mutate(bytes: &mut Vec<u8>, draws: &mut Draws) -> &'static str {
    let len = bytes.len().max(1);
    match draws.below(8) {
        0 => {
            let at = draws.below(len).min(bytes.len().saturating_sub(1));
            if let Some(byte) = bytes.get_mut(at) {
                *byte ^= 1 << draws.below(8);
            }
            "byte flip"
        }
        1 => {
            bytes.truncate(draws.below(len));
            "truncation"
        }
        2 | 3 => {
            let mut lines: Vec<Vec<u8>> =
                bytes.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
            let at = draws.below(lines.len());
            let name = if draws.below(2) == 0 {
                lines.remove(at);
                "line dropped"
            } else {
                let line = lines[at].clone();
                let copies = 1 + draws.below(3);
                for _ in 0..copies {
                    lines.insert(at, line.clone());
                }
                "line doubled"
            };
            *bytes = lines.join(&b'\n');
            name
        }
        4 => {
            let numbers: Vec<(usize, usize)> = digit_runs(bytes);
            if numbers.is_empty() {
                return "no number";
            }
            let (start, end) = *draws.pick(&numbers);
            let extreme = draws.pick(EXTREMES).as_bytes().to_vec();
            bytes.splice(start..end, extreme);
            "extreme number"
        }
        5 => {
            let depth = *draws.pick(&[16usize, 200, 5000]);
            let nest = if draws.below(2) == 0 {
                format!("deep = {}{}\n", "[".repeat(depth), "]".repeat(depth))
            } else {
                format!("deep = {}1{}\n", "{ a = ".repeat(depth), " }".repeat(depth))
            };
            let at = line_start(bytes, draws);
            bytes.splice(at..at, nest.into_bytes());
            "deep nesting"
        }
        6 => {
            let c = *draws.pick(CONTROLS);
            let mut encoded = [0u8; 4];
            let at = draws.below(len + 1).min(bytes.len());
            bytes.splice(at..at, c.encode_utf8(&mut encoded).bytes());
            "control character"
        }
        _ => {
            // A table or array-of-tables header moved or repeated.
            let header = *draws.pick(&[
                "[config]\n",
                "[[requests]]\n",
                "[[faults]]\n",
                "[expect]\n",
                "[config.x]\n",
            ]);
            let at = line_start(bytes, draws);
            bytes.splice(at..at, header.bytes());
            "header inserted"
        }
    }
}

fn digit_runs(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut start = None;
    for (index, byte) in bytes.iter().enumerate() {
        match (byte.is_ascii_digit(), start) {
            (true, None) => start = Some(index),
            (false, Some(from)) => {
                runs.push((from, index));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(from) = start {
        runs.push((from, bytes.len()));
    }
    runs
}

fn line_start(bytes: &[u8], draws: &mut Draws) -> usize {
    let mut starts = vec![0];
    starts.extend(
        bytes
            .iter()
            .enumerate()
            .filter(|(_, byte)| **byte == b'\n')
            .map(|(index, _)| index + 1),
    );
    *draws.pick(&starts)
}

/// What one case came to in-process.
enum Answer {
    /// Refused (exit 2).
    Refused,
    /// Ran with capped steps; whether the world went quiet before the cap
    /// (then the binary, uncapped, runs it the same), and its exit.
    Ran { quiet: bool, exit: u8 },
}

fn answer(text: &str, path: &Path) -> Answer {
    let mut scenario = match sim::scenario::parse::parse(text, Some(path)) {
        Ok(scenario) => scenario,
        Err(_) => return Answer::Refused,
    };
    let uncapped = (scenario.steps_max, scenario.config.drain_steps_max);
    scenario.steps_max = scenario.steps_max.min(STEPS_CAP);
    scenario.config.drain_steps_max = scenario.config.drain_steps_max.min(STEPS_CAP);
    let world = sim::run::world_for(&scenario);
    let finished = sim::run::execute(&scenario, world, |_, _| {});
    let outcome = &finished.outcome;
    // Quiet before either cap: the uncapped run is this run.
    let quiet = outcome.fault_steps < scenario.steps_max
        && outcome.drain_steps == 0
        && outcome.violation.is_none()
        && uncapped.0 >= scenario.steps_max
        && uncapped.1 >= scenario.config.drain_steps_max;
    Answer::Ran {
        quiet,
        exit: finished.exit,
    }
}

#[test]
fn mutated_scenarios_get_an_exit_code_never_a_panic() {
    let originals: Vec<(std::path::PathBuf, Vec<u8>)> = scenario_files()
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).expect("a shipped scenario");
            (path, bytes)
        })
        .collect();
    assert!(originals.len() > 20, "the scenarios are there");
    let mut draws = Draws(ChaCha8Rng::seed_from_u64(SEED));
    let dir = scratch("parser-campaign");
    let mut failures = Vec::new();
    let (mut refused, mut ran, mut spawned) = (0usize, 0usize, 0usize);
    for case in 0..CASES {
        let (path, original) = draws.pick(&originals);
        let mut bytes = original.clone();
        let mut names = Vec::new();
        for _ in 0..1 + draws.below(3) {
            names.push(mutate(&mut bytes, &mut draws));
        }
        let started = Instant::now();
        // Scenario text is UTF-8 by the time it is parsed (`load` refuses
        // anything else with exit 2); the lossy text keeps the mutation.
        let lossy = String::from_utf8_lossy(&bytes).into_owned();
        let result = catch_unwind(AssertUnwindSafe(|| answer(&lossy, path)));
        let took = started.elapsed();
        let what = format!("case {case} ({}: {})", path.display(), names.join(", "));
        let answer = match result {
            Ok(answer) => answer,
            Err(_) => {
                failures.push(format!("{what}: panicked"));
                continue;
            }
        };
        if took > Duration::from_secs(CASE_SECONDS_MAX) {
            failures.push(format!("{what}: took {took:?}"));
        }
        let utf8 = std::str::from_utf8(&bytes).is_ok();
        let expected = match answer {
            _ if !utf8 => Some(2),
            Answer::Refused => {
                refused += 1;
                Some(2)
            }
            Answer::Ran { quiet, exit } => {
                ran += 1;
                if exit > 3 {
                    failures.push(format!("{what}: exit {exit}"));
                }
                quiet.then_some(exit)
            }
        };
        // A few go through the binary: same exit, and exit 2 prints
        // nothing on standard output.
        if let Some(expected) = expected
            && spawned < SPAWNED
            && case % 7 == 0
        {
            spawned += 1;
            let file = dir.join(format!("case-{case}.toml"));
            std::fs::write(&file, &bytes).expect("scratch file");
            let output = sim(&["run", file.to_str().unwrap(), "--quiet"]);
            let code = output.status.code();
            if code != Some(i32::from(expected)) {
                failures.push(format!(
                    "{what}: the binary exited {code:?}, in-process {expected}: {}",
                    text(&output.stderr)
                ));
            }
            if code == Some(2) && !output.stdout.is_empty() {
                failures.push(format!(
                    "{what}: exit 2 with output {}",
                    text(&output.stdout)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // The campaign reaches both sides: most mutants are refused, some run.
    assert!(
        refused > CASES / 4 && ran > CASES / 20,
        "{refused} refused, {ran} ran"
    );
    assert!(spawned >= SPAWNED / 2, "{spawned} spawned");
}
