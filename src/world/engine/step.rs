//! Step names: every atomic action an actor can take, named
//! `<actor kind>.<verb>` (`worker.put`). These names appear in traces, in
//! stories and in scenario `after = "…"` placements; keep them stable.

use std::fmt;

use crate::world::engine::ids::ActorKind;

macro_rules! verbs {
    ($( $variant:ident = $text:literal ),* $(,)?) => {
        /// What a step did, independent of which actor did it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Verb { $( $variant, )* }

        impl Verb {
            pub const ALL: &'static [Verb] = &[ $( Verb::$variant, )* ];

            pub fn as_str(self) -> &'static str {
                match self { $( Verb::$variant => $text, )* }
            }
        }
    };
}

verbs! {
    Send = "send",
    Retry = "retry",
    GiveUp = "give-up",
    Create = "create",
    InsertRecord = "insert-record",
    CreateTask = "create-task",
    ReadQuota = "read-quota",
    Publish = "publish",
    Cancel = "cancel",
    ReadCache = "read-cache",
    ReadDb = "read-db",
    FillCache = "fill-cache",
    Respond = "respond",
    Claim = "claim",
    Mark = "mark",
    Deliver = "deliver",
    DeadLetter = "dead-letter",
    Register = "register",
    Start = "start",
    Plan = "plan",
    Put = "put",
    RecordUnknown = "record-unknown",
    ReadBack = "read-back",
    Verify = "verify",
    Recheck = "recheck",
    Reload = "reload",
    Expire = "expire",
    Complete = "complete",
    Ack = "ack",
    Nack = "nack",
    Quarantine = "quarantine",
    FailPoison = "fail-poison",
    Compensate = "compensate",
    CheckHidden = "check-hidden",
    Fail = "fail",
    FenceClaim = "fence-claim",
    FenceRead = "fence-read",
    FenceHide = "fence-hide",
    FenceCheck = "fence-check",
    Resolve = "resolve",
    Apply = "apply",
    Invalidate = "invalidate",
    Refetch = "refetch",
    Rebuild = "rebuild",
    Scan = "scan",
    Redrive = "redrive",
    Review = "review",
    BumpHandlerVersion = "bump-handler-version",
    ReplayDeadLetter = "replay-dead-letter",
    AppendEvent = "append-event",
    DeliverEvent = "deliver-event",
    Crash = "crash",
    Restart = "restart",
    Pause = "pause",
    // Added after the first milestone: last, so the verbs before it keep
    // the numbers traces are hashed with.
    Compact = "compact",
}

/// A step name: which kind of actor did which verb.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Action {
    pub kind: ActorKind,
    pub verb: Verb,
}

impl Action {
    pub const fn new(kind: ActorKind, verb: Verb) -> Action {
        Action { kind, verb }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.kind.as_str(), self.verb.as_str())
    }
}

use ActorKind as K;
use Verb as V;

const fn a(kind: ActorKind, verb: Verb) -> Action {
    Action::new(kind, verb)
}

/// Every step the world can take, by actor kind. Crash and restart apply
/// to every actor that can crash.
pub const STEP_NAMES: &[Action] = &[
    a(K::Client, V::Send),
    a(K::Client, V::Retry),
    a(K::Client, V::GiveUp),
    a(K::Client, V::Crash),
    a(K::Client, V::Restart),
    a(K::Client, V::Pause),
    a(K::Api, V::Create),
    a(K::Api, V::InsertRecord),
    a(K::Api, V::CreateTask),
    a(K::Api, V::ReadQuota),
    a(K::Api, V::Publish),
    a(K::Api, V::Cancel),
    a(K::Api, V::ReadCache),
    a(K::Api, V::ReadDb),
    a(K::Api, V::FillCache),
    a(K::Api, V::Respond),
    a(K::Api, V::Crash),
    a(K::Api, V::Restart),
    a(K::Api, V::Pause),
    a(K::Publisher, V::Claim),
    a(K::Publisher, V::Publish),
    a(K::Publisher, V::Mark),
    a(K::Publisher, V::Crash),
    a(K::Publisher, V::Restart),
    a(K::Publisher, V::Pause),
    a(K::Broker, V::Deliver),
    a(K::Broker, V::DeadLetter),
    a(K::Worker, V::Register),
    a(K::Worker, V::Start),
    a(K::Worker, V::Plan),
    a(K::Worker, V::Put),
    a(K::Worker, V::RecordUnknown),
    a(K::Worker, V::ReadBack),
    a(K::Worker, V::Verify),
    a(K::Worker, V::Recheck),
    a(K::Worker, V::Reload),
    a(K::Worker, V::Complete),
    a(K::Worker, V::Ack),
    a(K::Worker, V::Nack),
    a(K::Worker, V::Quarantine),
    a(K::Worker, V::FailPoison),
    a(K::Worker, V::DeadLetter),
    a(K::Worker, V::Compensate),
    a(K::Worker, V::CheckHidden),
    a(K::Worker, V::Fail),
    a(K::Worker, V::FenceClaim),
    a(K::Worker, V::FenceRead),
    a(K::Worker, V::FenceHide),
    a(K::Worker, V::FenceCheck),
    a(K::Worker, V::Resolve),
    a(K::Worker, V::Crash),
    a(K::Worker, V::Restart),
    a(K::Worker, V::Pause),
    a(K::Projector, V::Apply),
    a(K::Projector, V::Invalidate),
    a(K::Projector, V::Refetch),
    a(K::Projector, V::Rebuild),
    a(K::Projector, V::Ack),
    a(K::Projector, V::Crash),
    a(K::Projector, V::Restart),
    a(K::Projector, V::Pause),
    a(K::Reconciler, V::Scan),
    a(K::Reconciler, V::FenceClaim),
    a(K::Reconciler, V::FenceRead),
    a(K::Reconciler, V::FenceHide),
    a(K::Reconciler, V::FenceCheck),
    a(K::Reconciler, V::Resolve),
    a(K::Reconciler, V::Redrive),
    a(K::Reconciler, V::Review),
    a(K::Reconciler, V::Expire),
    a(K::Reconciler, V::Compact),
    a(K::Reconciler, V::Crash),
    a(K::Reconciler, V::Restart),
    a(K::Reconciler, V::Pause),
    a(K::Operator, V::BumpHandlerVersion),
    a(K::Operator, V::ReplayDeadLetter),
    a(K::Operator, V::AppendEvent),
    a(K::Operator, V::DeliverEvent),
];

