//! Client intents, the checker's ground truth for `one-task-per-intent` and
//! `key-bound-to-fingerprint`: one per idempotency key and input, with the
//! first answer it got. Requests and API calls carry their intent; an
//! intent is forgotten once nothing can be judged against it any more (no
//! request carries it and its first answer's deadline has passed), so the
//! table follows the requests in flight, not the requests ever made.

use crate::hash::Sha;
use crate::task::Text;
use crate::world::stores::db;

mod track;

/// One client intent (ground truth): the answer it first got, by when a
/// retry must still get the same one.
#[derive(Clone, Debug, Hash)]
pub struct Intent {
    pub key: Text,
    pub fingerprint: Sha,
    pub first: Option<IntentAnswer>,
    /// Client requests and API calls in flight that carry this intent.
    pub carried: u32,
}

impl Intent {
    /// Whether the intent still holds at `now`: a request or call carries
    /// it (an answer to it is still to come), or its first answer binds
    /// retries until a deadline still to come (the record's TTL). One that
    /// binds nothing is forgotten, and a create with the same key and input
    /// makes a new intent, judged afresh from its own first answer.
    fn binds(&self, now: u64) -> bool {
        self.carried > 0 || self.first.is_some_and(|first| now < first.deadline_ms)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IntentAnswer {
    pub answer: db::Answer,
    /// Requests reaching an API before this time must get the same answer.
    pub deadline_ms: u64,
}
