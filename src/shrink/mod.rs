//! Shrinking a failing scenario to its story: greedy delta debugging
//! (ddmin-style chunk removal, then one by one) over its requests and
//! faults, then fewer actors, knobs back to their defaults, a shorter fault
//! phase and simpler inputs, and last readable fault placements (`after =
//! "worker.put"`) instead of absolute steps. A candidate is kept only when
//! a normal in-process run of it fails with the same invariant as the
//! original; candidates are tried in a fixed order, so the same input gives
//! the same output. The wall-clock budget can only stop the search early
//! (the best scenario so far is returned, and `stopped_early` says so).

use crate::config::{Config, KnobValue};
use crate::faults::{Injected, Placement, ScriptedFault, Site};
use crate::run::world_for;
use crate::scenario::{Request, RequestKind, Scenario};
use crate::simulate::{Outcome, simulate};
use crate::stopwatch::Stopwatch;
use crate::task::Text;
use crate::trace::Record;
use crate::world::World;
use crate::world::engine::ids::ActorKind;
use crate::world::engine::step::{Action, Verb};
use crate::world::stores::db::Input;

mod renumber;

/// What a shrink ended with.
#[derive(Clone, Debug)]
pub struct Shrunk {
    pub scenario: Scenario,
    /// The invariant the original and the shrunk scenario both break.
    pub invariant: &'static str,
    /// Candidate runs tried.
    pub runs: u64,
    /// Candidate scenarios built and offered, run or not: once the budget
    /// is spent the passes stop building them (each is a copy of the
    /// scenario, and a long run's reproducer is tens of megabytes).
    pub candidates: u64,
    /// The time budget ran out before every pass was done: the scenario is
    /// the best found so far.
    pub stopped_early: bool,
}

/// Why a scenario cannot be shrunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotShrinkable {
    /// It converges with no violation: there is no failure to keep.
    Passes,
}

/// Runs a scenario through both phases; the world is kept for its trace.
fn run(scenario: &Scenario, keep_trace: bool) -> (World, Outcome) {
    let mut world = world_for(scenario);
    // Candidates are judged by their failure alone; the answers are for
    // dumps, and the trace's hash for `sim run`.
    world.answers = None;
    world.trace = crate::trace::Trace::unhashed();
    if keep_trace {
        world.trace.kept = Some(Vec::new());
    }
    let outcome = simulate(&mut world, scenario.steps_max, |_, _| {});
    (world, outcome)
}

struct Search<'a> {
    target: &'static str,
    /// The story of `best`, once asked for (`story`).
    story: Option<(Scenario, std::rc::Rc<Story>)>,
    best: Scenario,
    runs: u64,
    candidates: u64,
    clock: Stopwatch,
    seconds: f64,
    out_of_time: bool,
    progress: &'a mut dyn FnMut(&str),
}

