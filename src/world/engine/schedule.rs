//! The scheduler's queue: wakes ordered by due time, then by the order
//! they were queued in. Most wakes are due within a few milliseconds (an
//! actor's next step, a call's arrival), so those sit in one FIFO per
//! millisecond of a window of two 32 ms blocks; later ones (timeouts,
//! restarts, housekeeping) wait in one list per block until the window
//! reaches their block.

use std::collections::VecDeque;

use crate::world::engine::ids::{ActorId, CallId, RequestId};

/// A pending entry of the scheduler's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

impl Wake {
    /// The wake as a scenario's `schedule` names it: `call-2`, `continue
    /// worker-1 1` (actor, incarnation), `timeout request-1 2` (request,
    /// send), `issue 0`, `poke publisher-1`, `restart worker-1`, `broker`,
    /// `workload`, `housekeeping`.
    pub fn describe(&self) -> String {
        match self {
            Wake::Issue(index) => format!("issue {index}"),
            Wake::Call(call) => call.to_string(),
            Wake::ClientTimeout { request, send } => format!("timeout {request} {send}"),
            Wake::Continue { actor, incarnation } => format!("continue {actor} {incarnation}"),
            Wake::Poke(actor) => format!("poke {actor}"),
            Wake::Broker => "broker".to_string(),
            Wake::Restart(actor) => format!("restart {actor}"),
            Wake::Workload => "workload".to_string(),
            Wake::Housekeeping => "housekeeping".to_string(),
        }
    }
}

/// Milliseconds the window covers: one bit each in `occupied`. The window
/// is two aligned blocks of `BLOCK` milliseconds.
const WINDOW: u64 = 64;

/// Milliseconds per block: far wakes wait in one list per block.
const BLOCK: u64 = WINDOW / 2;

/// The queue. Invariants: `near` holds every wake due in the two blocks
/// `base` and `base + 1`, in the bucket `at % WINDOW`, and a bucket holds
/// one due time, its wakes in push order; `start` (the last popped wake's
/// time) is in block `base`, so every queued wake is due at `start` or
/// within `WINDOW` after it. `far` holds every later wake, one list per
/// block, each in push order. A block moves into `near` the moment the
/// window reaches it (before anything else can be queued for it), so each
/// bucket stays in push order.
///
/// Swarm worlds queue many wakes far ahead (client timeouts of 200-1,500
/// ms, visibility deadlines, leases): a list per block costs an append and
/// one move for each, where a heap of them cost a sift down per pop (in a
/// swarm campaign, 9.5% of the instructions not spent hashing went to the
/// queue, 3.1% to the heap's pops alone).
#[derive(Debug)]
pub struct Schedule {
    near: Vec<VecDeque<Wake>>,
    /// Bit `i`: bucket `i` is not empty.
    occupied: u64,
    /// The earliest time the window covers: the last popped wake's time.
    start: u64,
    /// The window's first block (`start / BLOCK`).
    base: u64,
    /// Wakes due in block `base + 2` or later: (block, its wakes in push
    /// order), in block order.
    far: VecDeque<(u64, Vec<(u64, Wake)>)>,
    /// Emptied block lists, kept for reuse.
    spare: Vec<Vec<(u64, Wake)>>,
    /// Where in `far` the last push before the last block went. Only a
    /// guess, checked before use: the wakes a pause holds back all go to
    /// the block of its end, one after another. In seed 29 of `sim fuzz
    /// --steps 100000` (an API paused again and again with tens of
    /// thousands of calls waiting), 1,572,790 of 2,037,955 far pushes
    /// went before the last block, and 1,484,668 of those found their
    /// block here instead of searching.
    recent: usize,
}

/// A copy copies the occupied buckets only (the model checker copies a
/// world at every branch; most of the 64 buckets are empty).
impl Clone for Schedule {
    fn clone(&self) -> Schedule {
        let mut near: Vec<VecDeque<Wake>> = (0..WINDOW).map(|_| VecDeque::new()).collect();
        let mut occupied = self.occupied;
        while occupied != 0 {
            let bucket = occupied.trailing_zeros() as usize;
            occupied &= occupied - 1;
            near[bucket] = self.near[bucket].clone();
        }
        Schedule {
            near,
            occupied: self.occupied,
            start: self.start,
            base: self.base,
            far: self.far.clone(),
            spare: Vec::new(),
            recent: self.recent,
        }
    }
}

