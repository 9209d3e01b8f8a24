//! The fuzz workload: a random stream of client requests and operator
//! actions — new creates, retries with the same key, the same create to two
//! APIs at once, key reuse with another input, cancels at any moment,
//! status reads, poison inputs, dead-letter replays — drawn from the
//! workload stream so faults never shift it.

use std::collections::VecDeque;

use std::sync::Arc;

use crate::prng::{Prng, Stream};
use crate::scenario::{DeadLetterRef, Request, RequestKind, Target};
use crate::task::Text;
use crate::task::json::Sink;
use crate::world::engine::ids::{DeadLetterId, TextBuf, push_decimal};
use crate::world::input::Observed;
use crate::world::stores::broker::DeadLetter;
use crate::world::stores::db::{Input, Payload, Topic};

use super::outside;

/// The workload's shape for one seed (drawn by the swarm).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadMix {
    /// Longest gap between two requests, in virtual ms.
    pub gap_ms_max: u64,
    /// Weights, in parts of their sum.
    pub create: u32,
    pub duplicate_create: u32,
    pub retry_same_key: u32,
    pub reuse_key: u32,
    pub cancel: u32,
    pub read_status: u32,
    pub poison: u32,
    /// A dead-letter replay (the first one bumps the handler version).
    pub replay: u32,
    /// An outside producer's event (`append-event` or `deliver-event`).
    pub outside: u32,
    /// An operator action at a random moment: a handler bump, or a replay
    /// of any work dead letter (again, or one that does not exist).
    pub operator: u32,
    /// A create at the edges of what the API checks before reading
    /// anything: a key outside `^[A-Za-z0-9_-]{6,80}$` (too short, too
    /// long, a character the pattern refuses), an input with no string
    /// `doc`, or a key just inside the pattern (6 or 80 characters).
    pub malformed: u32,
    /// The client waits while the world holds this many live tasks
    /// (created and not yet compacted): a closed loop. An open loop that
    /// outruns its pipeline (one worker, creates every few milliseconds)
    /// spends a long run queueing tasks no worker reaches until the
    /// drain, where no fault fires, and its memory grows with the queue.
    /// The bound is above what any of seeds 1-300 reaches in 10^4 steps
    /// (they run the same with it as without), so the detection
    /// campaigns of that length are untouched.
    pub live_tasks_max: u64,
    /// The client also waits while this many of its requests are in
    /// flight: an API that falls behind (one API, paused) otherwise meets
    /// a flood that grows for as long as the run. Every request sent is a
    /// step, so no run of fewer fault steps than this bound reaches it.
    pub requests_in_flight_max: u64,
}

/// See `WorkloadMix::live_tasks_max`.
pub const LIVE_TASKS_MAX: u64 = 2048;
/// See `WorkloadMix::requests_in_flight_max`.
pub const REQUESTS_IN_FLIGHT_MAX: u64 = 16_384;

/// Waits in a row before a waiting client polls (`Generator::wait`).
const WAITS_BEFORE_POLL: u32 = 64;

impl Default for WorkloadMix {
    fn default() -> WorkloadMix {
        WorkloadMix {
            gap_ms_max: 4,
            create: 50,
            duplicate_create: 5,
            retry_same_key: 5,
            reuse_key: 3,
            cancel: 8,
            read_status: 12,
            poison: 2,
            replay: 2,
            outside: 0,
            operator: 0,
            malformed: 0,
            live_tasks_max: LIVE_TASKS_MAX,
            requests_in_flight_max: REQUESTS_IN_FLIGHT_MAX,
        }
    }
}

/// The workload generator of one run.
#[derive(Clone, Debug)]
pub struct Generator {
    rng: Prng,
    /// The mix's weights in request-kind order, and their sum.
    weights: [u32; 11],
    total: u64,
    gap_ms_max: u64,
    clients: u16,
    apis: u16,
    /// Recent creates, for retries, reuse, cancels and reads; the oldest
    /// leaves from the front without shifting the rest.
    recent: VecDeque<Recent>,
    next_intent: u64,
    pending: Option<Request>,
    letters: LetterIndex,
    bumped: bool,
    /// The handler version the last bump set.
    handler_version: u64,
    /// Outside events issued, for their unique ids.
    outside_issued: u64,
    /// Creates at the edges of the key and input checks issued, for keys
    /// of their own.
    edges_issued: u64,
    /// See `WorkloadMix::live_tasks_max`.
    live_tasks_max: u64,
    /// See `WorkloadMix::requests_in_flight_max`.
    requests_in_flight_max: u64,
    /// Requests not issued in a row, the client being at its bound: the
    /// next request carries them (`Request::waits`).
    waits: u32,
}

