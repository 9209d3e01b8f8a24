//! The broker: two topics with at-least-once delivery. A publish is a new
//! entry (a republish of the same message id is another entry); a delivery
//! makes an entry invisible until it is acked or its visibility timeout
//! passes; after `delivery_attempts_max` deliveries the entry goes to the
//! dead-letter queue instead of out again.

use std::collections::{BTreeMap, BTreeSet};

use crate::hash::Sha;
use crate::world::engine::cow::CowTable;
use crate::world::engine::ids::{ActorId, DeadLetterId, EntryId, OutboxId, TaskId};
use crate::world::engine::table::{IdTable, SortedDeque};
use crate::world::stores::db::{Payload, Topic};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryState {
    Ready { visible_ms: u64 },
    InFlight { deadline_ms: u64, consumer: ActorId },
}

#[derive(Clone, Debug, Hash)]
pub struct Entry {
    pub id: EntryId,
    pub topic: Topic,
    pub message: OutboxId,
    pub task: TaskId,
    pub payload: Payload,
    pub payload_sha256: Sha,
    pub deliveries: u32,
    pub state: EntryState,
    pub last_error: Option<&'static str>,
}

/// One hand-off of an entry to a consumer. `tampered` is ground truth for
/// the invariants: no actor reads it.
#[derive(Clone, Debug, Hash)]
pub struct Delivery {
    pub entry: EntryId,
    pub topic: Topic,
    pub message: OutboxId,
    pub task: TaskId,
    pub payload: Payload,
    pub payload_sha256: Sha,
    pub count: u32,
    pub tampered: bool,
    /// Not from the broker at all: a `deliver-event` request.
    pub direct: bool,
}

#[derive(Clone, Debug, Hash)]
pub struct DeadLetter {
    pub id: DeadLetterId,
    pub topic: Topic,
    pub message: OutboxId,
    pub task: TaskId,
    pub payload: Payload,
    pub payload_sha256: Sha,
    pub error_code: &'static str,
    pub handler_version: u64,
    pub attempts: u32,
    pub dead_lettered_ms: u64,
    /// Whether the cause may pass by itself (the reconciler re-drives those).
    pub transient: bool,
}

/// Error codes a dead letter can carry that are not the input's fault.
pub fn is_transient(code: &str) -> bool {
    matches!(
        code,
        "DELIVERY_ATTEMPTS_EXHAUSTED" | "STORE_UNAVAILABLE" | "LEASE_HELD"
    )
}

#[derive(Clone, Debug, Default, Hash)]
pub struct Broker {
    /// Live entries, by id (born in id order, mostly gone in it).
    pub entries: IdTable<EntryId, Entry>,
    /// Ready entries per topic, by (visible time, entry id).
    ready: [SortedDeque<(u64, EntryId)>; 2],
    /// In-flight entries by visibility deadline.
    in_flight: SortedDeque<(u64, EntryId)>,
    pub dead_letters: CowTable<Vec<DeadLetter>>,
    /// Dead letters the reconciler has not looked at yet.
    pub unseen_dead_letters: CowTable<Vec<DeadLetterId>>,
    next_entry: u32,
    pub published: u64,
    /// A dead letter arrived: the reconciler re-plans its next wake.
    pub dead_letters_changed: bool,
    /// Live entries per task, so "does the broker still carry this task?"
    /// costs a lookup, not a walk over every entry.
    per_task: IdTable<TaskId, u32>,
    /// Live entries per message id, likewise for "is this message still
    /// in a topic?".
    per_message: CowTable<BTreeMap<OutboxId, u32>>,
    /// (message, error code) of every dead letter, so a worker can ask
    /// whether a dead letter it owes was already made.
    dead_lettered: CowTable<BTreeSet<(OutboxId, &'static str)>>,
    /// Tasks with a message in the dead-letter queue: an operator may
    /// replay one at any time, from the task's input, so compaction keeps
    /// their input (the queue keeps its letters for the whole run).
    dead_lettered_tasks: CowTable<BTreeSet<TaskId>>,
}

fn topic_slot(topic: Topic) -> usize {
    match topic {
        Topic::TaskWork => 0,
        Topic::TaskEvents => 1,
    }
}

impl Broker {
    /// Lets copies share this part's `CowTable`s until one of them writes
    /// them (`World::share`).
    pub fn share(&mut self) {
        self.dead_letters.share();
        self.unseen_dead_letters.share();
        self.per_message.share();
        self.dead_lettered.share();
        self.dead_lettered_tasks.share();
    }

