//! The timeline page (`sim run FILE --html OUT.html`): one self-contained
//! HTML file that draws a run as lanes over virtual time. A `Recorder`
//! watches the run step by step (the records, the state each step left
//! its entities in, which client send reached which API call); `page`
//! turns what it saw into the page, its data inline as JSON and its script
//! and style inline from `page.js` and `page.css`, so the file opens from
//! `file://` with no network. The same run gives the same bytes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Value, json};

use crate::error::InputError;
use crate::hash::push_hex;
use crate::simulate::Outcome;
use crate::trace::Record;
use crate::world::World;
use crate::world::actors::api::ApiPhase;
use crate::world::engine::ids::{ActorId, ActorKind, CallId, OutboxId, TaskId};
use crate::world::engine::step::Verb;
use crate::world::stores::db::{EffectKind, Token, Topic};

/// The most steps one page holds. A longer run's page shows its last
/// `STEPS_MAX` steps (those before the end, and before the violation if
/// one fired) and says so. A step costs about 150 bytes of page: in
/// headless Chromium a page of 10^4 steps (1.5 MB) paints in 0.2-0.4 s,
/// one of 5 * 10^4 (8 MB) in about 0.8 s, and one of 10^5 (16 MB) took
/// 1.6 s, half of it parsing the HTML; a million steps would be 150 MB.
pub const STEPS_MAX: usize = 50_000;

/// One step as the page shows it: its record, its lane, and the state it
/// left its entities in.
struct Kept {
    record: Record,
    lane: u32,
    state: String,
}

/// A client's call to an API, followed from its send to its answer.
struct OpenCall {
    send_step: u64,
    client: u16,
    api: u16,
    arrived: bool,
}

/// Watches a run, step by step, for its page. Only the last `STEPS_MAX`
/// steps are kept, with their hand-offs; beyond them it keeps a topic per
/// message and a token per effect, a few bytes each.
pub struct Recorder {
    /// The most steps kept: `STEPS_MAX` unless a test asks for fewer.
    limit: usize,
    kept: VecDeque<Kept>,
    /// Steps seen in all, kept or not.
    total: u64,
    /// The topic of every message seen, to put broker steps on its lane.
    topics: BTreeMap<OutboxId, Topic>,
    /// Effect tokens seen (in order: by task first).
    tokens: BTreeSet<Token>,
    calls: BTreeMap<CallId, OpenCall>,
    /// The world's lanes, named once it is first seen.
    lanes: Option<Lanes>,
    /// Hand-offs the trace alone does not name: a client's send to the
    /// API step that took the call (step, step).
    sends: VecDeque<(u64, u64)>,
    /// An API's answer and the client it went to (step, client index).
    answers: VecDeque<(u64, u16)>,
}