impl Search<'_> {
    /// Whether `candidate` still fails with the target invariant. Once the
    /// budget is spent every candidate is refused, so the search ends with
    /// the best so far.
    fn fails(&mut self, candidate: &Scenario) -> bool {
        if self.spent() {
            return false;
        }
        self.runs += 1;
        let (_, outcome) = run(candidate, false);
        outcome.fired() == Some(self.target)
    }

    /// Whether the budget is spent (and so every candidate refused).
    fn spent(&mut self) -> bool {
        if !self.out_of_time && self.clock.seconds() > self.seconds {
            self.out_of_time = true;
        }
        self.out_of_time
    }

    /// Keeps `candidate` when it still fails; says whether it did.
    fn try_keep(&mut self, candidate: Scenario) -> bool {
        self.candidates += 1;
        // Spent first: comparing a large scenario with the best costs as
        // much as copying it.
        if self.spent() || candidate == self.best || !self.fails(&candidate) {
            return false;
        }
        self.best = candidate;
        true
    }

    /// Keeps `candidate` when it still fails as it is or, failing that,
    /// with its faults re-anchored on the same steps of the same tasks
    /// (`reanchor`): removing a request moves every later step, and a
    /// fault placed by the count of its actor's steps moves with them.
    fn try_keep_or_repair(&mut self, candidate: Scenario) -> bool {
        if self.try_keep(candidate.clone()) {
            return true;
        }
        if self.out_of_time
            || candidate.faults.is_empty()
            || candidate.faults.len() > REANCHOR_FAULTS_MAX
        {
            return false;
        }
        let story = self.story();
        match reanchor(self, &story, candidate) {
            Some(repaired) => self.try_keep(repaired),
            None => false,
        }
    }

    /// The story of the best scenario so far.
    fn story(&mut self) -> std::rc::Rc<Story> {
        if let Some((scenario, story)) = &self.story
            && *scenario == self.best
        {
            return story.clone();
        }
        self.runs += 1;
        let story = std::rc::Rc::new(Story::of(&self.best));
        self.story = Some((self.best.clone(), story.clone()));
        story
    }

    fn note(&mut self, pass: &str) {
        let line = format!(
            "shrink: {pass:<22} {:>5} requests {:>4} faults  ({} runs, {:.1}s)",
            self.best.requests.len(),
            self.best.faults.len(),
            self.runs,
            self.clock.seconds()
        );
        (self.progress)(&line);
    }

    /// ddmin over one list of the scenario: remove chunks (halves, then
    /// quarters, … then single items) while the failure stays.
    fn ddmin<T: Clone>(
        &mut self,
        get: impl Fn(&Scenario) -> &Vec<T>,
        set: impl Fn(&mut Scenario, Vec<T>),
    ) -> bool {
        let mut changed = false;
        let mut parts = 2usize;
        loop {
            let items = get(&self.best).clone();
            if items.is_empty() || self.out_of_time {
                break;
            }
            let len = items.len();
            let parts_now = parts.min(len);
            let chunk = len.div_ceil(parts_now);
            let mut removed = false;
            // Later chunks first: what comes after the failure is the
            // likeliest to be irrelevant, and removing it shifts nothing.
            let mut start = (len - 1) / chunk * chunk;
            loop {
                let end = (start + chunk).min(len);
                let mut candidate = self.best.clone();
                let mut kept = items[..start].to_vec();
                kept.extend_from_slice(&items[end..]);
                set(&mut candidate, kept);
                if self.try_keep_or_repair(candidate) {
                    removed = true;
                    changed = true;
                    break;
                }
                // Once the budget is spent every candidate is refused:
                // building the rest (a copy of the scenario each) would
                // only keep the search from ending.
                if start == 0 || self.out_of_time {
                    break;
                }
                start -= chunk;
            }
            if removed {
                parts = parts.saturating_sub(1).max(2);
                continue;
            }
            if parts_now >= len {
                break;
            }
            parts = (parts * 2).min(len);
        }
        changed
    }
}

/// Shrinks `original`, which must fail (a violation, or not converging),
/// to a smaller scenario that fails with the same invariant. `seconds`
/// caps the wall time; `progress` gets one line per pass.
pub fn shrink(
    original: &Scenario,
    seconds: f64,
    progress: &mut dyn FnMut(&str),
) -> Result<Shrunk, NotShrinkable> {
    let clock = Stopwatch::start();
    let (world, outcome) = run(original, true);
    let Some(target) = outcome.fired() else {
        return Err(NotShrinkable::Passes);
    };
    let mut search = Search {
        target,
        best: original.clone(),
        story: None,
        runs: 1,
        candidates: 0,
        clock,
        seconds,
        out_of_time: false,
        progress,
    };
    search.note("original");
    // Nothing after the failure matters to it: requests issued later and
    // faults placed later are dropped, and the fault phase ends there.
    if outcome.violation.is_some() {
        let failed_at = outcome.failed_at(world.steps);
        let time_ms = world.last_step_ms;
        let mut candidate = search.best.clone();
        candidate
            .requests
            .retain(|request| request.at_ms <= time_ms);
        candidate
            .faults
            .retain(|fault| fault.placement.step().is_none_or(|step| step <= failed_at));
        candidate.steps_max = candidate.steps_max.min(failed_at);
        search.try_keep(candidate);
        search.note("cut after the failure");
    }
    // Faults placed by global step drift when requests go; placed after a
    // step of their own actor they follow that actor's story.
    replace_faults(&mut search, true);
    search.note("faults re-placed");
    for _ in 0..3 {
        let before = search.best.clone();
        for _ in 0..4 {
            let mut changed = search.ddmin(|s| &s.faults, |s, f| s.faults = f);
            search.note("faults");
            for _ in 0..64 {
                if !reduce_requests(&mut search) {
                    break;
                }
                changed = true;
            }
            search.note("requests");
            if !changed || search.out_of_time {
                break;
            }
            replace_faults(&mut search, false);
        }
        fewer_actors(&mut search);
        search.note("actors");
        knobs_to_defaults(&mut search);
        smaller_counts(&mut search);
        search.note("knobs");
        if search.best == before || search.out_of_time {
            break;
        }
    }
    shorter_fault_phase(&mut search);
    search.note("steps_max");
    simpler_inputs(&mut search);
    without_waits(&mut search);
    earlier_requests(&mut search);
    search.note("inputs");
    replace_faults(&mut search, false);
    fault_actors(&mut search);
    search.note("placements");
    let stopped_early = search.out_of_time;
    let mut scenario = search.best;
    // The shrunk scenario keeps the original's contract: a scenario that
    // expected its violation still does (exit 0 while it fires), a
    // reproducer without expectations still fails (exit 1 or 3) until the
    // bug is fixed. Facts about the original's dump no longer apply.
    scenario.expect.violation = original.expect.violation.clone();
    scenario.expect.facts.clear();
    Ok(Shrunk {
        scenario,
        invariant: target,
        runs: search.runs,
        candidates: search.candidates,
        stopped_early,
    })
}

