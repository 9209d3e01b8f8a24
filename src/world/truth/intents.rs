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
    /// The refusal the lesson owes the request whatever state the world is
    /// in (lesson 000 §3.1: the key and the input are checked before any
    /// read), or `None` for a well-formed one.
    pub malformed: Option<&'static str>,
}

/// The refusal a create with `key` and an input that `input_is_document`
/// or not is owed before anything is read: the lesson's key pattern is
/// `^[A-Za-z0-9_-]{6,80}$`, checked before the input's schema. Stated
/// here on its own, apart from the API's check, so that the checker
/// judges the API against the rule and not against itself.
pub fn refusal_owed(key: &str, input_is_document: bool) -> Option<&'static str> {
    let allowed = |c: char| matches!(c, 'A'..='Z' | 'a'..='z' | '0'..='9' | '_' | '-');
    let length = key.chars().count();
    if !(6..=80).contains(&length) || !key.chars().all(allowed) {
        Some("INVALID_IDEMPOTENCY_KEY")
    } else if !input_is_document {
        Some("INVALID_INPUT")
    } else {
        None
    }
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