    /// The bookkeeping of the entries table and the count of each task's
    /// entries, each with its name (`IdTable::bookkeeping_failure`;
    /// `converges` asks it).
    pub fn table_failures(&self) -> [(&'static str, Option<String>); 2] {
        [
            ("broker entries", self.entries.bookkeeping_failure()),
            (
                "broker's entries per task",
                self.per_task.bookkeeping_failure(),
            ),
        ]
    }

    /// Accepts a publish: always a new entry.
    pub fn publish(
        &mut self,
        topic: Topic,
        message: OutboxId,
        task: TaskId,
        payload: Payload,
        payload_sha256: Sha,
        visible_ms: u64,
    ) -> EntryId {
        self.next_entry += 1;
        self.published += 1;
        let id = EntryId(self.next_entry);
        match self.per_task.get_mut(task) {
            Some(count) => *count += 1,
            None => self.per_task.insert(task, 1),
        }
        *self.per_message.entry(message).or_insert(0) += 1;
        self.entries.insert(
            id,
            Entry {
                id,
                topic,
                message,
                task,
                payload,
                payload_sha256,
                deliveries: 0,
                state: EntryState::Ready { visible_ms },
                last_error: None,
            },
        );
        self.ready[topic_slot(topic)].insert((visible_ms, id));
        id
    }

    /// Moves entries whose visibility timeout passed back to ready.
    pub fn expire(&mut self, now: u64) {
        while let Some(&(deadline, id)) = self.in_flight.first() {
            if deadline > now {
                break;
            }
            self.in_flight.pop_first();
            let entry = self.entries.get_mut(id).expect("in-flight entry exists");
            entry.state = EntryState::Ready {
                visible_ms: deadline,
            };
            self.ready[topic_slot(entry.topic)].insert((deadline, id));
        }
    }

    /// The next entry of `topic` visible at `now`, if any.
    pub fn next_ready(&self, topic: Topic, now: u64) -> Option<(u64, EntryId)> {
        self.ready[topic_slot(topic)]
            .first()
            .filter(|(visible, _)| *visible <= now)
            .copied()
    }

    /// The earliest time something changes by itself: an entry becomes
    /// visible or a visibility timeout passes.
    pub fn next_due(&self) -> Option<u64> {
        let ready = self
            .ready
            .iter()
            .filter_map(|set| set.first().map(|(t, _)| *t));
        let flight = self.in_flight.first().map(|(t, _)| *t);
        ready.chain(flight).min()
    }

    /// Hands an entry out: counts the delivery and hides it until
    /// `deadline_ms`.
    pub fn take(&mut self, id: EntryId, consumer: ActorId, deadline_ms: u64) -> &Entry {
        let entry = self.entries.get_mut(id).expect("entry exists");
        if let EntryState::Ready { visible_ms } = entry.state {
            self.ready[topic_slot(entry.topic)].remove(&(visible_ms, id));
        }
        entry.deliveries += 1;
        entry.state = EntryState::InFlight {
            deadline_ms,
            consumer,
        };
        self.in_flight.insert((deadline_ms, id));
        entry
    }

    /// Removes an entry for good (ack). An unknown id is an ack of an entry
    /// already gone: a no-op.
    pub fn ack(&mut self, id: EntryId) -> bool {
        match self.entries.remove_with(id, |entry| {
            (entry.topic, entry.state, entry.task, entry.message)
        }) {
            Some((topic, state, task, message)) => {
                self.unindex(id, topic, state);
                self.forget_entry(task, message);
                true
            }
            None => false,
        }
    }

    /// Makes an in-flight entry visible again at `visible_ms` (nack).
    pub fn nack(&mut self, id: EntryId, visible_ms: u64, error: &'static str) -> bool {
        let Some(entry) = self.entries.get(id) else {
            return false;
        };
        self.unindex(id, entry.topic, entry.state);
        let entry = self.entries.get_mut(id).expect("entry exists");
        entry.last_error = Some(error);
        entry.state = EntryState::Ready { visible_ms };
        self.ready[topic_slot(entry.topic)].insert((visible_ms, id));
        true
    }

    /// Takes entry `id` (of `topic`, in `state`) out of the ready or
    /// in-flight index.
    fn unindex(&mut self, id: EntryId, topic: Topic, state: EntryState) {
        match state {
            EntryState::Ready { visible_ms } => {
                self.ready[topic_slot(topic)].remove(&(visible_ms, id));
            }
            EntryState::InFlight { deadline_ms, .. } => {
                self.in_flight.remove(&(deadline_ms, id));
            }
        }
    }

    /// Moves an entry to the dead-letter queue.
    pub fn dead_letter(
        &mut self,
        id: EntryId,
        error_code: &'static str,
        handler_version: u64,
        now: u64,
    ) -> DeadLetterId {
        let entry = self.entries.remove(id).expect("entry exists");
        self.unindex(id, entry.topic, entry.state);
        self.forget_entry(entry.task, entry.message);
        self.push_dead_letter(&entry, error_code, handler_version, now)
    }

    /// Copies a delivery's message to the dead-letter queue (a consumer's
    /// reject or a poison classification); the entry itself is acked apart.
    pub fn push_dead_letter(
        &mut self,
        entry: &Entry,
        error_code: &'static str,
        handler_version: u64,
        now: u64,
    ) -> DeadLetterId {
        let id = DeadLetterId(self.dead_letters.len() as u32 + 1);
        self.dead_letters.push(DeadLetter {
            id,
            topic: entry.topic,
            message: entry.message,
            task: entry.task,
            payload: entry.payload.clone(),
            payload_sha256: entry.payload_sha256,
            error_code,
            handler_version,
            attempts: entry.deliveries,
            dead_lettered_ms: now,
            transient: is_transient(error_code),
        });
        self.unseen_dead_letters.push(id);
        self.dead_letters_changed = true;
        self.dead_lettered.insert((entry.message, error_code));
        self.dead_lettered_tasks.insert(entry.task);
        id
    }

    /// Whether a message of `task` is in the dead-letter queue.
    pub fn has_dead_letter_of(&self, task: TaskId) -> bool {
        self.dead_lettered_tasks.contains(&task)
    }

    /// Whether `message` was dead-lettered with `error_code`.
    pub fn has_dead_letter(&self, message: OutboxId, error_code: &str) -> bool {
        self.dead_lettered
            .range((message, "")..)
            .take_while(|(m, _)| *m == message)
            .any(|(_, code)| *code == error_code)
    }

    pub fn dead_letter_by_id(&self, id: DeadLetterId) -> Option<&DeadLetter> {
        self.dead_letters.get(id.slot())
    }

    /// One live entry of `task` and `message` is gone.
    fn forget_entry(&mut self, task: TaskId, message: OutboxId) {
        if let Some(count) = self.per_task.get_mut(task) {
            *count -= 1;
            if *count == 0 {
                self.per_task.remove(task);
            }
        }
        if let Some(count) = self.per_message.get_mut(&message) {
            *count -= 1;
            if *count == 0 {
                self.per_message.remove(&message);
            }
        }
    }

    /// Whether any live entry is about `task`.
    pub fn carries_task(&self, task: TaskId) -> bool {
        self.per_task.contains(task)
    }

    /// Entries not yet acked, in either topic.
    pub fn live_entries(&self) -> usize {
        self.entries.len()
    }

    pub fn has_live_message(&self, message: OutboxId) -> bool {
        self.per_message.contains_key(&message)
    }
}