/// The injection each scripted fault became in `world` (`None`: it never
/// fired): the first unused injection of its site, kind and actor at or
/// after its placement.
fn injections(scenario: &Scenario, world: &World) -> Vec<Option<Injected>> {
    let mut used = vec![false; world.faults.injected.len()];
    let mut out = Vec::new();
    for fault in &scenario.faults {
        let found = world
            .faults
            .injected
            .iter()
            .enumerate()
            .find(|(index, injected)| {
                !used[*index]
                    && injected.site == fault.site
                    && injected.kind == fault.kind
                    && fault.actor.is_none_or(|actor| actor == injected.actor)
                    && fault
                        .placement
                        .step()
                        .is_none_or(|step| injected.step >= step)
            });
        out.push(found.map(|(index, injected)| {
            used[index] = true;
            injected.clone()
        }));
    }
    out
}

/// The placement of a fault injected as `injected`, "right after the
/// actor's own step": the nth time the actor ran the step before the
/// fault (for a crash, the step it crashed after), counting only the
/// records `counted` lets through. `None` when the actor took no such step.
fn anchored(
    records: &[Record],
    injected: &Injected,
    counted: impl Fn(&Record) -> bool,
) -> Option<ScriptedFault> {
    let actor = injected.actor;
    // A crash lands right after step `injected.step`; any other fault
    // fires inside that step, so its anchor is the actor's step before.
    let last = if injected.site == Site::Crash {
        injected.step
    } else {
        injected.step.saturating_sub(1)
    };
    let own = |record: &&Record| {
        record.actor == actor
            && record.step <= last
            && !matches!(record.verb, Verb::Crash | Verb::Restart)
            && counted(record)
    };
    let anchor = records.iter().rev().find(own)?;
    let action: Action = anchor.action();
    let nth = records
        .iter()
        .filter(own)
        .filter(|record| record.action() == action)
        .count() as u64;
    Some(ScriptedFault {
        site: injected.site,
        kind: injected.kind,
        placement: Placement::After { action, nth },
        actor: Some(actor),
    })
}

/// Each fault placed after its actor's own step, as it fired in `world`.
fn after_placements(scenario: &Scenario, world: &World) -> Vec<Option<ScriptedFault>> {
    let records: &[Record] = world.trace.kept.as_deref().unwrap_or(&[]);
    injections(scenario, world)
        .into_iter()
        .map(|injected| anchored(records, injected.as_ref()?, |_| true))
        .collect()
}

/// Re-places faults after their actor's own steps: all at once, and when
/// that loses the failure (and `each`), one at a time.
fn replace_faults(search: &mut Search, each: bool) {
    if search.spent() {
        return;
    }
    let (world, _) = run(&search.best, true);
    let placed = after_placements(&search.best, &world);
    let mut all = search.best.clone();
    for (fault, new) in all.faults.iter_mut().zip(&placed) {
        if let Some(new) = new {
            *fault = new.clone();
        }
    }
    if search.try_keep(all) || !each {
        return;
    }
    for (index, new) in placed.into_iter().enumerate() {
        if search.spent() {
            break;
        }
        if let Some(new) = new {
            let mut candidate = search.best.clone();
            candidate.faults[index] = new;
            search.try_keep(candidate);
        }
    }
}

/// Prefers a fault without `nth` beyond the first, and `nth` placements
/// of the first occurrence: tries each simpler form.
fn fault_actors(search: &mut Search) {
    for index in 0..search.best.faults.len() {
        if search.spent() {
            break;
        }
        if let Placement::After { action, nth } = search.best.faults[index].placement
            && nth > 1
        {
            // Often the first time the step ran is enough.
            let mut candidate = search.best.clone();
            candidate.faults[index].placement = Placement::After { action, nth: 1 };
            search.try_keep(candidate);
        }
    }
}