impl Default for Schedule {
    fn default() -> Schedule {
        Schedule {
            near: (0..WINDOW).map(|_| VecDeque::new()).collect(),
            occupied: 0,
            start: 0,
            base: 0,
            far: VecDeque::new(),
            spare: Vec::new(),
            recent: 0,
        }
    }
}

impl Schedule {
    /// Queues `wake` at `at` (never before the last popped time), after
    /// every wake queued before it for the same time.
    pub fn push(&mut self, at: u64, wake: Wake) {
        debug_assert!(at >= self.start, "time never runs backwards");
        let block = at / BLOCK;
        if block < self.base + 2 {
            self.put_near(at, wake);
        } else {
            self.far_list(block).push((at, wake));
        }
    }

    /// Block `block`'s far list, made if there is none. Far wakes come
    /// mostly in block order (a timeout armed now is due after the ones
    /// armed before it), so the last list is looked at first, then the
    /// one the last push before it went to (`recent`), then a binary
    /// search.
    fn far_list(&mut self, block: u64) -> &mut Vec<(u64, Wake)> {
        let index = match self.far.back() {
            Some((last, _)) if *last == block => self.far.len() - 1,
            Some((last, _)) if *last > block => {
                if self.far.get(self.recent).is_some_and(|(b, _)| *b == block) {
                    return &mut self.far[self.recent].1;
                }
                let index = match self.far.binary_search_by_key(&block, |(b, _)| *b) {
                    Ok(index) => index,
                    Err(index) => {
                        let list = self.spare.pop().unwrap_or_default();
                        self.far.insert(index, (block, list));
                        index
                    }
                };
                self.recent = index;
                index
            }
            _ => {
                let list = self.spare.pop().unwrap_or_default();
                self.far.push_back((block, list));
                self.far.len() - 1
            }
        };
        &mut self.far[index].1
    }

    /// Removes the first `wake` queued at `at`, if there is one there
    /// (what moves a paused actor's held step to an earlier thaw). It
    /// looks where `push` would have put it: a wake never moves from the
    /// window back to the far blocks.
    pub fn remove(&mut self, at: u64, wake: Wake) -> bool {
        if at < self.start {
            return false;
        }
        let block = at / BLOCK;
        if block < self.base + 2 {
            let bucket = (at % WINDOW) as usize;
            let Some(index) = self.near[bucket].iter().position(|queued| *queued == wake) else {
                return false;
            };
            self.remove_near(bucket, index);
            return true;
        }
        let Ok(index) = self.far.binary_search_by_key(&block, |(b, _)| *b) else {
            return false;
        };
        let list = &mut self.far[index].1;
        let Some(position) = list.iter().position(|queued| *queued == (at, wake)) else {
            return false;
        };
        list.remove(position);
        if list.is_empty() {
            let (_, list) = self.far.remove(index).expect("found above");
            self.spare.push(list);
            self.recent = 0;
        }
        true
    }

    /// The earliest wake and its time.
    pub fn pop(&mut self) -> Option<(u64, Wake)> {
        let (at, bucket) = self.slide_to_first_due()?;
        Some((at, self.remove_near(bucket, 0)))
    }

    /// Slides the window to the earliest queued time and returns it with
    /// its bucket (`None` when nothing is queued): what `pop` and `take`
    /// do before they remove a wake due first.
    #[inline]
    fn slide_to_first_due(&mut self) -> Option<(u64, usize)> {
        if self.occupied == 0 {
            // Nothing in the window: it jumps to the first far block.
            let block = self.far.front()?.0;
            self.base = block;
            self.start = block * BLOCK;
            self.move_near(block);
            self.move_near(block + 1);
        }
        // The first occupied bucket at or after `start`, in window order.
        let offset = self
            .occupied
            .rotate_right((self.start % WINDOW) as u32)
            .trailing_zeros();
        let at = self.start + u64::from(offset);
        if at / BLOCK != self.base {
            // The window's first block is spent: it slides by one block,
            // taking in the far wakes of the block after the next.
            self.base = at / BLOCK;
            self.move_near(self.base + 1);
        }
        self.start = at;
        Some((at, (at % WINDOW) as usize))
    }

