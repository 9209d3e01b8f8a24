//! Protocol mutants: each switches off exactly one guard the lessons insist
//! on. The names are an interface; keep them stable.

/// One guard switched off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mutant {
    NoFingerprintCheck,
    SplitIdempotencyInsert,
    PublishBeforeCommit,
    PublishAfterCommit,
    SplitCreateTransaction,
    NewMessageIdOnRepublish,
    NoInboxDedupe,
    NoInboxHashCheck,
    NewTokenOnRetry,
    TimeoutMeansNotExecuted,
    UnconditionalPut,
    NoReadbackVerify,
    NoCompensation,
    UnverifiedCompensation,
    AckBeforeProcess,
    UnboundedRequeue,
    BlindStatusWrite,
    NoTerminalGuard,
    SkipSequenceGaps,
    TrustSnapshot,
    QuotaReadThenWrite,
    CacheWriteBeforeDb,
    EarlyIdempotencyExpiry,
    ClientNewKeyOnRetry,
    NoReconciler,
}

/// What `sim mutants` prints for one mutant.
pub struct MutantInfo {
    pub mutant: Mutant,
    pub name: &'static str,
    pub guard: &'static str,
    pub lesson: &'static str,
    pub expected: &'static str,
}

macro_rules! mutant_table {
    ($( $variant:ident, $name:literal, $guard:literal, $lesson:literal, $expected:literal; )*) => {
        pub const MUTANTS: &[MutantInfo] = &[
            $( MutantInfo {
                mutant: Mutant::$variant,
                name: $name,
                guard: $guard,
                lesson: $lesson,
                expected: $expected,
            }, )*
        ];
    };
}

mutant_table! {
    NoFingerprintCheck, "no-fingerprint-check", "a reused key answers a different request with the first response", "000 §3", "key-bound-to-fingerprint";
    SplitIdempotencyInsert, "split-idempotency-insert", "check-then-insert of the idempotency record across two steps, without the unique key", "000 §3.1", "one-task-per-key";
    PublishBeforeCommit, "publish-before-commit", "the API publishes to the broker itself, before its transaction commits, instead of writing an outbox row", "000 §2, §4", "no-orphan-message";
    PublishAfterCommit, "publish-after-commit", "the API publishes to the broker itself after its transaction commits, instead of writing an outbox row", "000 §4", "no-orphan-message";
    SplitCreateTransaction, "split-create-transaction", "the task is written in one transaction, its idempotency record and outbox row in a second", "000 §2", "one-task-per-intent";
    NewMessageIdOnRepublish, "new-message-id-on-republish", "an unknown confirm republishes the row's payload under a new message id", "000 §4.1", "no-orphan-message";
    NoInboxDedupe, "no-inbox-dedupe", "the worker processes every delivery as new, recomputing its answer instead of returning the recorded one", "000 §6", "inbox-final-never-rewritten";
    NoInboxHashCheck, "no-inbox-hash-check", "a message id seen with another payload is treated as a plain duplicate", "000 §6, §13.4", "inbox-conflict-quarantined";
    NewTokenOnRetry, "new-token-on-retry", "a retried effect gets a new idempotency token", "000 §7", "one-visible-artifact-per-task";
    TimeoutMeansNotExecuted, "timeout-means-not-executed", "a put that timed out fails the attempt without reading back or fencing", "000 §7, §15 exp. 2", "one-visible-artifact-per-task";
    UnconditionalPut, "unconditional-put", "the store overwrites under an existing token instead of returning the first object", "000 §7", "one-artifact-per-token";
    NoReadbackVerify, "no-readback-verify", "the ledger says verified without reading the artifact back", "000 §7.1", "completed-has-verified-artifact";
    NoCompensation, "no-compensation", "a hash mismatch fails the task but leaves the artifact visible", "000 §8", "no-visible-corrupt-artifact";
    UnverifiedCompensation, "unverified-compensation", "the ledger says compensated without reading back that the artifact is hidden", "000 §8, §15 exp. 3", "no-visible-corrupt-artifact";
    AckBeforeProcess, "ack-before-process", "the worker acks on receipt", "000 §6", "converges";
    UnboundedRequeue, "unbounded-requeue", "the dead-letter threshold is off and the worker requeues a poison input instead of classifying it", "000 §13.5", "bounded-deliveries";
    BlindStatusWrite, "blind-status-write", "an actor writes the state it computed from an earlier read, with no version condition and no transition on the current state", "003 §1, §6", "event-id-unique";
    NoTerminalGuard, "no-terminal-guard", "the state machine accepts every event on a terminal task as if the task were live", "003 §3.1, §8", "terminal-never-reopens";
    SkipSequenceGaps, "skip-sequence-gaps", "a consumer applies a gapped event instead of refetching", "003 §7", "projection-consistent";
    TrustSnapshot, "trust-snapshot", "a snapshot is used without checking its hash or the rebuilt state", "003 §10", "projection-consistent";
    QuotaReadThenWrite, "quota-read-then-write", "the quota is read in one step and written in a later one", "000 §2.2", "quota-never-oversold";
    CacheWriteBeforeDb, "cache-write-before-db", "the view is written to the cache before the database commits", "000 §9.1", "cache-never-ahead";
    EarlyIdempotencyExpiry, "early-idempotency-expiry", "a record expires while its client may still retry", "000 §3.3", "one-task-per-intent";
    ClientNewKeyOnRetry, "client-new-key-on-retry", "a client retries a lost response under a new key", "000 §13.1", "one-task-per-intent";
    NoReconciler, "no-reconciler", "nothing resolves unknown effects, expired leases or transiently dead-lettered work", "000 §7, §10 step 11", "converges";
}

impl Mutant {
    pub fn info(self) -> &'static MutantInfo {
        MUTANTS
            .iter()
            .find(|info| info.mutant == self)
            .expect("every mutant has a row")
    }

    pub fn name(self) -> &'static str {
        self.info().name
    }

    pub fn parse(text: &str) -> Option<Mutant> {
        MUTANTS
            .iter()
            .find(|info| info.name == text)
            .map(|info| info.mutant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_parse_back() {
        for info in MUTANTS {
            assert_eq!(Mutant::parse(info.name), Some(info.mutant));
            assert_eq!(info.mutant.name(), info.name);
        }
        let mut names: Vec<_> = MUTANTS.iter().map(|info| info.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), MUTANTS.len());
    }
}