/// Fewer APIs, publishers, workers and clients: requests and faults that
/// named a removed actor move to the last one left.
fn fewer_actors(search: &mut Search) {
    let kinds = [
        (ActorKind::Api, "apis"),
        (ActorKind::Publisher, "publishers"),
        (ActorKind::Worker, "workers"),
        (ActorKind::Client, "clients"),
    ];
    for (kind, knob) in kinds {
        let mut target = 1;
        loop {
            let count = count_of(&search.best.config, knob);
            if target >= count || search.spent() {
                break;
            }
            let mut candidate = search.best.clone();
            set_count(&mut candidate, kind, knob, target);
            if !search.try_keep(candidate) {
                // One actor is not enough: try one fewer than now, once.
                if target == 1 && count > 2 {
                    target = count - 1;
                    continue;
                }
                break;
            }
            target = 1;
        }
    }
}

fn count_of(config: &Config, knob: &str) -> u64 {
    config
        .values()
        .into_iter()
        .find_map(|(name, value)| match value {
            KnobValue::Integer(n) if name == knob => Some(n),
            _ => None,
        })
        .unwrap_or(1)
}

fn set_count(scenario: &mut Scenario, kind: ActorKind, knob: &str, count: u64) {
    scenario.config.set(knob, KnobValue::Integer(count));
    let last = (count - 1) as u16;
    for request in &mut scenario.requests {
        match kind {
            ActorKind::Client => request.client = request.client.min(last),
            ActorKind::Api => request.api = request.api.map(|api| api.min(last)),
            _ => {}
        }
    }
    for fault in &mut scenario.faults {
        if let Some(actor) = &mut fault.actor
            && actor.kind == kind
        {
            actor.index = actor.index.min(last);
        }
    }
}

/// Every knob back to its default, one at a time (in table order).
fn knobs_to_defaults(search: &mut Search) {
    let defaults = Config::default();
    for (name, value) in defaults.values() {
        if search.spent() {
            break;
        }
        let current = search.best.config.values();
        if current.iter().any(|(n, v)| *n == name && *v == value) {
            continue;
        }
        let mut candidate = search.best.clone();
        candidate.config.set(name, value);
        search.try_keep(candidate);
    }
}

/// Knobs that count things (the quota, attempts, deliveries) as small as
/// the failure allows: a quota of 1 needs two creates to oversell, where
/// a drawn 15 needed sixteen.
fn smaller_counts(search: &mut Search) {
    let counts = [
        "quota",
        "delivery_attempts_max",
        "attempts_max",
        "client_attempts_max",
        "redrive_max",
        "store_calls_max",
    ];
    let defaults = Config::default();
    for name in counts {
        let current = count_of(&search.best.config, name);
        // A knob at its default is as simple as it gets.
        if current == count_of(&defaults, name) {
            continue;
        }
        let low = crate::config::KNOBS
            .iter()
            .find_map(|knob| match knob.kind {
                crate::config::KnobType::Integer { min, .. } if knob.name == name => Some(min),
                _ => None,
            })
            .unwrap_or(0);
        // The smallest first, then a binary search between it and now.
        let (mut low, mut high) = (low, current);
        while low < high && !search.out_of_time {
            let middle = low + (high - low) / 2;
            let mut candidate = search.best.clone();
            candidate.config.set(name, KnobValue::Integer(middle));
            if search.try_keep(candidate) {
                high = middle;
            } else {
                low = middle + 1;
            }
        }
    }
}

/// The requests with no waits before them (`Request::waits`): a fuzz
/// reproducer carries the turns its client let pass, which keep its trace
/// but rarely its failure.
fn without_waits(search: &mut Search) {
    if search.spent() || search.best.requests.iter().all(|r| r.waits == 0) {
        return;
    }
    let mut candidate = search.best.clone();
    candidate.requests.iter_mut().for_each(Request::drop_waits);
    search.try_keep(candidate);
}

/// Request times shifted so the first turn of a request is at 0 ms.
fn earlier_requests(search: &mut Search) {
    if search.spent() {
        return;
    }
    let first_turns = search.best.requests.iter().map(|r| r.first_turn_ms());
    let Some(first) = first_turns.min() else {
        return;
    };
    if first == 0 {
        return;
    }
    let mut candidate = search.best.clone();
    for request in &mut candidate.requests {
        request.at_ms -= first;
    }
    search.try_keep(candidate);
}

/// The shortest fault phase that still fails: the failing step, then a
/// binary search below the current one.
fn shorter_fault_phase(search: &mut Search) {
    if search.spent() {
        return;
    }
    let (world, outcome) = run(&search.best, false);
    if outcome.violation.is_some() {
        let mut candidate = search.best.clone();
        candidate.steps_max = outcome.failed_at(world.steps);
        search.try_keep(candidate);
    }
    let (mut low, mut high) = (0u64, search.best.steps_max);
    while low + 1 < high && !search.out_of_time {
        let middle = low + (high - low) / 2;
        let mut candidate = search.best.clone();
        candidate.steps_max = middle;
        if search.try_keep(candidate) {
            high = middle;
        } else {
            low = middle;
        }
    }
}