impl Default for Recorder {
    fn default() -> Recorder {
        Recorder::new()
    }
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder::keeping(STEPS_MAX)
    }

    /// A recorder that keeps the last `limit` steps (at least one).
    pub fn keeping(limit: usize) -> Recorder {
        assert!(limit > 0, "a page shows at least one step");
        Recorder {
            limit,
            kept: VecDeque::new(),
            total: 0,
            topics: BTreeMap::new(),
            tokens: BTreeSet::new(),
            calls: BTreeMap::new(),
            lanes: None,
            sends: VecDeque::new(),
            answers: VecDeque::new(),
        }
    }

    /// Takes in the `added` records of the step just taken (the `on_step`
    /// callback of `simulate`).
    pub fn observe(&mut self, world: &World, added: u64) {
        if self.lanes.is_none() {
            self.lanes = Some(Lanes::of(world));
        }
        let records = world.trace.tail(added as usize);
        assert_eq!(
            records.len() as u64,
            added,
            "the ring holds a step's records"
        );
        if records
            .iter()
            .any(|r| matches!(r.actor.kind, ActorKind::Client | ActorKind::Api))
        {
            self.follow_calls(world, &records);
        }
        for record in records {
            self.total += 1;
            if let Some(message) = record.message
                && !self.topics.contains_key(&message)
                && let Some(row) = world.db.find_outbox(message)
            {
                self.topics.insert(message, row.topic);
            }
            let state = self.state_of(world, record);
            let lane = self.lane_of(record);
            if self.kept.len() == self.limit
                && let Some(gone) = self.kept.pop_front()
            {
                let first = gone.record.step + 1;
                while self.sends.front().is_some_and(|(from, _)| *from < first) {
                    self.sends.pop_front();
                }
                while self.answers.front().is_some_and(|(at, _)| *at < first) {
                    self.answers.pop_front();
                }
            }
            self.kept.push_back(Kept {
                record: record.clone(),
                lane,
                state,
            });
        }
    }

    /// Steps seen in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// For a run longer than a page: which steps the page at `path`
    /// shows, and how to see others.
    pub fn window_note(&self, path: &Path) -> Option<String> {
        let first = self.kept.front()?.record.step;
        let last = self.kept.back()?.record.step;
        (self.total > self.kept.len() as u64).then(|| {
            format!(
                "note: {} shows the last {} of the run's {} steps (steps {first}-{last}); \
                 to see others, cut the run (a smaller steps_max or fewer --steps)",
                path.display(),
                self.kept.len(),
                self.total
            )
        })
    }

    /// Links sends to the API steps that took them, and answers to their
    /// clients, by watching the world's calls appear, move and go.
    fn follow_calls(&mut self, world: &World, records: &[&Record]) {
        // A send or a retry opens one call, the newest: call ids are
        // counters, and the table walks its rows by id.
        let send = records.iter().rev().find(|r| {
            r.actor.kind == ActorKind::Client && matches!(r.verb, Verb::Send | Verb::Retry)
        });
        if let Some(send) = send
            && let Some((id, call)) = world.calls.iter().last()
            && !self.calls.contains_key(&id)
        {
            self.calls.insert(
                id,
                OpenCall {
                    send_step: send.step,
                    client: send.actor.index,
                    api: call.api,
                    arrived: false,
                },
            );
        }
        let mut gone = Vec::new();
        for (&id, open) in self.calls.iter_mut() {
            match world.calls.get(id) {
                None => gone.push(id),
                Some(call) if !open.arrived && call.phase != ApiPhase::Arrive => {
                    open.arrived = true;
                    let api = ActorId::new(ActorKind::Api, call.api);
                    if let Some(step) = records.iter().find(|r| r.actor == api) {
                        self.sends.push_back((open.send_step, step.step));
                    }
                }
                Some(_) => {}
            }
        }
        for id in gone {
            let open = self.calls.remove(&id).expect("an open call");
            let api = ActorId::new(ActorKind::Api, open.api);
            let Some(step) = records
                .iter()
                .find(|r| r.actor == api && r.verb != Verb::Crash)
            else {
                continue;
            };
            if !open.arrived {
                self.sends.push_back((open.send_step, step.step));
            }
            if step.verb == Verb::Respond {
                self.answers.push_back((step.step, open.client));
            }
        }
    }

    /// What the step's entities look like right after it: the task's
    /// row, the message's outbox and inbox rows, the attempt's effects.
    fn state_of(&mut self, world: &World, record: &Record) -> String {
        let mut text = String::new();
        if let Some(task) = record.task
            && let Some(row) = world.db.find_task(task)
        {
            let state = &row.state;
            let _ = write!(
                text,
                "{task}: {} v{}, attempt {}",
                state.status.as_str(),
                state.version,
                state.attempt
            );
            if let Some(worker) = &state.worker_id {
                let _ = write!(text, ", held by {worker}");
            }
            if let Some(code) = &state.terminal_error_code {
                let _ = write!(text, ", {code}");
            }
            if row.compacted {
                text.push_str(" (compacted)");
            }
            let _ = write!(text, "; key {}", row.key);
            for effect in &row.effects {
                if record.attempt == 0 || effect.token.attempt == record.attempt {
                    let _ = write!(text, "\n{}: {}", effect.token, effect.state.as_str());
                    if let Some(fenced) = effect.fenced_by {
                        let _ = write!(text, ", fenced by {fenced}");
                    }
                }
                self.tokens.insert(effect.token);
            }
        }
        if let Some(message) = record.message {
            if let Some(row) = world.db.find_outbox(message) {
                let _ = write!(
                    text,
                    "\n{message}: {} {} v{}, ",
                    row.topic.as_str(),
                    row.event_type,
                    row.aggregate_version
                );
                match row.published_ms {
                    Some(at) => {
                        let _ = write!(text, "published at {at} ms");
                    }
                    None => text.push_str("unpublished"),
                }
                let _ = write!(text, ", {} publish attempt(s)", row.publish_attempts);
                if let Some(error) = row.last_error {
                    let _ = write!(text, ", last error {error}");
                }
            }
            if let Some(row) = world.db.inbox.get(message) {
                let _ = write!(text, "\ninbox {message}: {}", row.state.as_str());
                if let Some(result) = row.result {
                    let _ = write!(text, " ({})", result.as_str());
                }
            }
        }
        text.trim_start().to_string()
    }

    /// The lane a step is drawn on: its actor's, or for the broker, the
    /// lane of its message's topic.
    fn lane_of(&self, record: &Record) -> u32 {
        let lanes = self.lanes.as_ref().expect("lanes are named first");
        let lane = match record.actor.kind {
            // The broker's lanes: task-work, task-events, dead letters.
            ActorKind::Broker => {
                lanes.first[&ActorKind::Broker]
                    + match record.verb {
                        Verb::DeadLetter => 2,
                        _ => match record.message.and_then(|m| self.topics.get(&m)) {
                            Some(Topic::TaskEvents) => 1,
                            _ => 0,
                        },
                    }
            }
            kind => lanes.first[&kind] + usize::from(record.actor.index),
        };
        lane as u32
    }
}