    /// Removes the wake at `index` of `bucket`, an occupied one.
    fn remove_near(&mut self, bucket: usize, index: usize) -> Wake {
        let wakes = &mut self.near[bucket];
        // `pop_front` for the first: every pop of a run takes it.
        let wake = if index == 0 {
            wakes.pop_front()
        } else {
            wakes.remove(index)
        };
        let wake = wake.expect("an occupied bucket has a wake at the index");
        if self.near[bucket].is_empty() {
            self.occupied &= !(1 << bucket);
        }
        wake
    }

    /// Moves far block `block`'s wakes into their buckets. The list is in
    /// push order, so wakes due at the same time reach their bucket in it.
    fn move_near(&mut self, block: u64) {
        // Every far block is at or after the one moved: it is the first.
        if self.far.front().is_none_or(|(first, _)| *first != block) {
            return;
        }
        let (_, mut wakes) = self.far.pop_front().expect("looked at");
        // The guess shifts with the blocks; if it named the block just
        // moved, it now names the new first one, which the check judges.
        self.recent = self.recent.saturating_sub(1);
        for (at, wake) in wakes.drain(..) {
            self.put_near(at, wake);
        }
        self.spare.push(wakes);
    }

    /// Every queued wake with its due time, in the order `pop` would
    /// return them (the model checker's menu of what may happen next).
    ///
    /// One allocation, of the list's whole length (`take` and
    /// `World::menu`; the model checker's menu and identity list a world's
    /// wakes at every transition into lists they keep, `entries_into`).
    pub fn entries(&self) -> Vec<(u64, Wake)> {
        let mut entries = Vec::new();
        self.entries_into(&mut entries);
        entries
    }

    /// `entries()`, written into `entries` (cleared first, grown to the
    /// list's whole length at once): a caller that lists a world's wakes
    /// over and over keeps one list.
    pub fn entries_into(&self, entries: &mut Vec<(u64, Wake)>) {
        let mut length: usize = self.far.iter().map(|(_, wakes)| wakes.len()).sum();
        let mut occupied = self.occupied;
        while occupied != 0 {
            length += self.near[occupied.trailing_zeros() as usize].len();
            occupied &= occupied - 1;
        }
        entries.clear();
        entries.reserve_exact(length);
        // The occupied buckets in window order, from `start`'s.
        let mut occupied = self.occupied.rotate_right((self.start % WINDOW) as u32);
        while occupied != 0 {
            let offset = u64::from(occupied.trailing_zeros());
            occupied &= occupied - 1;
            let at = self.start + offset;
            for wake in &self.near[(at % WINDOW) as usize] {
                entries.push((at, *wake));
            }
        }
        // Each far block in push order, then sorted by time in place (a
        // stable sort: equal times keep their push order).
        for (_, wakes) in &self.far {
            let first = entries.len();
            entries.extend_from_slice(wakes);
            entries[first..].sort_by_key(|(at, _)| *at);
        }
    }