/// Simpler inputs and keys: a create's input down to its `doc`, the first
/// request at time 0, keys renamed `key-1`, `key-2`, … in order of first
/// use.
fn simpler_inputs(search: &mut Search) {
    for index in 0..search.best.requests.len() {
        if search.spent() {
            break;
        }
        let RequestKind::Create { key, input } = &search.best.requests[index].kind else {
            continue;
        };
        let value: serde_json::Value =
            serde_json::from_str(&input.canonical).expect("canonical JSON parses");
        let Some(map) = value.as_object() else {
            continue;
        };
        let keep: serde_json::Map<String, serde_json::Value> = map
            .iter()
            .filter(|(name, _)| matches!(name.as_str(), "doc" | "format"))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        if keep.len() == map.len() {
            continue;
        }
        // Every create of the same key and input changes together: they
        // are one intent.
        let (key, old) = (key.clone(), input.clone());
        let new = Input::of(&serde_json::Value::Object(keep));
        let mut candidate = search.best.clone();
        for request in &mut candidate.requests {
            if let RequestKind::Create { key: k, input } = &mut request.kind
                && *k == key
                && input.canonical == old.canonical
            {
                *input = new.clone();
            }
        }
        search.try_keep(candidate);
    }
    rename_keys(search);
}

fn rename_keys(search: &mut Search) {
    if search.spent() {
        return;
    }
    let mut names: Vec<crate::task::Text> = Vec::new();
    let mut candidate = search.best.clone();
    let mut rename = |key: &mut crate::task::Text| {
        let index = match names.iter().position(|k| k == key) {
            Some(index) => index,
            None => {
                names.push(key.clone());
                names.len() - 1
            }
        };
        *key = crate::task::Text::from(format!("key-{:04}", index + 1));
    };
    for request in &mut candidate.requests {
        match &mut request.kind {
            RequestKind::Create { key, .. } => rename(key),
            RequestKind::Cancel { target } | RequestKind::ReadStatus { target } => {
                if let crate::scenario::Target::Key(key) = target {
                    rename(key);
                }
            }
            _ => {}
        }
    }
    search.try_keep(candidate);
}

/// Requests and faults counted, for progress lines and reports.
pub fn size(scenario: &Scenario) -> (usize, usize) {
    (scenario.requests.len(), scenario.faults.len())
}

/// What the best scenario's run says about its requests and faults: which
/// key each task belongs to, and for each fault the step it is anchored
/// after (the actor's step before it fired) and the task it fired on.
struct Story {
    records: Vec<Record>,
    key_of_task: std::collections::BTreeMap<crate::world::engine::ids::TaskId, Text>,
    /// Per scripted fault: its injection and the key of the task of the
    /// step it fired in.
    anchors: Vec<Option<(Injected, Option<Text>)>>,
    /// Keys the failure names (its entities, or what did not converge).
    failing_keys: Vec<Text>,
}

fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .filter(|token| !token.is_empty())
}

impl Story {
    fn of(scenario: &Scenario) -> Story {
        let (mut world, outcome) = run(scenario, true);
        let records = world.trace.kept.take().unwrap_or_default();
        let key_of_task: std::collections::BTreeMap<_, _> = world
            .db
            .tasks
            .iter()
            .map(|row| (row.id, row.key.clone()))
            .collect();
        let key_of = |task: Option<crate::world::engine::ids::TaskId>| {
            task.and_then(|task| key_of_task.get(&task).cloned())
        };
        let mut anchors = Vec::new();
        for injected in injections(scenario, &world) {
            anchors.push(injected.map(|injected| {
                // The task of the step the fault fired in (for a crash,
                // the step it crashed after).
                let fired = records
                    .iter()
                    .find(|record| record.step == injected.step)
                    .and_then(|record| record.task);
                (injected, key_of(fired))
            }));
        }
        let mut texts: Vec<String> = Vec::new();
        if let Some(violation) = &outcome.violation {
            texts.extend(violation.entities.iter().cloned());
            texts.push(violation.message.clone());
            if let Some(record) = records.iter().find(|r| r.step == violation.step)
                && let Some(task) = record.task
            {
                texts.push(task.to_string());
            }
        }
        texts.extend(outcome.not_converged.iter().cloned());
        let mut failing_keys: Vec<Text> = Vec::new();
        for text in &texts {
            for token in tokens(text) {
                let key = key_of_task
                    .iter()
                    .find(|(id, key)| id.to_string() == token || key.to_string() == token)
                    .map(|(_, key)| key.clone());
                if let Some(key) = key
                    && !failing_keys.contains(&key)
                {
                    failing_keys.push(key);
                }
            }
        }
        Story {
            records,
            key_of_task,
            anchors,
            failing_keys,
        }
    }