const RECENT_MAX: usize = 64;

/// A recent create: its key and its input, shared (cloning either is a
/// reference count).
#[derive(Clone, Debug)]
struct Recent {
    key: Text,
    input: Arc<Input>,
}

/// A drawn input document. The workload knows its documents' shape, so it
/// writes their canonical JSON (keys in order) directly instead of building
/// a `serde_json::Value` and serializing it; a test holds the two equal.
fn input_document(doc: u64, title: Option<u64>) -> Arc<Input> {
    let mut canonical = String::with_capacity(64);
    canonical.push_str(r#"{"doc":"doc-"#);
    push_decimal(&mut canonical, doc);
    match title {
        Some(title) => {
            canonical.push_str(r#"","title":"title-"#);
            push_decimal(&mut canonical, title);
            canonical.push_str(r#""}"#);
            Input::canonical(canonical, true, 1)
        }
        // A poison input: the legacy format needs handler version 2.
        None => {
            canonical.push_str(r#"","format":"legacy-rtf","title":"legacy"}"#);
            Input::canonical(canonical, true, 2)
        }
    }
}

/// The shapes `Generator::edge_create` draws from.
const EDGE_SHAPES: u64 = 5;

/// Characters `^[A-Za-z0-9_-]$` refuses, some of which every text writer
/// (trace, dump, reproducer, timeline) must escape.
const REFUSED_CHARS: [char; 8] = ['.', ' ', '/', '"', '\\', 'é', '\t', '+'];

/// A key of exactly `length` characters the pattern allows: `prefix`, a
/// `-`, the serial, padded or cut to length with `0`s.
fn edge_key(prefix: &str, serial: u64, length: usize) -> Text {
    let mut key = String::with_capacity(24);
    key.push_str(prefix);
    key.push('-');
    push_decimal(&mut key, serial);
    // The serial last, so keys cut short still differ where they can (the
    // text is ASCII: bytes are characters).
    let tail = &key[key.len().saturating_sub(length)..];
    format!("{tail:0>length$}").into()
}

fn intent_key(intent: u64) -> Text {
    let mut key = TextBuf::new();
    key.put("intent-");
    // Six digits at least, zero-padded, as `{:06}` would.
    for power in [100_000, 10_000, 1_000, 100, 10] {
        if intent < power {
            key.put("0");
        }
    }
    push_decimal(&mut key, intent);
    key.text()
}

impl Generator {
    pub fn new(seed: u64, mix: &WorkloadMix, clients: u16, apis: u16) -> Generator {
        let weights = [
            mix.create,
            mix.duplicate_create,
            mix.retry_same_key,
            mix.reuse_key,
            mix.cancel,
            mix.read_status,
            mix.poison,
            mix.replay,
            mix.outside,
            mix.operator,
            mix.malformed,
        ];
        Generator {
            rng: Prng::new(seed, Stream::Workload),
            weights,
            total: weights.iter().map(|w| u64::from(*w)).sum::<u64>().max(1),
            gap_ms_max: mix.gap_ms_max.max(1),
            clients,
            apis,
            recent: VecDeque::with_capacity(RECENT_MAX),
            next_intent: 0,
            pending: None,
            letters: LetterIndex::default(),
            bumped: false,
            handler_version: 1,
            outside_issued: 0,
            edges_issued: 0,
            live_tasks_max: mix.live_tasks_max,
            requests_in_flight_max: mix.requests_in_flight_max,
            waits: 0,
        }
    }

    fn input(&mut self, poison: bool) -> Arc<Input> {
        let doc = self.rng.below(1_000_000);
        let title = (!poison).then(|| self.rng.below(100));
        input_document(doc, title)
    }

    fn request(&mut self, at_ms: u64, kind: RequestKind) -> Request {
        let client = self.rng.below(u64::from(self.clients)) as u16;
        let api = self.rng.below(u64::from(self.apis)) as u16;
        Request {
            at_ms,
            kind,
            client,
            api: Some(api),
            waits: 0,
            wait_ms: 0,
        }
    }

    fn new_create(&mut self, at_ms: u64, poison: bool) -> Request {
        self.next_intent += 1;
        let input = self.input(poison);
        let key = intent_key(self.next_intent);
        self.remember(&key, &input);
        self.request(at_ms, RequestKind::Create { key, input })
    }

    /// Keeps a create among the recent ones; the oldest leaves when full.
    fn remember(&mut self, key: &Text, input: &Arc<Input>) {
        if self.recent.len() == RECENT_MAX {
            self.recent.pop_front();
        }
        self.recent.push_back(Recent {
            key: key.clone(),
            input: input.clone(),
        });
    }

    /// One of the recent creates, drawn at random.
    fn recent(&mut self) -> Option<Recent> {
        if self.recent.is_empty() {
            return None;
        }
        let index = self.rng.index(self.recent.len());
        Some(self.recent[index].clone())
    }

    /// The key of one of the recent creates.
    fn recent_key(&mut self) -> Option<Text> {
        self.recent().map(|recent| recent.key)
    }

    /// A create at the edge of the API's first checks (`WorkloadMix::malformed`).
    fn edge_create(&mut self, at_ms: u64) -> Request {
        self.edges_issued += 1;
        let serial = self.edges_issued;
        let shape = self.rng.below(EDGE_SHAPES);
        let (key, input) = match shape {
            // Too short: one to five characters the pattern allows.
            0 => {
                let length = self.rng.range(1, 5) as usize;
                (edge_key("e", serial, length), self.input(false))
            }
            // Too long: 81 to 90.
            1 => {
                let length = self.rng.range(81, 90) as usize;
                (edge_key("e", serial, length), self.input(false))
            }
            // A character the pattern refuses, anywhere in a key of a
            // length it allows.
            2 => {
                let mut key: Vec<char> = edge_key("bad", serial, 20).chars().collect();
                let at = self.rng.index(key.len());
                key[at] = REFUSED_CHARS[self.rng.index(REFUSED_CHARS.len())];
                (
                    key.into_iter().collect::<String>().into(),
                    self.input(false),
                )
            }
            // A well-formed key and an input that is not a document.
            3 => {
                let doc = self.rng.below(1_000_000);
                let input = if self.rng.chance(500_000) {
                    let mut canonical = String::from(r#"{"title":"title-"#);
                    push_decimal(&mut canonical, doc);
                    canonical.push_str(r#""}"#);
                    Input::canonical(canonical, false, 1)
                } else {
                    let mut canonical = String::from(r#"{"doc":"#);
                    push_decimal(&mut canonical, doc);
                    canonical.push('}');
                    Input::canonical(canonical, false, 1)
                };
                (edge_key("input", serial, 20), input)
            }
            // Just inside the pattern: 6 or 80 characters, `_` and `-`
            // included. Kept among the recent creates, for retries.
            _ => {
                let length = if self.rng.chance(500_000) { 6 } else { 80 };
                let key = edge_key("e_", serial, length);
                let input = self.input(false);
                self.remember(&key, &input);
                (key, input)
            }
        };
        self.request(at_ms, RequestKind::Create { key, input })
    }

    /// The next handler version: every bump goes one up.
    fn bump(&mut self) -> u64 {
        self.handler_version += 1;
        self.handler_version
    }

    /// A client at one of its bounds (live tasks, requests in flight) waits: no request, only the
    /// gap. Every `WAITS_BEFORE_POLL`th wait in a row it reads the status
    /// of a recent task instead, so a world in which nothing is ever
    /// compacted (a protocol bug that stops the pipeline) still takes
    /// steps and its run ends. `None` when there is no task to read: the
    /// draw goes on as usual.
    fn wait(&mut self, now: u64) -> Option<(Option<Request>, u64)> {
        // A fixed gap, drawn from nothing: a reproducer writes a run of
        // waits as their count and this gap.
        let gap = self.gap_ms_max;
        if self.waits + 1 < WAITS_BEFORE_POLL {
            self.waits += 1;
            return Some((None, gap));
        }
        let key = self.recent_key()?;
        let target = Target::Key(key);
        let poll = self.request(now, RequestKind::ReadStatus { target });
        Some((Some(poll), gap))
    }

    /// The next request at `now` and the gap before the one after it, or
    /// only the gap while the client waits for the world to catch up. A
    /// request carries the waits before it, for a reproducer to replay.
    pub fn next(&mut self, now: u64, world: &Observed) -> (Option<Request>, u64) {
        let (mut request, gap) = self.draw(now, world);
        if let Some(request) = &mut request {
            request.waits = std::mem::take(&mut self.waits);
            request.wait_ms = if request.waits > 0 {
                self.gap_ms_max
            } else {
                0
            };
        }
        (request, gap)
    }

    /// `next` before the waits are written on the request.
    fn draw(&mut self, now: u64, world: &Observed) -> (Option<Request>, u64) {
        let dead_letters = world.dead_letters;
        if let Some(request) = self.pending.take() {
            return (Some(request), self.rng.range(1, self.gap_ms_max));
        }
        let behind = world.live_tasks >= self.live_tasks_max
            || world.requests_in_flight >= self.requests_in_flight_max;
        if behind && let Some(wait) = self.wait(now) {
            return wait;
        }
        let gap = self.rng.range(1, self.gap_ms_max);
        let mut pick = self.rng.below(self.total);
        let mut choice = 0;
        for (index, weight) in self.weights.iter().enumerate() {
            if pick < u64::from(*weight) {
                choice = index;
                break;
            }
            pick -= u64::from(*weight);
        }
        let request = match choice {
            1 => {
                // The same create to two APIs at once.
                let request = self.new_create(now, false);
                let mut twin = request.clone();
                twin.api = Some((request.api.unwrap_or(0) + 1) % self.apis);
                self.pending = Some(twin);
                return (Some(request), 0);
            }
            2 => match self.recent() {
                Some(Recent { key, input }) => {
                    self.request(now, RequestKind::Create { key, input })
                }
                None => self.new_create(now, false),
            },
            3 => match self.recent_key() {
                Some(key) => {
                    let input = self.input(false);
                    self.request(now, RequestKind::Create { key, input })
                }
                None => self.new_create(now, false),
            },
            4 => match self.recent_key() {
                Some(key) => self.request(
                    now,
                    RequestKind::Cancel {
                        target: Target::Key(key),
                    },
                ),
                None => self.new_create(now, false),
            },
            5 => match self.recent_key() {
                Some(key) => {
                    let request = self.request(
                        now,
                        RequestKind::ReadStatus {
                            target: Target::Key(key),
                        },
                    );
                    // Half the reads come with a twin at another API, as
                    // two readers of one task do: their misses and fills
                    // interleave, and a later read's fill can land before
                    // an earlier one's (the cache-aside race between two
                    // readers, not only a reader and an invalidation).
                    if self.rng.below(2) == 0 {
                        let mut twin = request.clone();
                        twin.api = Some((request.api.unwrap_or(0) + 1) % self.apis);
                        self.pending = Some(twin);
                        // A few milliseconds apart, so that the task's
                        // version may change between their database reads.
                        return (Some(request), self.rng.below(4));
                    }
                    request
                }
                None => self.new_create(now, false),
            },
            6 => self.new_create(now, true),
            7 => {
                self.letters.catch_up(dead_letters);
                match self.letters.first_unreplayed_poison() {
                    Some(letter) if self.bumped => {
                        self.letters.poison_replayed += 1;
                        self.request(
                            now,
                            RequestKind::ReplayDeadLetter {
                                dead_letter: DeadLetterRef::Id(letter),
                            },
                        )
                    }
                    Some(_) => {
                        self.bumped = true;
                        let version = self.bump();
                        self.request(now, RequestKind::BumpHandlerVersion { version })
                    }
                    None => self.new_create(now, false),
                }
            }
            8 => {
                self.outside_issued += 1;
                let draws = outside::Draws {
                    shape: self.rng.below(outside::SHAPES),
                    task: self.rng.below(1 << 32),
                    field: self.rng.below(1 << 32),
                    serial: self.outside_issued,
                };
                let kind = outside::outside_event(draws, world.db);
                self.request(now, kind)
            }
            9 => {
                let bump = self.rng.below(4) == 0;
                let pick = self.rng.below(1 << 32);
                let kind = if bump {
                    RequestKind::BumpHandlerVersion {
                        version: self.bump(),
                    }
                } else {
                    self.letters.catch_up(dead_letters);
                    RequestKind::ReplayDeadLetter {
                        dead_letter: reference_to(
                            dead_letters,
                            self.letters.any_work_letter(dead_letters.len(), pick),
                            pick >> 30,
                        ),
                    }
                };
                self.request(now, kind)
            }
            10 => self.edge_create(now),
            _ => self.new_create(now, false),
        };
        (Some(request), gap)
    }
}

impl crate::world::input::Workload for Generator {
    fn next(&mut self, now: u64, world: &Observed) -> (Option<Request>, u64) {
        Generator::next(self, now, world)
    }

    fn fork(&self) -> Box<dyn crate::world::input::Workload> {
        Box::new(self.clone())
    }
}

/// How an operator names the letter: by its id mostly, or by its task or
/// its message, as found in a report (`form`: the top bits of the pick, no
/// draw of its own). A letter that does not exist is named by id.
fn reference_to(dead_letters: &[DeadLetter], id: DeadLetterId, form: u64) -> DeadLetterRef {
    match (dead_letters.get(id.slot()), form % 4) {
        (Some(letter), 2) => DeadLetterRef::Task(letter.task),
        (Some(letter), 3) => DeadLetterRef::Message(letter.message),
        _ => DeadLetterRef::Id(id),
    }
}

/// What the generator has read of the world's dead letters, which are only
/// ever appended and never change: the work letters and the poison ones
/// (a work message refused as `UNSUPPORTED_FORMAT`), in id order. A replay
/// drawn late in a long run looked at every letter of the run (a walk that
/// grew with the run); now it reads the letters written since its last look.
#[derive(Clone, Debug, Default)]
struct LetterIndex {
    /// How many of the world's letters are indexed.
    read: usize,
    work: Vec<DeadLetterId>,
    poison: Vec<DeadLetterId>,
    /// The poison letters replayed so far: always the first ones, since a
    /// replay takes the first poison letter not yet replayed.
    poison_replayed: usize,
}

impl LetterIndex {
    fn catch_up(&mut self, dead_letters: &[DeadLetter]) {
        // A world's letters only grow; fewer is another world's list (never
        // seen), read again from the start rather than misread.
        if self.read > dead_letters.len() {
            *self = LetterIndex::default();
        }
        for letter in &dead_letters[self.read..] {
            if letter.topic == Topic::TaskWork {
                self.work.push(letter.id);
            }
            if matches!(letter.payload, Payload::Work { .. })
                && letter.error_code == "UNSUPPORTED_FORMAT"
            {
                self.poison.push(letter.id);
            }
        }
        self.read = dead_letters.len();
    }

    fn first_unreplayed_poison(&self) -> Option<DeadLetterId> {
        self.poison.get(self.poison_replayed).copied()
    }

    /// One of the work letters by `pick`, or, one time in (letters + 1), an
    /// id past the last letter of all `letters`: a replay the operator gets
    /// wrong.
    fn any_work_letter(&self, letters: usize, pick: u64) -> DeadLetterId {
        let count = self.work.len() as u64;
        match self.work.get((pick % (count + 1)) as usize) {
            Some(id) => *id,
            None => DeadLetterId(u32::try_from(letters + 1).unwrap_or(u32::MAX)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::stores::db::Db;
    use serde_json::json;

    #[test]
    fn documents_are_written_as_their_canonical_json() {
        for (doc, title) in [(0, Some(0)), (7, Some(99)), (999_999, Some(42)), (12, None)] {
            let value = match title {
                Some(title) => {
                    json!({"doc": format!("doc-{doc}"), "title": format!("title-{title}")})
                }
                None => {
                    json!({"doc": format!("doc-{doc}"), "format": "legacy-rtf", "title": "legacy"})
                }
            };
            assert_eq!(*input_document(doc, title), *Input::of(&value));
        }
    }

    fn letter(id: u32, topic: Topic, error_code: &'static str) -> DeadLetter {
        DeadLetter {
            id: DeadLetterId(id),
            topic,
            message: crate::world::engine::ids::OutboxId(id),
            task: crate::world::engine::ids::TaskId(id),
            payload: Payload::Work {
                kind: crate::world::stores::db::WorkKind::TaskCreated,
                task: crate::world::engine::ids::TaskId(id),
                attempt: 1,
                input_sha256: [0; 32],
                not_before_ms: 0,
            },
            payload_sha256: [0; 32],
            error_code,
            handler_version: 1,
            attempts: 1,
            dead_lettered_ms: 0,
            transient: false,
        }
    }

    #[test]
    fn the_letter_index_reads_new_letters_and_picks_as_a_walk_would() {
        let letters = [
            letter(1, Topic::TaskWork, "DELIVERY_ATTEMPTS_EXHAUSTED"),
            letter(2, Topic::TaskWork, "UNSUPPORTED_FORMAT"),
            letter(3, Topic::TaskEvents, "DELIVERY_ATTEMPTS_EXHAUSTED"),
            letter(4, Topic::TaskEvents, "UNSUPPORTED_FORMAT"),
            letter(5, Topic::TaskWork, "UNSUPPORTED_FORMAT"),
        ];
        let mut index = LetterIndex::default();
        index.catch_up(&letters[..2]);
        assert_eq!(index.first_unreplayed_poison(), Some(DeadLetterId(2)));
        index.poison_replayed += 1;
        assert_eq!(index.first_unreplayed_poison(), None);
        index.catch_up(&letters);
        // A work payload refused as unsupported is poison on either topic
        // (as the walk over every letter judged it); work letters are the
        // task-work topic's.
        assert_eq!(index.first_unreplayed_poison(), Some(DeadLetterId(4)));
        assert_eq!(
            index.work,
            [DeadLetterId(1), DeadLetterId(2), DeadLetterId(5)]
        );
        // Picks go round the work letters and one id past every letter.
        let picked: Vec<_> = (0..5)
            .map(|pick| index.any_work_letter(letters.len(), pick).0)
            .collect();
        assert_eq!(picked, [1, 2, 5, 6, 1]);
        // Another world's shorter list is read from the start.
        index.catch_up(&letters[..1]);
        assert_eq!(index.work, [DeadLetterId(1)]);
        assert_eq!(index.first_unreplayed_poison(), None);
    }

    #[test]
    fn a_client_at_a_bound_waits_and_polls_every_so_often() {
        let mix = WorkloadMix {
            live_tasks_max: 3,
            requests_in_flight_max: 5,
            ..WorkloadMix::default()
        };
        let mut generator = Generator::new(7, &mix, 1, 1);
        let db = Db::default();
        let observed = |live_tasks, requests_in_flight| Observed {
            dead_letters: &[],
            db: &db,
            live_tasks,
            requests_in_flight,
        };
        // At its bound before any create, the client has nothing to poll:
        // it waits, and after that many waits it draws as usual.
        for _ in 1..WAITS_BEFORE_POLL {
            assert!(generator.next(0, &observed(3, 0)).0.is_none());
        }
        assert!(generator.next(0, &observed(3, 0)).0.is_some());
        while generator.recent.is_empty() {
            assert!(generator.next(0, &observed(2, 4)).0.is_some());
        }
        for (live, in_flight) in [(3, 0), (0, 5), (9, 9)] {
            for wait in 1..WAITS_BEFORE_POLL {
                let (request, gap) = generator.next(0, &observed(live, in_flight));
                assert!(request.is_none(), "{live} {in_flight}, wait {wait}");
                assert!((1..=mix.gap_ms_max).contains(&gap));
            }
            let (poll, _) = generator.next(0, &observed(live, in_flight));
            let poll = poll.expect("the poll");
            // It carries the waits before it, for a reproducer.
            assert_eq!(
                (poll.waits, poll.wait_ms),
                (WAITS_BEFORE_POLL - 1, mix.gap_ms_max)
            );
            let kind = poll.kind;
            assert!(matches!(kind, RequestKind::ReadStatus { .. }), "{kind:?}");
        }
        // Below both bounds the waits start over.
        assert!(generator.next(0, &observed(2, 4)).0.is_some());
        assert!(generator.next(0, &observed(3, 4)).0.is_none());
    }

    #[test]
    fn intent_keys_are_zero_padded_to_six_digits() {
        for intent in [1, 9, 10, 99_999, 100_000, 999_999, 1_000_000, 12_345_678] {
            assert_eq!(&*intent_key(intent), format!("intent-{intent:06}"));
        }
    }
}
