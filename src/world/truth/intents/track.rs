//! How the world tracks intents: which requests carry one, its first answer, when it can be forgotten.

use crate::hash::Sha;
use crate::task::Text;
use crate::world::World;
use crate::world::engine::ids::{IntentId, KeyOf};

use super::*;

impl World {
    /// The intent a client create belongs to: that of an earlier create
    /// with the same key and input while it binds (see `Intent::binds`),
    /// else a new one. Whether an intent that binds nothing was forgotten
    /// already or not, a create after it starts a new one: the answer
    /// never depends on when housekeeping ran.
    pub fn intent_for(
        &mut self,
        key: &Text,
        fingerprint: Sha,
        input_is_document: bool,
        fresh: bool,
    ) -> IntentId {
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
                malformed: refusal_owed(key, input_is_document),
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