    fn key_of(&self, task: crate::world::engine::ids::TaskId) -> Option<&Text> {
        self.key_of_task.get(&task)
    }

    /// The faults for a world that keeps only the tasks of `keys`: a
    /// fault that fired on another task goes, and each anchor's `nth`
    /// counts only the actor's steps on kept tasks (or on none).
    fn faults_for(
        &self,
        scenario: &Scenario,
        keys: &std::collections::BTreeSet<Text>,
    ) -> Vec<ScriptedFault> {
        let kept = |record: &Record| {
            record
                .task
                .is_none_or(|task| self.key_of(task).is_none_or(|key| keys.contains(key)))
        };
        let mut faults = Vec::new();
        for (fault, anchor) in scenario.faults.iter().zip(&self.anchors) {
            let Some((injected, fired_key)) = anchor else {
                faults.push(fault.clone());
                continue;
            };
            if fired_key.as_ref().is_some_and(|key| !keys.contains(key)) {
                continue;
            }
            match anchored(&self.records, injected, kept) {
                Some(placed) => faults.push(placed),
                None => faults.push(fault.clone()),
            }
        }
        faults
    }
}

/// The key a request is about, if any (creates, cancels and reads by key;
/// by task id, and an outside producer's event, through the task it
/// names in the run).
fn request_key(story: &Story, request: &crate::scenario::Request) -> Option<Text> {
    use crate::scenario::Target;
    match &request.kind {
        RequestKind::Create { key, .. } => Some(key.clone()),
        RequestKind::Cancel { target } | RequestKind::ReadStatus { target } => match target {
            Target::Key(key) => Some(key.clone()),
            Target::Task(task) => story.key_of(*task).cloned(),
        },
        RequestKind::AppendEvent { event } | RequestKind::DeliverEvent { event } => {
            crate::world::engine::ids::TaskId::parse(&event.task_id)
                .and_then(|task| story.key_of(task).cloned())
        }
        _ => None,
    }
}

/// Removes requests: first everything but the failing keys' requests
/// (with every fault, then with only the faults that fired on those keys'
/// steps, each also with the task ids renamed for the smaller world),
/// then whole keys (ddmin over the keys), then single requests; each
/// candidate's faults are re-placed as they would land without the tasks
/// it drops.
fn reduce_requests(search: &mut Search) -> bool {
    if search.spent() {
        return false;
    }
    let mut changed = false;
    let story = Story::of(&search.best);
    // Units: the requests of one key, or one request about no key.
    // Looked up in sets: a long run's reproducer has a hundred thousand
    // keys, and lists made each candidate cost keys x requests.
    let mut units: Vec<Option<Text>> = Vec::new();
    let mut seen: std::collections::BTreeSet<Text> = std::collections::BTreeSet::new();
    for request in &search.best.requests {
        let key = request_key(&story, request);
        match &key {
            Some(text) if !seen.insert(text.clone()) => {}
            _ => units.push(key),
        }
    }
    let keys_of = |units: &[Option<Text>]| -> std::collections::BTreeSet<Text> {
        units.iter().flatten().cloned().collect()
    };
    let candidate_of = |best: &Scenario, keep_units: &[Option<Text>], story: &Story| {
        let keys = keys_of(keep_units);
        let mut candidate = best.clone();
        let mut unkeyed = keep_units.iter().filter(|unit| unit.is_none()).count();
        candidate.requests = best
            .requests
            .iter()
            .filter(|request| match request_key(story, request) {
                Some(key) => keys.contains(&key),
                None => {
                    // Key-less requests are kept by count, in order.
                    let keep = unkeyed > 0;
                    unkeyed = unkeyed.saturating_sub(1);
                    keep
                }
            })
            .cloned()
            .collect();
        candidate.faults = story.faults_for(best, &keys);
        candidate
    };
    if !story.failing_keys.is_empty() && units.len() > story.failing_keys.len() {
        let keep: Vec<Option<Text>> = story.failing_keys.iter().cloned().map(Some).collect();
        let candidate = candidate_of(&search.best, &keep, &story);
        // Also with only the faults that fired on the failing keys' own
        // steps, re-anchored on those steps: in a world of a few requests
        // the rest fire elsewhere or not at all, and the part of the
        // actor a fault hit may fall to another of its kind.
        let keys = keys_of(&keep);
        let mut own = candidate.clone();
        own.faults = search
            .best
            .faults
            .iter()
            .zip(&story.anchors)
            .filter(|(_, anchor)| {
                anchor
                    .as_ref()
                    .and_then(|(_, key)| key.as_ref())
                    .is_some_and(|key| keys.contains(key))
            })
            .map(|(fault, _)| fault.clone())
            .collect();
        for candidate in [candidate, own] {
            if keep_with_tasks_renamed(search, &story, candidate) {
                search.note("the failure's own keys");
                return true;
            }
        }
    }
    // ddmin over units (keys); key-less units stay.
    let mut parts = 2usize;
    let mut keyed: Vec<Option<Text>> = units.iter().filter(|u| u.is_some()).cloned().collect();
    let unkeyed: Vec<Option<Text>> = units.iter().filter(|u| u.is_none()).cloned().collect();
    while keyed.len() > 1 && !search.out_of_time {
        let len = keyed.len();
        let parts_now = parts.min(len);
        let chunk = len.div_ceil(parts_now);
        let mut removed = false;
        let mut start = (len - 1) / chunk * chunk;
        loop {
            let end = (start + chunk).min(len);
            let mut keep: Vec<Option<Text>> = keyed[..start].to_vec();
            keep.extend_from_slice(&keyed[end..]);
            keep.extend(unkeyed.iter().cloned());
            let candidate = candidate_of(&search.best, &keep, &story);
            if search.try_keep_or_repair(candidate) {
                keyed = keep.into_iter().filter(|u| u.is_some()).collect();
                removed = true;
                changed = true;
                break;
            }
            if start == 0 || search.out_of_time {
                break;
            }
            start -= chunk;
        }
        if removed {
            // The story changed: its anchors are recomputed next round.
            return true;
        }
        if parts_now >= len {
            break;
        }
        parts = (parts * 2).min(len);
    }
    // Then single requests, with faults as they are.
    changed |= search.ddmin(|s| &s.requests, |s, r| s.requests = r);
    changed
}