/// The page's lanes, top to bottom: actors and stores in the order a
/// request flows through them.
struct Lanes {
    names: Vec<String>,
    /// Each actor kind's first lane; numbered kinds have one lane per
    /// instance after it.
    first: BTreeMap<ActorKind, usize>,
}

impl Lanes {
    fn of(world: &World) -> Lanes {
        let mut lanes = Lanes {
            names: Vec::new(),
            first: BTreeMap::new(),
        };
        lanes.actors(ActorKind::Client, world.clients.len());
        lanes.actors(ActorKind::Api, world.apis.len());
        lanes.names.push("database".into());
        lanes.actors(ActorKind::Publisher, world.publishers.len());
        lanes.first.insert(ActorKind::Broker, lanes.names.len());
        lanes.names.push("broker task-work".into());
        lanes.names.push("broker task-events".into());
        lanes.names.push("dead letters".into());
        lanes.actors(ActorKind::Worker, world.workers.len());
        lanes.names.push("artifact store".into());
        for kind in [
            ActorKind::Cache,
            ActorKind::Projector,
            ActorKind::Reconciler,
            ActorKind::Operator,
        ] {
            lanes.actors(kind, 1);
        }
        lanes
    }

    fn actors(&mut self, kind: ActorKind, count: usize) {
        self.first.insert(kind, self.names.len());
        for index in 0..count {
            self.names
                .push(ActorId::new(kind, index as u16).to_string());
        }
    }
}

/// What a page says about its run besides the steps.
pub struct PageInfo<'a> {
    /// The scenario's name, or a reproducer's.
    pub title: &'a str,
    pub description: &'a str,
    /// The command that reproduces the run.
    pub command: &'a str,
}

/// The page's data: every kept step, the lanes, the tasks' keys and
/// tokens, the hand-offs, the outcome. Exposed for tests.
pub fn data(world: &World, outcome: &Outcome, recorder: &Recorder, info: &PageInfo) -> Value {
    let lanes = Lanes::of(world);
    let mut actions: Vec<String> = Vec::new();
    let mut outcomes: Vec<String> = Vec::new();
    let mut faults: Vec<String> = Vec::new();
    // Each distinct state text once; rows name it by index.
    let mut states: Vec<&str> = Vec::new();
    let mut state_ids: BTreeMap<&str, usize> = BTreeMap::new();
    let mut steps = Vec::with_capacity(recorder.kept.len());
    let mut tasks = BTreeSet::new();
    let mut kept_messages = BTreeSet::new();
    for kept in &recorder.kept {
        let r = &kept.record;
        let action = index_of(&mut actions, r.action().to_string());
        let outcome_index = index_of(&mut outcomes, r.outcome.to_string());
        let fault = r.fault.map_or(-1, |(site, kind)| {
            index_of(&mut faults, format!("{}/{}", site.as_str(), kind.as_str())) as i64
        });
        let state = *state_ids.entry(&kept.state).or_insert_with(|| {
            states.push(&kept.state);
            states.len() - 1
        });
        let mut hash = String::new();
        if let Some(h) = &r.hash {
            push_hex(&mut hash, &h[..8]);
        }
        if let Some(task) = r.task {
            tasks.insert(task);
        }
        if let Some(message) = r.message {
            kept_messages.insert(message);
        }
        steps.push(json!([
            r.step,
            r.time_ms,
            kept.lane,
            action,
            outcome_index,
            r.task.map_or(0, |t| t.0),
            r.message.map_or(0, |m| m.0),
            r.entry.map_or(0, |e| e.0),
            r.attempt,
            r.version,
            hash,
            fault,
            state,
        ]));
    }
    let mut task_table = serde_json::Map::new();
    for task in tasks {
        let Some(row) = world.db.find_task(task) else {
            continue;
        };
        let tokens: Vec<String> = recorder
            .tokens
            .range(first_token(task)..)
            .take_while(|token| token.task == task)
            .map(|token| token.to_string())
            .collect();
        task_table.insert(
            task.0.to_string(),
            json!({
                "key": row.key.to_string(),
                "status": row.state.status.as_str(),
                "version": row.state.version,
                "tokens": tokens,
            }),
        );
    }
    let first = recorder.kept.front().map_or(0, |k| k.record.step);
    let violation = outcome.violation.as_ref().map(|v| {
        json!({
            "invariant": v.invariant,
            "step": v.step,
            "timeMs": v.time_ms,
            "message": v.message,
            "entities": v.entities,
        })
    });
    let sha = crate::hash::hex(&world.trace.sha256());
    json!({
        "title": info.title,
        "description": info.description,
        "command": info.command,
        "seed": world.seed,
        "steps": recorder.total,
        "firstStep": first,
        "stepsMax": recorder.limit,
        "faultSteps": outcome.fault_steps,
        "virtualTimeMs": world.last_step_ms,
        "traceSha256": sha,
        "violation": violation,
        "notConverged": outcome.not_converged,
        "lanes": lanes.names,
        "actions": actions,
        "outcomes": outcomes,
        "faults": faults,
        "states": states,
        "tasks": task_table,
        "topics": recorder
            .topics
            .iter()
            .filter(|(message, _)| kept_messages.contains(*message))
            .map(|(message, topic)| (message.0.to_string(), topic.as_str()))
            .collect::<BTreeMap<_, _>>(),
        "sends": recorder.sends.iter().filter(|(from, _)| *from >= first).collect::<Vec<_>>(),
        "answers": recorder.answers.iter().filter(|(step, _)| *step >= first).collect::<Vec<_>>(),
        "rows": steps,
    })
}

