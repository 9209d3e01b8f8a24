//! A small stateright 0.31 model of sim's pipeline, for issue 21's speed
//! comparison: `sim check` against stateright's breadth-first checker.
//!
//! Actors (one of each, except the clients: one per task):
//! client i (key i) -> api (one db transaction) -> outbox -> publisher
//! -> broker -> worker (inbox, effect token, artifact store) -> ack.
//!
//! Faults are actions too, each costing one unit of the path's budget
//! (`faults_used` is part of the state, as sim keeps a path's spent budget
//! in its state identity): lost publisher confirm, lost ack, worker crash,
//! publisher crash, client timeout after commit (the response is lost and
//! the client retries with the same key).
//!
//! Everything is in ordered containers (Vec kept sorted, BTreeMap, BTreeSet)
//! so that equal states hash alike whatever path led to them.

use stateright::{Checker, Expectation, Model, Property};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

type TaskId = u8;
type Key = u8;
/// The message id of a task's outbox row is the task id (one row per task).
type MsgId = u8;

/// An effect token: one per attempt of a task. A redelivery of a running
/// task resumes its attempt and so reuses the token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Token {
    task: TaskId,
    attempt: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Status {
    Pending,
    Running,
    Completed,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TaskRow {
    key: Key,
    status: Status,
    attempt: u8,
    artifact: Option<Token>,
    /// Ground truth no actor reads: the task has been terminal once.
    was_terminal: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct OutboxRow {
    msg: MsgId,
    published: bool,
}

/// A client's volatile state for its one intent (its key is its index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Client {
    /// Not sent yet.
    Idle,
    /// The request is at the API, not yet committed.
    Requesting,
    /// Committed; the response (the task id) is on its way.
    AwaitResponse(TaskId),
    /// The response was lost after the commit: it will retry, same key.
    TimedOut,
    /// Got its task id.
    Done(TaskId),
}

/// The publisher's volatile state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Publisher {
    Idle,
    /// Claimed outbox row (index).
    Claimed(u8),
    /// Published the row's message; waiting for the broker's confirm.
    AwaitConfirm(u8),
}

