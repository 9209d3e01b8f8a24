//! A world's identity for the model checker: the part of its state that
//! decides what can happen next and which invariants can fire, fed to a
//! hasher, so that two worlds with equal identities behave alike from here
//! on. What is left out is history and bookkeeping nothing reads back.

use std::hash::{Hash, Hasher};

use super::World;

impl World {
    /// Feeds the world's identity to `state` (every state type derives
    /// `Hash`; sim's containers are ordered, and `KeyMap` hashes in key
    /// order, so equal states hash alike whatever path led to them).
    ///
    /// In it: virtual time, the queued wakes with their due times (sorted,
    /// as any of them may fire next), every actor's volatile state and
    /// incarnation, the database, broker, artifact store and cache, the
    /// ground truth of intents and requests in flight, the id counters, the
    /// fault injector's scripted-plan progress and the invariant checker's
    /// memory.
    ///
    /// Left out, because nothing reads them back to decide a step or a
    /// check: the step count (unless a scripted fault is placed by step),
    /// the trace and its hash, the counters and coverage, the request log
    /// and answers kept for the dump, the record of the step under way
    /// (cleared when a step begins), the delays stream (a checked world
    /// has zero latency, so every draw is zero), the checker's per-round
    /// caches, and the list of faults injected (the checker keeps the
    /// count it budgets by beside the identity).
    pub fn identity(&self, state: &mut impl Hasher) {
        let mut wakes = self.queue.entries();
        wakes.sort();
        (self.now, wakes, self.housekeeping_at).hash(state);
        if self.faults.places_by_step() {
            self.steps.hash(state);
        }
        self.faults.identity(state);
        self.checker.identity(state);
        (
            &self.db,
            &self.broker,
            &self.store,
            &self.cache,
            self.handler_version,
        )
            .hash(state);
        (
            &self.outgoing,
            self.next_request,
            &self.highest_seen,
            &self.calls,
            self.calls_by_task,
            self.next_call,
        )
            .hash(state);
        (
            &self.clients,
            &self.apis,
            &self.publishers,
            &self.workers,
            &self.projector,
            &self.reconciler,
        )
            .hash(state);
        (
            &self.intents,
            self.intents_made,
            &self.intent_index,
            &self.intents_due,
            self.workload_on,
            self.next_delivery,
            self.broker_poke_at,
            self.next_worker,
        )
            .hash(state);
    }
}