// The table below is indexed by `ActorKind as usize`: a kind left out of
// `ActorKind::ALL` would fall outside it.
const _: () = assert!(ActorKind::Operator as usize + 1 == ActorKind::ALL.len());

/// How many steps of each name a run took: a table by actor kind and
/// verb, so counting a step is one increment, not a map lookup.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StepCounts {
    counts: Box<[u64]>,
}

/// Each (kind, verb)'s place in `STEP_NAMES`, or `UNNAMED` for a pair no
/// step has: the counts hold one slot per step name (and one for any
/// other pair), not one per pair. A world is copied at every branch the
/// model checker takes, and a table of every pair was 4 KB of each copy.
const PLACES: [u8; ActorKind::ALL.len() * Verb::ALL.len()] = {
    let mut places = [UNNAMED; ActorKind::ALL.len() * Verb::ALL.len()];
    let mut index = 0;
    while index < STEP_NAMES.len() {
        let action = STEP_NAMES[index];
        places[action.kind as usize * Verb::ALL.len() + action.verb as usize] = index as u8;
        index += 1;
    }
    places
};

/// The slot of the pairs no step name has.
const UNNAMED: u8 = STEP_NAMES.len() as u8;
const _: () = assert!(STEP_NAMES.len() < u8::MAX as usize);

impl Default for StepCounts {
    fn default() -> StepCounts {
        StepCounts {
            counts: vec![0; STEP_NAMES.len() + 1].into_boxed_slice(),
        }
    }
}

impl StepCounts {
    fn slot(action: Action) -> usize {
        PLACES[action.kind as usize * Verb::ALL.len() + action.verb as usize] as usize
    }

    pub fn add(&mut self, action: Action) {
        self.counts[Self::slot(action)] += 1;
    }

    pub fn get(&self, action: Action) -> u64 {
        self.counts[Self::slot(action)]
    }

    /// The steps taken, by name, in `STEP_NAMES` order; names never taken
    /// are left out.
    pub fn taken(&self) -> impl Iterator<Item = (Action, u64)> + '_ {
        STEP_NAMES
            .iter()
            .map(|action| (*action, self.get(*action)))
            .filter(|(_, count)| *count > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_counts_keep_names_apart() {
        // Every step name counted a different number of times: two names
        // sharing a slot would add up and show.
        let mut counts = StepCounts::default();
        for (index, action) in STEP_NAMES.iter().enumerate() {
            for _ in 0..=index {
                counts.add(*action);
            }
        }
        let expected: Vec<(Action, u64)> = STEP_NAMES
            .iter()
            .enumerate()
            .map(|(index, action)| (*action, index as u64 + 1))
            .collect();
        assert_eq!(counts.taken().collect::<Vec<_>>(), expected);
        let n = STEP_NAMES.len() as u64;
        let total: u64 = counts.taken().map(|(_, count)| count).sum();
        assert_eq!(total, n * (n + 1) / 2);
        assert_eq!(StepCounts::default().taken().count(), 0);
    }
}
