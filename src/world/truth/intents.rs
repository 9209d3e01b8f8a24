//! Client intents, the checker's ground truth for `one-task-per-intent` and
//! `key-bound-to-fingerprint`: one per idempotency key and input, with the
//! first answer it got. Requests and API calls carry their intent; an
//! intent is forgotten once nothing can be judged against it any more (no
//! request carries it and its first answer's deadline has passed), so the
//! table follows the requests in flight, not the requests ever made.

use crate::hash::Sha;
use crate::task::Text;
use crate::world::World;
use crate::world::engine::ids::{IntentId, KeyOf};
use crate::world::stores::db;

/// One client intent (ground truth): the answer it first got, by when a
/// retry must still get the same one.
#[derive(Clone, Debug)]
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntentAnswer {
    pub answer: db::Answer,
    /// Requests reaching an API before this time must get the same answer.
    pub deadline_ms: u64,
}

impl World {
    /// The intent a client create belongs to: that of an earlier create
    /// with the same key and input while it binds (see `Intent::binds`),
    /// else a new one. Whether an intent that binds nothing was forgotten
    /// already or not, a create after it starts a new one: the answer
    /// never depends on when housekeeping ran.
    pub fn intent_for(&mut self, key: &Text, fingerprint: Sha, fresh: bool) -> IntentId {
        let id = IntentId(self.intents_made + 1);
        // A known intent is answered from the index; a new (or fresh) one
        // takes its slot.
        let slot = (KeyOf::new(key), fingerprint);
        match self.intent_index.get_mut(&slot) {
            Some(known) => {
                let old = *known;
                let binds = self.intents.get(old).is_some_and(|row| row.binds(self.now));
                if binds && !fresh {
                    return old;
                }
                *known = id;
                if !binds {
                    // Nothing carries it and nothing can be judged against
                    // it: it would be forgotten anyway.
                    self.intents.remove(old);
                }
            }
            None => self.intent_index.insert(slot, id),
        }
        self.intents_made += 1;
        self.intents.insert(
            id,
            Intent {
                key: key.clone(),
                fingerprint,
                first: None,
                carried: 0,
            },
        );
        id
    }

    /// A client request or an API call carrying `intent` began.
    pub(in crate::world) fn carry_intent(&mut self, intent: Option<IntentId>) {
        if let Some(row) = intent.and_then(|id| self.intents.get_mut(id)) {
            row.carried += 1;
        }
    }

    /// A client request or an API call carrying `intent` ended. The last
    /// one's intent is looked at again when the step is over, not now: an
    /// answer given in this very step, checked at its end, may bind it.
    pub(in crate::world) fn release_intent(&mut self, intent: Option<IntentId>) {
        let Some(id) = intent else {
            return;
        };
        if let Some(row) = self.intents.get_mut(id) {
            row.carried -= 1;
            if row.carried == 0 {
                self.intents_due.insert((self.now, id));
            }
        }
    }

    /// Looks again at the intents due by now (see `intents_due`): one that
    /// binds nothing (see `Intent::binds`) is forgotten; one that binds
    /// only by its deadline comes due again then; one carried again waits
    /// for its next release. This is housekeeping only: `intent_for`
    /// treats an intent that binds nothing as gone. Runs when a step is
    /// over, its answers checked and its calls ended.
    pub(in crate::world) fn forget_unbound_intents(&mut self) {
        while let Some(&(due, id)) = self.intents_due.first()
            && due <= self.now
        {
            self.intents_due.pop_first();
            let Some(row) = self.intents.get(id) else {
                continue;
            };
            if !row.binds(self.now) {
                self.forget_intent(id);
            } else if let Some(first) = row.first
                && row.carried == 0
            {
                self.intents_due.insert((first.deadline_ms, id));
            }
        }
    }

    fn forget_intent(&mut self, id: IntentId) {
        let Some(row) = self.intents.remove(id) else {
            return;
        };
        // A fresh intent (a replay) may have taken the index slot since.
        let slot = (KeyOf::new(&row.key), row.fingerprint);
        if self.intent_index.get(&slot) == Some(&id) {
            self.intent_index.remove(&slot);
        }
    }

    /// A retry after a record's retention ended is a new intent: the key
    /// and input no longer join it to the old one.
    pub fn forget_intent_key(&mut self, key: &Text, fingerprint: Sha) {
        if let Some(&id) = self.intent_index.get(&(KeyOf::new(key), fingerprint)) {
            self.forget_intent(id);
        }
    }
}