/// The least token of `task` in `Token`'s order (task, attempt, kind,
/// generation).
fn first_token(task: TaskId) -> Token {
    Token {
        task,
        attempt: 0,
        kind: EffectKind::Artifact,
        generation: 0,
    }
}

/// The index of `text` in `table`, added at the end if it is new. The
/// tables are short (step names, outcome words, fault kinds).
fn index_of(table: &mut Vec<String>, text: String) -> usize {
    match table.iter().position(|t| *t == text) {
        Some(i) => i,
        None => {
            table.push(text);
            table.len() - 1
        }
    }
}

const SCRIPT: &str = include_str!("page.js");
const STYLE: &str = include_str!("page.css");

/// The whole page as text.
pub fn page(world: &World, outcome: &Outcome, recorder: &Recorder, info: &PageInfo) -> String {
    let data = data(world, outcome, recorder, info);
    // Inside a <script> element only `</` can end it early; JSON text has
    // `<` only inside strings, where `\u003c` means the same.
    let json = serde_json::to_string(&data)
        .expect("page data serializes")
        .replace('<', "\\u003c");
    let mut out = String::with_capacity(json.len() + SCRIPT.len() + STYLE.len() + 2048);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(out, "<title>sim timeline: {}</title>", escape(info.title));
    let _ = writeln!(out, "<style>\n{STYLE}</style>\n</head>\n<body>");
    out.push_str(BODY);
    let _ = writeln!(
        out,
        "<script type=\"application/json\" id=\"run-data\">{json}</script>"
    );
    let _ = writeln!(out, "<script>\n{SCRIPT}</script>\n</body>\n</html>");
    out
}

/// Writes the page to `path` whole, or leaves no file: a failed write
/// removes what was written.
pub fn write_timeline(
    path: &Path,
    world: &World,
    outcome: &Outcome,
    recorder: &Recorder,
    info: &PageInfo,
) -> Result<(), InputError> {
    let text = page(world, outcome, recorder, info);
    std::fs::write(path, text).map_err(|error| {
        crate::output::remove_partial(path);
        InputError::new(format!("cannot write the timeline: {error}")).in_file(path)
    })
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page's fixed elements; the script fills them in.
const BODY: &str = r#"<header>
<h1 id="title"></h1>
<p id="summary"></p>
<div id="banner" hidden></div>
<div class="controls">
<label>filter <input id="filter" type="search" placeholder="task-1, outbox-2, entry-4, a key or token" size="34"></label>
<label>find <input id="search" type="search" placeholder="an id; Enter: next" size="18"></label>
<span id="filter-count"></span>
<label>axis <select id="axis"><option value="time">virtual time</option><option value="step">step order</option></select></label>
<button id="zoom-in" title="zoom in (+)">+</button><button id="zoom-out" title="zoom out (-)">&minus;</button><button id="fit" title="show everything (0)">fit</button>
<label><input id="slice" type="checkbox" checked> violation slice</label>
</div>
</header>
<main>
<div id="chart"><div id="labels"></div><canvas id="canvas"></canvas></div>
<aside id="detail"><p class="hint">Click a step to see its record and the state it left.</p></aside>
</main>
<footer id="legend"></footer>
"#;
