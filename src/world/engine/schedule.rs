//! The scheduler's queue: wakes ordered by due time, then by the order
//! they were queued in. Most wakes are due within a few milliseconds (an
//! actor's next step, a call's arrival), so those sit in one FIFO per
//! millisecond of a sliding window; later ones (timeouts, restarts,
//! housekeeping) wait in a heap until their millisecond enters the window.

use std::collections::{BinaryHeap, VecDeque};

use crate::world::engine::ids::{ActorId, CallId, RequestId};

/// A pending entry of the scheduler's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Wake {
    /// Issue the scripted request with this index (scripted requests form a
    /// chain: issuing one schedules the next, as the fuzz generator does, so
    /// a reproducer's requests interleave exactly like the fuzz run's).
    Issue(u32),
    /// The API call with this id takes its next step.
    Call(CallId),
    /// A client's wait for the answer to one send ran out.
    ClientTimeout { request: RequestId, send: u32 },
    /// A busy actor's next step (exactly one outstanding per busy actor).
    Continue { actor: ActorId, incarnation: u32 },
    /// Something may be there for an idle actor.
    Poke(ActorId),
    /// The broker may have something to deliver.
    Broker,
    /// A crashed actor comes back.
    Restart(ActorId),
    /// The fuzz workload draws its next request.
    Workload,
    /// The reconciler's housekeeping (ending idempotency retention). It runs
    /// while the world has other work, but on its own never keeps a run
    /// going: a world with only housekeeping left is quiet.
    Housekeeping,
}

/// Milliseconds the window covers: one bit each in `occupied`.
const WINDOW: u64 = 64;

/// A wake in the far heap, ordered by due time, then insertion sequence.
/// Both live in one number, `(at << 64) | sequence`, so a comparison is
/// one wide compare; sequences are unique, so the wake never decides the
/// order. Reversed: the `BinaryHeap` pops the earliest.
#[derive(Clone, Copy, Debug)]
struct Queued {
    order: u128,
    wake: Wake,
}

impl Queued {
    fn at(&self) -> u64 {
        (self.order >> 64) as u64
    }
}

impl PartialEq for Queued {
    fn eq(&self, other: &Queued) -> bool {
        self.order == other.order
    }
}

impl Eq for Queued {}

impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Queued) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Queued {
    fn cmp(&self, other: &Queued) -> std::cmp::Ordering {
        other.order.cmp(&self.order)
    }
}

/// The queue. Invariants: every wake in `near` is due in
/// `[start, start + WINDOW)`, in the bucket `at % WINDOW`, and a bucket
/// holds one due time, its wakes in sequence order; every wake in `far` is
/// due at `start + WINDOW` or later. A wake goes to `near` only once its
/// millisecond is in the window, and the far wakes of a millisecond move
/// into its bucket the moment it enters the window, before anything else
/// can be queued for it, so each bucket stays in sequence order.
#[derive(Debug)]
pub struct Schedule {
    near: Vec<VecDeque<Wake>>,
    /// Bit `i`: bucket `i` is not empty.
    occupied: u64,
    /// The earliest time the window covers: the last popped wake's time.
    start: u64,
    far: BinaryHeap<Queued>,
    /// Wakes queued so far: each one's place among wakes due at the same
    /// time.
    sequence: u64,
}

impl Default for Schedule {
    fn default() -> Schedule {
        Schedule {
            near: (0..WINDOW).map(|_| VecDeque::new()).collect(),
            occupied: 0,
            start: 0,
            far: BinaryHeap::new(),
            sequence: 0,
        }
    }
}

impl Schedule {
    /// Queues `wake` at `at` (never before the last popped time), after
    /// every wake queued before it for the same time.
    pub fn push(&mut self, at: u64, wake: Wake) {
        debug_assert!(at >= self.start, "time never runs backwards");
        self.sequence += 1;
        if at < self.start + WINDOW {
            self.put_near(at, wake);
        } else {
            self.far.push(Queued {
                order: (u128::from(at) << 64) | u128::from(self.sequence),
                wake,
            });
        }
    }

    /// The earliest wake and its time.
    pub fn pop(&mut self) -> Option<(u64, Wake)> {
        if self.occupied == 0 {
            let first = self.far.peek()?.at();
            self.advance(first);
        }
        // The first occupied bucket at or after `start`, in window order.
        let offset = self
            .occupied
            .rotate_right((self.start % WINDOW) as u32)
            .trailing_zeros();
        let at = self.start + u64::from(offset);
        if at != self.start {
            // Far wakes are moved in only when the window slides: one due
            // before `start + WINDOW` was queued near in the first place.
            self.advance(at);
        }
        let bucket = (at % WINDOW) as usize;
        let wake = self.near[bucket]
            .pop_front()
            .expect("an occupied bucket has a wake");
        if self.near[bucket].is_empty() {
            self.occupied &= !(1 << bucket);
        }
        Some((at, wake))
    }

    /// Slides the window to start at `at`, moving the far wakes it now
    /// covers into their buckets (the heap yields them in order).
    fn advance(&mut self, at: u64) {
        self.start = at;
        while let Some(first) = self.far.peek()
            && first.at() < at + WINDOW
        {
            let Queued { order, wake } = self.far.pop().expect("peeked");
            self.put_near((order >> 64) as u64, wake);
        }
    }

    fn put_near(&mut self, at: u64, wake: Wake) {
        let bucket = (at % WINDOW) as usize;
        self.near[bucket].push_back(wake);
        self.occupied |= 1 << bucket;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schedule pops exactly what a heap ordered by (time, push order)
    /// pops, for pushes near and far, ties, and pushes between pops, and
    /// nothing after the last.
    #[test]
    fn pops_in_time_then_sequence_order() {
        let mut schedule = Schedule::default();
        let mut reference = BinaryHeap::new();
        let mut sequence = 0u64;
        let mut now = 0u64;
        let mut state = 7u64;
        let mut next = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            state >> 33
        };
        for round in 0..20_000u64 {
            if next() % 3 != 0 || reference.is_empty() {
                // Mostly near, sometimes on the window's edge or far.
                let delay = match next() % 8 {
                    0 => 0,
                    1 => WINDOW - 1 + next() % 3,
                    2 => next() % 5_000,
                    _ => next() % 4,
                };
                sequence += 1;
                let wake = Wake::Issue(round as u32);
                schedule.push(now + delay, wake);
                reference.push(std::cmp::Reverse((now + delay, sequence, round as u32)));
            } else {
                let std::cmp::Reverse((at, _, index)) = reference.pop().unwrap();
                assert_eq!(schedule.pop(), Some((at, Wake::Issue(index))));
                now = at;
            }
        }
        while let Some(std::cmp::Reverse((at, _, index))) = reference.pop() {
            assert_eq!(schedule.pop(), Some((at, Wake::Issue(index))));
        }
        assert_eq!(schedule.pop(), None);
    }
}
