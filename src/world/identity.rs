//! A world's identity for the model checker: the part of its state that
//! decides what can happen next and which invariants can fire, fed to a
//! hasher, so that two worlds with equal identities behave alike from here
//! on. What is left out is history and bookkeeping nothing reads back.

use std::hash::{Hash, Hasher};

use super::World;
use super::engine::schedule::Wake;

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
    ///
    /// `wakes` is a list to sort the queue's wakes in, lent by a caller
    /// that fingerprints world after world (a fresh one was an allocation
    /// at every fingerprint); only its contents, the world's, reach the
    /// hash.
    pub fn identity(&self, state: &mut impl Hasher, wakes: &mut Vec<(u64, Wake)>) {
        // Every field named once: a field added to `World` stops this from
        // compiling until it is put in the identity or left out with a
        // reason here.
        let World {
            // The same in every state of one check (its scenario's).
            config: _,
            mutant: _,
            seed: _,
            script: _,
            worker_names: _,
            compacted_input: _,
            invariants_on: _,
            keep_request_log: _,
            workload: _,
            // History and reports: written, never read by a step or check
            // (the fuzz workload reads `counters.tasks_compacted`; a checked
            // world has no workload).
            last_step_ms: _,
            requests: _,
            trace: _,
            counters: _,
            answers: _,
            // Only ever violation-free states are compared.
            violation: _,
            // Cleared or taken within a step.
            rec: _,
            touched: _,
            crash_now: _,
            // Zero latency: the delays stream is never drawn from.
            delays: _,
            // Derived from the queue.
            working: _,
            // A checked world has no pinned schedule; how the last wake
            // was chosen does not change what happens next.
            pinned: _,
            out_of_order: _,
            schedule_missed: _,
            // Read by scripted placements by step only (below).
            steps,
            now,
            queue,
            housekeeping_at,
            faults,
            db,
            broker,
            store,
            cache,
            handler_version,
            outgoing,
            next_request,
            highest_seen,
            calls,
            next_call,
            clients,
            apis,
            publishers,
            workers,
            projector,
            reconciler,
            intents,
            intents_made,
            intent_index,
            intents_due,
            checker,
            workload_on,
            next_delivery,
            broker_poke_at,
            next_worker,
            compaction_deferred,
            compaction_retry_at,
            store_down_until,
            broker_down_until,
            replays_owed,
            scripted_waits,
        } = self;
        queue.entries_into(wakes);
        wakes.sort();
        (now, &wakes[..], housekeeping_at).hash(state);
        if faults.places_by_step() {
            steps.hash(state);
        }
        faults.identity(state);
        checker.identity(state);
        (db, broker, store, cache, handler_version).hash(state);
        (outgoing, next_request, highest_seen, calls, next_call).hash(state);
        (clients, apis, publishers, workers, projector, reconciler).hash(state);
        (
            intents,
            intents_made,
            intent_index,
            intents_due,
            workload_on,
            next_delivery,
            broker_poke_at,
            next_worker,
        )
            .hash(state);
        (
            compaction_deferred,
            compaction_retry_at,
            store_down_until,
            broker_down_until,
            replays_owed,
            scripted_waits,
        )
            .hash(state);
    }
}
