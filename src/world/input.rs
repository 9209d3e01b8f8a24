//! What drives a world from outside: its setup (shape, seed, mutant,
//! scripted requests and faults) and the requests themselves. The scenario
//! parser and the fuzz workload generator both produce these types; the
//! world names neither of them.

use std::sync::Arc;

use crate::config::Config;
use crate::faults::ScriptedFault;
use crate::mutants::Mutant;
use crate::task::{TaskEvent, Text};
use crate::world::engine::ids::{DeadLetterId, OutboxId, TaskId};
use crate::world::engine::schedule::Wake;
use crate::world::stores::broker::DeadLetter;
use crate::world::stores::db::{Db, Input};

/// Everything a world is built from.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    pub seed: u64,
    pub mutant: Option<Mutant>,
    pub config: Config,
    /// Scripted requests, issued at their times as a chain.
    pub requests: Vec<Request>,
    pub faults: Vec<ScriptedFault>,
    /// Wakes to fire first, in this order, whatever their due times (a
    /// model checker's counterexample); empty for the usual time order.
    pub schedule: Vec<Wake>,
}

/// What a workload may read of the world when it draws a request.
pub struct Observed<'a> {
    pub dead_letters: &'a [DeadLetter],
    pub db: &'a Db,
    /// Tasks created and not yet compacted (`World::live_tasks`).
    pub live_tasks: u64,
    /// Client requests sent and not yet answered or given up.
    pub requests_in_flight: u64,
}

/// A source of requests drawn while the world runs (the fuzz workload).
/// The world asks for the next request when the previous one's gap has
/// passed, and stops asking when its workload is switched off.
pub trait Workload: Send {
    /// The request to issue now (none while the workload waits), and the
    /// gap in virtual milliseconds until it is asked again. It may look at
    /// the world (replays name dead letters, outside producers copy and
    /// alter stored events, a client waits while the world is behind).
    fn next(&mut self, now: u64, world: &Observed) -> (Option<Request>, u64);

    /// A copy drawing the same requests from here on (a forked world's).
    fn fork(&self) -> Box<dyn Workload>;
}

impl Clone for Box<dyn Workload> {
    fn clone(&self) -> Box<dyn Workload> {
        self.fork()
    }
}

/// Which task a cancel or a status read is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// The task created under this idempotency key.
    Key(Text),
    Task(TaskId),
}

/// Which dead letter an operator replays.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DeadLetterRef {
    Id(DeadLetterId),
    /// The first dead letter of this message.
    Message(OutboxId),
    /// The first dead letter of this task.
    Task(TaskId),
}

#[derive(Clone, Debug, PartialEq, Hash)]
pub enum RequestKind {
    /// The input is parsed once, into its canonical JSON and hash: a
    /// request is cloned into the log and sent again on every retry.
    Create {
        key: Text,
        input: Arc<Input>,
    },
    Cancel {
        target: Target,
    },
    ReadStatus {
        target: Target,
    },
    ReplayDeadLetter {
        dead_letter: DeadLetterRef,
    },
    BumpHandlerVersion {
        version: u64,
    },
    AppendEvent {
        event: TaskEvent,
    },
    DeliverEvent {
        event: TaskEvent,
    },
}

impl RequestKind {
    pub fn name(&self) -> &'static str {
        match self {
            RequestKind::Create { .. } => "create",
            RequestKind::Cancel { .. } => "cancel",
            RequestKind::ReadStatus { .. } => "read-status",
            RequestKind::ReplayDeadLetter { .. } => "replay-dead-letter",
            RequestKind::BumpHandlerVersion { .. } => "bump-handler-version",
            RequestKind::AppendEvent { .. } => "append-event",
            RequestKind::DeliverEvent { .. } => "deliver-event",
        }
    }

    /// Requests a client sends to an API; the others are operator actions.
    pub fn from_client(&self) -> bool {
        matches!(
            self,
            RequestKind::Create { .. }
                | RequestKind::Cancel { .. }
                | RequestKind::ReadStatus { .. }
        )
    }
}

/// One `[[requests]]` entry. Two creates with the same key and the same
/// input are one client intent (the second is a retry); ground truth joins
/// them.
#[derive(Clone, Debug, PartialEq, Hash)]
pub struct Request {
    pub at_ms: u64,
    pub kind: RequestKind,
    /// 0-based client index (`client-1` is 0).
    pub client: u16,
    /// 0-based API index the first send goes to; round-robin when absent.
    pub api: Option<u16>,
    /// Turns the fuzz client let pass before this request, one every
    /// `wait_ms`, holding off at a bound of its workload: a reproducer
    /// replays each as a wake that does nothing, so that its requests take
    /// their places among the world's wakes exactly as in the fuzz run.
    pub waits: u32,
    pub wait_ms: u64,
}

impl Request {
    /// When the request's first turn comes: its time, less its waits.
    pub fn first_turn_ms(&self) -> u64 {
        let waited = u64::from(self.waits).saturating_mul(self.wait_ms);
        self.at_ms.saturating_sub(waited)
    }

    /// Issued at its time with no turns waited before it.
    pub fn drop_waits(&mut self) {
        self.waits = 0;
        self.wait_ms = 0;
    }
}