/// The worker's volatile state: the delivery it holds and how far it got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Worker {
    Idle,
    /// Holding a delivery, not yet looked at.
    Received(MsgId),
    /// Started (or resumed) the attempt whose token this is.
    Started(MsgId, Token),
    /// Put the artifact under the token.
    Put(MsgId, Token),
    /// Processed (or found a duplicate in the inbox): ack next.
    Processed(MsgId),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Object {
    task: TaskId,
    visible: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    clients: Vec<Client>,
    // Database (durable; each action below touches it in one transaction).
    tasks: Vec<TaskRow>,
    idempotency: BTreeMap<Key, TaskId>,
    outbox: Vec<OutboxRow>,
    inbox: BTreeSet<MsgId>,
    // Publisher (volatile).
    publisher: Publisher,
    // Broker (durable): ready copies (a sorted multiset), and unacked
    // deliveries whose ack was lost (redelivered later).
    ready: Vec<MsgId>,
    unacked: Vec<MsgId>,
    // Worker (volatile).
    worker: Worker,
    // Artifact store (durable), keyed by effect token.
    store: BTreeMap<Token, Object>,
    // The path's spent fault budget.
    faults_used: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Action {
    ClientSend(Key),
    ApiCommit(Key),
    ClientReceive(Key),
    PublisherClaim(u8),
    PublisherPublish,
    PublisherConfirm,
    BrokerDeliver(MsgId),
    BrokerRedeliver(MsgId),
    WorkerStart,
    WorkerPut,
    WorkerComplete,
    WorkerAck,
    // Faults.
    FaultClientTimeoutAfterCommit(Key),
    FaultLostConfirm,
    FaultLostAck,
    FaultWorkerCrash,
    FaultPublisherCrash,
}

impl Action {
    fn is_fault(self) -> bool {
        matches!(
            self,
            Action::FaultClientTimeoutAfterCommit(_)
                | Action::FaultLostConfirm
                | Action::FaultLostAck
                | Action::FaultWorkerCrash
                | Action::FaultPublisherCrash
        )
    }
}

struct Pipeline {
    tasks: u8,
    faults: u8,
}

fn insert_sorted(v: &mut Vec<MsgId>, m: MsgId) {
    let at = v.partition_point(|&x| x <= m);
    v.insert(at, m);
}

fn remove_one(v: &mut Vec<MsgId>, m: MsgId) -> bool {
    match v.iter().position(|&x| x == m) {
        Some(i) => {
            v.remove(i);
            true
        }
        None => false,
    }
}

impl Pipeline {
    /// The non-fault actions enabled in `s` (also used by the quiet check).
    fn steps(&self, s: &State, out: &mut Vec<Action>) {
        for (i, c) in s.clients.iter().enumerate() {
            let k = i as Key;
            match c {
                Client::Idle | Client::TimedOut => out.push(Action::ClientSend(k)),
                Client::Requesting => out.push(Action::ApiCommit(k)),
                Client::AwaitResponse(_) => out.push(Action::ClientReceive(k)),
                Client::Done(_) => {}
            }
        }
        match s.publisher {
            Publisher::Idle => {
                for (r, row) in s.outbox.iter().enumerate() {
                    if !row.published {
                        out.push(Action::PublisherClaim(r as u8));
                    }
                }
            }
            Publisher::Claimed(_) => out.push(Action::PublisherPublish),
            Publisher::AwaitConfirm(_) => out.push(Action::PublisherConfirm),
        }
        if s.worker == Worker::Idle {
            let mut last = None;
            for &m in &s.ready {
                if last != Some(m) {
                    out.push(Action::BrokerDeliver(m));
                    last = Some(m);
                }
            }
        }
        let mut last = None;
        for &m in &s.unacked {
            if last != Some(m) {
                out.push(Action::BrokerRedeliver(m));
                last = Some(m);
            }
        }
        match s.worker {
            Worker::Idle => {}
            Worker::Received(_) => out.push(Action::WorkerStart),
            Worker::Started(..) => out.push(Action::WorkerPut),
            Worker::Put(..) => out.push(Action::WorkerComplete),
            Worker::Processed(_) => out.push(Action::WorkerAck),
        }
    }

    /// Quiet (nothing but faults left to do) and everything converged.
    fn quiet_implies_converged(&self, s: &State) -> bool {
        let mut a = Vec::new();
        self.steps(s, &mut a);
        if !a.is_empty() {
            return true;
        }
        s.tasks.len() == self.tasks as usize
            && s.clients.iter().all(|c| matches!(c, Client::Done(_)))
            && s.tasks.iter().all(|t| t.status == Status::Completed)
            && s.outbox.iter().all(|r| r.published)
            && s.ready.is_empty()
            && s.unacked.is_empty()
            && s.publisher == Publisher::Idle
            && s.worker == Worker::Idle
            && (0..s.tasks.len()).all(|t| {
                s.store
                    .values()
                    .filter(|o| o.task as usize == t && o.visible)
                    .count()
                    == 1
            })
    }
}

impl Model for Pipeline {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            clients: vec![Client::Idle; self.tasks as usize],
            tasks: Vec::new(),
            idempotency: BTreeMap::new(),
            outbox: Vec::new(),
            inbox: BTreeSet::new(),
            publisher: Publisher::Idle,
            ready: Vec::new(),
            unacked: Vec::new(),
            worker: Worker::Idle,
            store: BTreeMap::new(),
            faults_used: 0,
        }]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        self.steps(s, out);
        if s.faults_used >= self.faults {
            return;
        }
        for (i, c) in s.clients.iter().enumerate() {
            if let Client::AwaitResponse(_) = c {
                out.push(Action::FaultClientTimeoutAfterCommit(i as Key));
            }
        }
        match s.publisher {
            Publisher::Idle => {}
            Publisher::Claimed(_) => out.push(Action::FaultPublisherCrash),
            Publisher::AwaitConfirm(_) => {
                out.push(Action::FaultLostConfirm);
                out.push(Action::FaultPublisherCrash);
            }
        }
        match s.worker {
            Worker::Idle => {}
            Worker::Processed(_) => {
                out.push(Action::FaultLostAck);
                out.push(Action::FaultWorkerCrash);
            }
            _ => out.push(Action::FaultWorkerCrash),
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        if action.is_fault() {
            s.faults_used += 1;
        }
        match action {
            Action::ClientSend(k) => s.clients[k as usize] = Client::Requesting,
            // One transaction: a known key replays its task; otherwise task,
            // idempotency record and outbox row are inserted together.
            Action::ApiCommit(k) => {
                let task = match s.idempotency.get(&k) {
                    Some(&t) => t,
                    None => {
                        let t = s.tasks.len() as TaskId;
                        s.tasks.push(TaskRow {
                            key: k,
                            status: Status::Pending,
                            attempt: 0,
                            artifact: None,
                            was_terminal: false,
                        });
                        s.idempotency.insert(k, t);
                        s.outbox.push(OutboxRow {
                            msg: t,
                            published: false,
                        });
                        t
                    }
                };
                s.clients[k as usize] = Client::AwaitResponse(task);
            }
            Action::ClientReceive(k) => {
                let Client::AwaitResponse(t) = s.clients[k as usize] else {
                    return None;
                };
                s.clients[k as usize] = Client::Done(t);
            }
            Action::FaultClientTimeoutAfterCommit(k) => s.clients[k as usize] = Client::TimedOut,

            Action::PublisherClaim(r) => s.publisher = Publisher::Claimed(r),
            Action::PublisherPublish => {
                let Publisher::Claimed(r) = s.publisher else {
                    return None;
                };
                insert_sorted(&mut s.ready, s.outbox[r as usize].msg);
                s.publisher = Publisher::AwaitConfirm(r);
            }
            Action::PublisherConfirm => {
                let Publisher::AwaitConfirm(r) = s.publisher else {
                    return None;
                };
                s.outbox[r as usize].published = true;
                s.publisher = Publisher::Idle;
            }
            // The confirm is lost: the row stays unpublished and is claimed
            // and published again later (at-least-once).
            Action::FaultLostConfirm => s.publisher = Publisher::Idle,
            Action::FaultPublisherCrash => s.publisher = Publisher::Idle,

            Action::BrokerDeliver(m) => {
                remove_one(&mut s.ready, m);
                s.worker = Worker::Received(m);
            }
            Action::BrokerRedeliver(m) => {
                remove_one(&mut s.unacked, m);
                insert_sorted(&mut s.ready, m);
            }

            // One transaction: the inbox dedupes the message id; otherwise
            // the task goes pending -> running with a new attempt (a running
            // task is resumed: same attempt, same token).
            Action::WorkerStart => {
                let Worker::Received(m) = s.worker else {
                    return None;
                };
                if s.inbox.contains(&m) {
                    s.worker = Worker::Processed(m);
                } else {
                    let task = &mut s.tasks[m as usize];
                    match task.status {
                        Status::Pending => {
                            task.status = Status::Running;
                            task.attempt += 1;
                        }
                        Status::Running => {}
                        Status::Completed => {
                            s.worker = Worker::Processed(m);
                            return Some(s);
                        }
                    }
                    let token = Token {
                        task: m,
                        attempt: task.attempt,
                    };
                    s.worker = Worker::Started(m, token);
                }
            }
            // Idempotent put keyed by token.
            Action::WorkerPut => {
                let Worker::Started(m, token) = s.worker else {
                    return None;
                };
                s.store.entry(token).or_insert(Object {
                    task: m,
                    visible: true,
                });
                s.worker = Worker::Put(m, token);
            }
            // One transaction: running -> completed (never reopened) with
            // the artifact, and the inbox record of the message.
            Action::WorkerComplete => {
                let Worker::Put(m, token) = s.worker else {
                    return None;
                };
                let task = &mut s.tasks[m as usize];
                if task.status == Status::Running {
                    task.status = Status::Completed;
                    task.artifact = Some(token);
                    task.was_terminal = true;
                }
                s.inbox.insert(m);
                s.worker = Worker::Processed(m);
            }
            Action::WorkerAck => s.worker = Worker::Idle,
            // The ack is lost: the broker still holds the delivery unacked
            // and redelivers it later.
            Action::FaultLostAck => {
                let Worker::Processed(m) = s.worker else {
                    return None;
                };
                insert_sorted(&mut s.unacked, m);
                s.worker = Worker::Idle;
            }
            // The worker loses its volatile state; its connection closes and
            // the broker requeues the unacked delivery it held.
            Action::FaultWorkerCrash => {
                let m = match s.worker {
                    Worker::Idle => return None,
                    Worker::Received(m)
                    | Worker::Started(m, _)
                    | Worker::Put(m, _)
                    | Worker::Processed(m) => m,
                };
                insert_sorted(&mut s.ready, m);
                s.worker = Worker::Idle;
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("one-task-per-idempotency-key", |_, s: &State| {
                let mut seen = BTreeSet::new();
                s.tasks.iter().all(|t| seen.insert(t.key))
                    && s.idempotency
                        .iter()
                        .all(|(k, &t)| s.tasks[t as usize].key == *k)
            }),
            Property::always("at-most-one-visible-artifact-per-task", |_, s: &State| {
                let mut seen = BTreeSet::new();
                s.store
                    .values()
                    .filter(|o| o.visible)
                    .all(|o| seen.insert(o.task))
            }),
            Property::always("terminal-never-reopens", |_, s: &State| {
                s.tasks
                    .iter()
                    .all(|t| !t.was_terminal || t.status == Status::Completed)
            }),
            // Extra, like sim's `converges` judged on quiet states.
            Property::always("quiet-state-converged", |m: &Pipeline, s: &State| {
                m.quiet_implies_converged(s)
            }),
            Property::sometimes("some-task-completes", |_, s: &State| {
                s.tasks.iter().any(|t| t.status == Status::Completed)
            }),
        ]
    }
}