/// Keeps `candidate` when it fails as it is, re-anchored, or with the
/// task ids its requests name moved to the ids its own run gives the same
/// keys' tasks (`renumber`).
fn keep_with_tasks_renamed(search: &mut Search, story: &Story, candidate: Scenario) -> bool {
    if search.try_keep_or_repair(candidate.clone()) {
        return true;
    }
    if search.spent() {
        return false;
    }
    search.runs += 1;
    let (world, _) = run(&candidate, false);
    let before = story
        .key_of_task
        .iter()
        .map(|(task, key)| (*task, key.clone()));
    let after = world.db.tasks.iter().map(|row| (row.id, row.key.clone()));
    let moved = renumber::moves(
        &renumber::tasks_by_key(before),
        &renumber::tasks_by_key(after),
    );
    let mut renamed = candidate;
    renumber::rename_tasks(&mut renamed, &moved) && search.try_keep_or_repair(renamed)
}

/// Re-anchoring probes more faults than this only at a cost the search
/// cannot afford on a large scenario (one probe run per fault).
const REANCHOR_FAULTS_MAX: usize = 6;

/// A step that the same story has in any variant of a scenario: the
/// actor, the step name, the key of the task it was about, and which of
/// the actor's steps of that name on that key it was. `kind_ordinal`
/// counts the same steps of every actor of the actor's kind: in a smaller
/// world another worker (or API, publisher, client) may play the part.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Landmark {
    actor: crate::world::engine::ids::ActorId,
    action: Action,
    key: Option<Text>,
    ordinal: usize,
    kind_ordinal: usize,
}

fn landmark_of(
    records: &[Record],
    index: usize,
    key_of: &dyn Fn(&Record) -> Option<Text>,
) -> Landmark {
    let anchor = &records[index];
    let mut landmark = Landmark {
        actor: anchor.actor,
        action: anchor.action(),
        key: key_of(anchor),
        ordinal: 0,
        kind_ordinal: 0,
    };
    for record in &records[..=index] {
        if landmark.is_step(record, key_of) {
            landmark.kind_ordinal += 1;
            landmark.ordinal += usize::from(record.actor == anchor.actor);
        }
    }
    landmark
}

impl Landmark {
    /// Whether `record` is the landmark's step, taken by any actor of its
    /// kind.
    fn is_step(&self, record: &Record, key_of: &dyn Fn(&Record) -> Option<Text>) -> bool {
        record.actor.kind == self.actor.kind
            && record.action() == self.action
            && key_of(record) == self.key
    }

    /// Where the landmark is in `records`: the same actor's step if it
    /// took it, else the same step of another actor of its kind.
    fn find(&self, records: &[Record], key_of: &dyn Fn(&Record) -> Option<Text>) -> Option<usize> {
        let nth_where = |wanted: usize, also: &dyn Fn(&Record) -> bool| {
            let mut seen = 0;
            records.iter().position(|record| {
                let same = self.is_step(record, key_of) && also(record);
                seen += usize::from(same);
                same && seen == wanted
            })
        };
        nth_where(self.ordinal, &|record| record.actor == self.actor)
            .or_else(|| nth_where(self.kind_ordinal, &|_| true))
    }
}

