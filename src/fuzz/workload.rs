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
}

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
    replayed: Vec<DeadLetterId>,
    bumped: bool,
    /// The handler version the last bump set.
    handler_version: u64,
    /// Outside events issued, for their unique ids.
    outside_issued: u64,
    /// Creates at the edges of the key and input checks issued, for keys
    /// of their own.
    edges_issued: u64,
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
            replayed: Vec::new(),
            bumped: false,
            handler_version: 1,
            outside_issued: 0,
            edges_issued: 0,
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

    /// The next request at `now` and the gap before the one after it.
    pub fn next(&mut self, now: u64, world: &Observed) -> (Request, u64) {
        let dead_letters = world.dead_letters;
        if let Some(request) = self.pending.take() {
            return (request, self.rng.range(1, self.gap_ms_max));
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
                return (request, 0);
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
                Some(key) => self.request(
                    now,
                    RequestKind::ReadStatus {
                        target: Target::Key(key),
                    },
                ),
                None => self.new_create(now, false),
            },
            6 => self.new_create(now, true),
            7 => {
                let poison = dead_letters.iter().find(|letter| {
                    matches!(letter.payload, Payload::Work { .. })
                        && letter.error_code == "UNSUPPORTED_FORMAT"
                        && !self.replayed.contains(&letter.id)
                });
                match poison {
                    Some(letter) if self.bumped => {
                        self.replayed.push(letter.id);
                        self.request(
                            now,
                            RequestKind::ReplayDeadLetter {
                                dead_letter: DeadLetterRef::Id(letter.id),
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
                    RequestKind::ReplayDeadLetter {
                        dead_letter: reference_to(
                            dead_letters,
                            any_work_letter(dead_letters, pick),
                            pick >> 30,
                        ),
                    }
                };
                self.request(now, kind)
            }
            10 => self.edge_create(now),
            _ => self.new_create(now, false),
        };
        (request, gap)
    }
}

impl crate::world::input::Workload for Generator {
    fn next(&mut self, now: u64, world: &Observed) -> (Request, u64) {
        Generator::next(self, now, world)
    }

    fn fork(&self) -> Box<dyn crate::world::input::Workload> {
        Box::new(self.clone())
    }
}

/// One of the work dead letters by `pick`, or, one time in (letters + 1),
/// an id past the last letter: a replay the operator gets wrong.
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

fn any_work_letter(dead_letters: &[DeadLetter], pick: u64) -> DeadLetterId {
    let work = dead_letters
        .iter()
        .filter(|letter| letter.topic == Topic::TaskWork);
    let count = work.clone().count() as u64;
    match work.clone().nth((pick % (count + 1)) as usize) {
        Some(letter) => letter.id,
        None => DeadLetterId(u32::try_from(dead_letters.len() + 1).unwrap_or(u32::MAX)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn intent_keys_are_zero_padded_to_six_digits() {
        for intent in [1, 9, 10, 99_999, 100_000, 999_999, 1_000_000, 12_345_678] {
            assert_eq!(&*intent_key(intent), format!("intent-{intent:06}"));
        }
    }
}