fn usage() -> ! {
    eprintln!("usage: sim-stateright-compare [--tasks N (1..=8)] [--faults F (0..=8)] [--threads T (1..=64)]");
    std::process::exit(2);
}

fn main() {
    let (mut tasks, mut faults, mut threads) = (2u8, 2u8, 1usize);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value: usize = match args.next().and_then(|v| v.parse().ok()) {
            Some(v) => v,
            None => usage(),
        };
        match flag.as_str() {
            "--tasks" if (1..=8).contains(&value) => tasks = value as u8,
            "--faults" if value <= 8 => faults = value as u8,
            "--threads" if (1..=64).contains(&value) => threads = value,
            _ => usage(),
        }
    }

    let model = Pipeline { tasks, faults };
    let start = Instant::now();
    let checker = model.checker().threads(threads).spawn_bfs().join();
    let seconds = start.elapsed().as_secs_f64();

    // stateright's own counters (Checker trait, 0.31):
    // - unique_state_count(): distinct fingerprints generated (the BFS's
    //   `generated` map, initial state included);
    // - state_count(): every successor generated, duplicates included,
    //   plus the initial states (so: transitions + 1);
    // - max_depth(): the deepest state taken off the queue, the initial
    //   state counting as depth 1 (so: transitions on the longest shortest
    //   path + 1).
    let unique = checker.unique_state_count();
    let states = checker.state_count();
    let max_depth = checker.max_depth();

    let properties = checker.model().properties();
    let discoveries = checker.discoveries();
    let mut violated = false;
    for p in &properties {
        if p.expectation.discovery_is_failure() {
            if let Some(path) = discoveries.get(p.name) {
                violated = true;
                eprintln!("VIOLATION {}: {}", p.name, path);
            }
        } else if p.expectation == Expectation::Sometimes && !discoveries.contains_key(p.name) {
            eprintln!("NOT REACHED (sometimes) {}", p.name);
        }
    }
    // With the default finish_when (all properties discovered), no target
    // and no timeout, the search only stops early when every property has a
    // discovery, i.e. every `always` has failed; so no failure discovery
    // means the queue ran dry: the space was exhausted.
    let all_found = properties.iter().all(|p| discoveries.contains_key(p.name));
    let exhausted = !all_found;

    println!(
        "stateright-bfs tasks={tasks} faults={faults} threads={threads} unique_states={unique} \
         states={states} max_depth={max_depth} seconds={seconds:.3} unique_states_per_s={:.0} exhausted={exhausted}",
        unique as f64 / seconds
    );
    if violated {
        std::process::exit(1);
    }
}