    /// Removes and returns the wake at `index` of `entries()`, whatever its
    /// time: the model checker lets any armed timer fire next; the rest
    /// keep their order.
    pub fn take(&mut self, index: usize, now: u64) -> (u64, Wake) {
        // A wake due first (every branch of the model checker's `--early
        // 0`) goes as `pop` takes one, from its bucket, and the window is
        // what a pop leaves; listing and requeueing every wake for it was
        // two allocations or more per transition.
        if let Some((at, bucket)) = self.slide_to_first_due()
            && index < self.near[bucket].len()
        {
            return (at, self.remove_near(bucket, index));
        }
        // A later wake: time may then pass the remaining wakes' due
        // times, so the window restarts at the earlier of `now` and the
        // earliest one left, and every wake is queued again.
        let mut entries = self.entries();
        let taken = entries.remove(index);
        // Emptied in place, keeping the buckets' buffers.
        for bucket in &mut self.near {
            bucket.clear();
        }
        self.occupied = 0;
        while let Some((_, mut list)) = self.far.pop_front() {
            list.clear();
            self.spare.push(list);
        }
        self.start = entries.first().map_or(now, |(at, _)| (*at).min(now));
        self.base = self.start / BLOCK;
        for (at, wake) in entries {
            self.push(at, wake);
        }
        taken
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
    use std::collections::BinaryHeap;

    /// Every wake left, popped in order.
    fn popped(schedule: &mut Schedule) -> Vec<(u64, Wake)> {
        std::iter::from_fn(|| schedule.pop()).collect()
    }

    /// Taking any entry leaves the others in pop order, and pushes after
    /// it (at or after the time it moved to) still pop in order.
    #[test]
    fn take_leaves_the_rest_in_order() {
        let mut schedule = Schedule::default();
        for (at, index) in [(5, 0), (1, 1), (300, 2), (1, 3), (70, 4)] {
            schedule.push(at, Wake::Issue(index));
        }
        let entries = schedule.entries();
        let order: Vec<u32> = entries
            .iter()
            .map(|(_, wake)| match wake {
                Wake::Issue(index) => *index,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(order, [1, 3, 0, 4, 2]);
        assert_eq!(schedule.take(3, 0), (70, Wake::Issue(4)));
        schedule.push(70, Wake::Issue(5));
        assert_eq!(
            popped(&mut schedule),
            [
                (1, Wake::Issue(1)),
                (1, Wake::Issue(3)),
                (5, Wake::Issue(0)),
                (70, Wake::Issue(5)),
                (300, Wake::Issue(2)),
            ]
        );
    }

    /// `remove` finds a wake where `push` put it, near or far, and only
    /// there: the wakes left pop in order, and a wrong time or a wake not
    /// queued removes nothing.
    #[test]
    fn remove_takes_one_wake_at_its_time_and_leaves_the_rest_in_order() {
        let mut schedule = Schedule::default();
        let far = 50 * BLOCK + 7;
        for (at, index) in [(3, 0), (3, 1), (far, 2), (far, 3), (far + 1, 4), (9, 5)] {
            schedule.push(at, Wake::Issue(index));
        }
        assert!(!schedule.remove(4, Wake::Issue(0)), "not queued at 4");
        assert!(!schedule.remove(far, Wake::Issue(4)), "queued at far + 1");
        assert!(!schedule.remove(3, Wake::Issue(9)), "never queued");
        assert!(schedule.remove(3, Wake::Issue(0)));
        assert!(schedule.remove(far, Wake::Issue(3)));
        assert!(schedule.remove(far + 1, Wake::Issue(4)));
        schedule.push(far - 1, Wake::Issue(6));
        assert_eq!(
            popped(&mut schedule),
            [
                (3, Wake::Issue(1)),
                (9, Wake::Issue(5)),
                (far - 1, Wake::Issue(6)),
                (far, Wake::Issue(2)),
            ]
        );
    }

    /// A small deterministic stream of draws for the reference-model tests.
    fn draws(seed: u64) -> impl FnMut() -> u64 {
        let mut state = seed;
        move || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            state >> 33
        }
    }

    /// `take` removes exactly the entry at its index in a list ordered by
    /// (time, push order), for the first due wakes and any other, with
    /// time jumping ahead of wakes left behind; pushes and pops between
    /// takes keep the list's order, and `entries` is that list.
    #[test]
    fn take_removes_the_entry_at_its_index() {
        let mut schedule = Schedule::default();
        let mut reference: Vec<(u64, u64, u32)> = Vec::new();
        let mut sequence = 0u64;
        let mut now = 0u64;
        let mut next = draws(11);
        let (mut first_due, mut others) = (0u32, 0u32);
        for round in 0..30_000u32 {
            match next() % 5 {
                0 | 1 => {
                    let delay = match next() % 4 {
                        0 => 0,
                        1 => next() % 4,
                        2 => next() % 300,
                        _ => next() % 20_000,
                    };
                    sequence += 1;
                    schedule.push(now + delay, Wake::Issue(round));
                    reference.push((now + delay, sequence, round));
                    reference.sort_unstable();
                }
                2 if !reference.is_empty() => {
                    let (at, _, id) = reference.remove(0);
                    assert_eq!(schedule.pop(), Some((at, Wake::Issue(id))));
                    now = now.max(at);
                }
                _ if !reference.is_empty() => {
                    // Mostly among the first due, as the model checker
                    // takes them; sometimes any entry at all.
                    let first_at = reference[0].0;
                    let due_first = reference.iter().filter(|e| e.0 == first_at).count();
                    let index = if next().is_multiple_of(4) {
                        next() as usize % reference.len()
                    } else {
                        next() as usize % due_first
                    };
                    if index < due_first {
                        first_due += 1;
                    } else {
                        others += 1;
                    }
                    let (at, _, id) = reference.remove(index);
                    assert_eq!(schedule.take(index, now), (at, Wake::Issue(id)));
                    now = now.max(at);
                }
                _ => {}
            }
            if round % 499 == 0 {
                let expected: Vec<_> = reference
                    .iter()
                    .map(|(at, _, id)| (*at, Wake::Issue(*id)))
                    .collect();
                assert_eq!(schedule.entries(), expected, "round {round}");
            }
        }
        assert!(first_due > 1_000 && others > 500, "{first_due} {others}");
    }

    /// The schedule pops exactly what a heap ordered by (time, push order)
    /// pops, for pushes near and far, ties, and pushes between pops, and
    /// nothing after the last; its list of entries is that order too.
    #[test]
    fn pops_in_time_then_sequence_order() {
        let mut schedule = Schedule::default();
        // Listed into over and over, as the model checker's kept lists are.
        let mut kept = Vec::new();
        let mut reference = BinaryHeap::new();
        let mut sequence = 0u64;
        let mut now = 0u64;
        let mut next = draws(7);
        // The end of a pause: the wakes it holds back go there in a burst.
        let mut pause_end = 0u64;
        let mut id = 0u32;
        for round in 0..40_000u64 {
            // Pushes outnumber pops at first, then pops catch up, so time
            // moves through thousands of blocks with wakes queued ahead.
            let pushes_per_pop = if round < 20_000 { 3 } else { 2 };
            if !next().is_multiple_of(pushes_per_pop) || reference.is_empty() {
                // Mostly near, sometimes on the window's edge or far.
                let (delay, burst) = match next() % 10 {
                    0 => (0, 1),
                    1 => (WINDOW - 1 + next() % 3, 1),
                    2 => (next() % 5_000, 1),
                    // On and around block edges, and far beyond the window.
                    3 => (BLOCK * (1 + next() % 4) - now % BLOCK + next() % 3 - 1, 1),
                    4 => (next() % 200_000, 1),
                    // Across the next few blocks.
                    5 | 6 => (next() % 150, 1),
                    // Five to thirty wakes, one after another, to the block
                    // of a pause's end (ahead of later blocks, such as
                    // case 4's): the far list's guess at work.
                    7 => {
                        if pause_end <= now + 2 * BLOCK || next().is_multiple_of(8) {
                            pause_end = now + BLOCK * 3 + next() % 3_000;
                        }
                        (pause_end - now, 5 + next() % 26)
                    }
                    _ => (next() % 4, 1),
                };
                for _ in 0..burst {
                    sequence += 1;
                    id += 1;
                    schedule.push(now + delay, Wake::Issue(id));
                    reference.push(std::cmp::Reverse((now + delay, sequence, id)));
                }
            } else {
                let std::cmp::Reverse((at, _, index)) = reference.pop().unwrap();
                assert_eq!(schedule.pop(), Some((at, Wake::Issue(index))));
                now = at;
            }
            // The model checker's list of everything queued is pop order.
            if round % 997 == 0 {
                let mut expected: Vec<_> = reference.iter().map(|entry| entry.0).collect();
                expected.sort_unstable();
                let expected: Vec<_> = expected
                    .into_iter()
                    .map(|(at, _, index)| (at, Wake::Issue(index)))
                    .collect();
                assert_eq!(schedule.entries(), expected, "round {round}");
                schedule.entries_into(&mut kept);
                assert_eq!(kept, expected, "round {round}");
            }
        }
        while let Some(std::cmp::Reverse((at, _, index))) = reference.pop() {
            assert_eq!(schedule.pop(), Some((at, Wake::Issue(index))));
        }
        assert_eq!(schedule.pop(), None);
    }
}