/// `candidate` (the best scenario with requests or faults removed) with
/// each remaining fault placed after the same landmark step as in the
/// best scenario's run (by its own actor, or by another of its kind when
/// that one never takes it): faults in firing order, each found in a
/// probe run with the faults before it placed. `None` when a landmark is
/// gone.
fn reanchor(search: &mut Search, story: &Story, mut candidate: Scenario) -> Option<Scenario> {
    let best_faults = search.best.faults.clone();
    // Which of the best scenario's faults each candidate fault is.
    let mut used = vec![false; best_faults.len()];
    let mut wanted: Vec<(u64, Landmark, ScriptedFault)> = Vec::new();
    let key_in_story = |record: &Record| record.task.and_then(|task| story.key_of(task).cloned());
    for fault in &candidate.faults {
        let index = (0..best_faults.len()).find(|i| !used[*i] && best_faults[*i] == *fault)?;
        used[index] = true;
        let (injected, _) = story.anchors.get(index)?.as_ref()?;
        let last = if injected.site == Site::Crash {
            injected.step
        } else {
            injected.step.saturating_sub(1)
        };
        let anchor = story.records.iter().rposition(|record| {
            record.actor == injected.actor
                && record.step <= last
                && !matches!(record.verb, Verb::Crash | Verb::Restart)
        })?;
        wanted.push((
            injected.step,
            landmark_of(&story.records, anchor, &key_in_story),
            fault.clone(),
        ));
    }
    wanted.sort_by_key(|(step, _, _)| *step);
    candidate.faults.clear();
    for (_, landmark, fault) in wanted {
        if search.out_of_time || search.clock.seconds() > search.seconds {
            search.out_of_time = true;
            return None;
        }
        search.runs += 1;
        let (mut world, _) = run(&candidate, true);
        let records = world.trace.kept.take().unwrap_or_default();
        let keys: std::collections::BTreeMap<_, _> = world
            .db
            .tasks
            .iter()
            .map(|row| (row.id, row.key.clone()))
            .collect();
        let key_of = |record: &Record| record.task.and_then(|task| keys.get(&task).cloned());
        let index = landmark.find(&records, &key_of)?;
        let anchor = &records[index];
        let nth = records[..=index]
            .iter()
            .filter(|record| record.actor == anchor.actor && record.action() == anchor.action())
            .count() as u64;
        candidate.faults.push(ScriptedFault {
            placement: Placement::After {
                action: landmark.action,
                nth,
            },
            actor: Some(anchor.actor),
            ..fault
        });
    }
    Some(candidate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::engine::ids::{ActorId, TaskId};

    fn record(step: u64, worker: u16, verb: Verb, task: u32) -> Record {
        Record {
            step,
            actor: ActorId::new(ActorKind::Worker, worker),
            verb,
            task: TaskId::parse(&format!("task-{task}")),
            ..Record::blank()
        }
    }

    /// A fault re-anchored in a smaller world lands after the same step of
    /// the same task: its own actor's when that actor takes it, else the
    /// same step of another actor of its kind.
    #[test]
    fn a_landmark_is_found_on_its_own_actor_first_then_on_one_of_its_kind() {
        let key_of = |record: &Record| record.task.map(|task| Text::from(task.to_string()));
        // In the story: worker-1 reads back task-1, then worker-2 does.
        let story = [
            record(1, 0, Verb::ReadBack, 1),
            record(2, 1, Verb::Put, 2),
            record(3, 1, Verb::ReadBack, 1),
        ];
        let landmark = landmark_of(&story, 2, &key_of);
        assert_eq!((landmark.ordinal, landmark.kind_ordinal), (1, 2));
        // worker-2 still takes the step: its own record, not the first.
        let same = [
            record(1, 0, Verb::ReadBack, 1),
            record(2, 1, Verb::ReadBack, 1),
        ];
        assert_eq!(landmark.find(&same, &key_of), Some(1));
        // worker-2 never does: the second read-back of task-1 by any
        // worker stands in for it.
        let other = [
            record(1, 0, Verb::ReadBack, 1),
            record(2, 0, Verb::Put, 1),
            record(3, 0, Verb::ReadBack, 1),
        ];
        assert_eq!(landmark.find(&other, &key_of), Some(2));
        // Nor does anyone a second time: the landmark is gone.
        assert_eq!(landmark.find(&other[..2], &key_of), None);
    }
}
