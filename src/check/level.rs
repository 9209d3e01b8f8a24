//! One breadth-first level expanded on several threads (`sim check
//! --jobs J`, the only place sim's search uses threads). The level's
//! states are cut into blocks in frontier order; each thread takes the
//! next block not yet taken and expands its states against the
//! fingerprints kept before the level. The blocks come back in frontier
//! order, so the search takes every successor in the order one thread
//! would: which thread ran a block changes nothing in the result.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::options::CheckOptions;
use super::successors::{Pending, Successor, successors};

/// States per block: small enough that two threads finish a level
/// together, large enough that taking a block costs nothing beside it.
const BLOCK: usize = 16;

/// Each state's node and its successors, in frontier order.
pub type Expanded = Vec<(u32, Vec<Successor>)>;

/// Expands every state of `frontier` on `options.jobs` threads.
///
/// A thread marks `Seen` a fingerprint it produced earlier in the level:
/// it takes blocks in increasing order, so its earlier one comes first in
/// the search's order too, and the later one could never be kept. That
/// drops most of a level's repeats (two orders of two independent steps)
/// on the threads, not in the merge.
pub fn expand_level(
    frontier: Vec<Pending>,
    options: &CheckOptions,
    known: &BTreeSet<u128>,
) -> Expanded {
    let mut blocks: Vec<Mutex<Vec<Pending>>> = Vec::new();
    let mut rest = frontier.into_iter().peekable();
    while rest.peek().is_some() {
        blocks.push(Mutex::new(rest.by_ref().take(BLOCK).collect()));
    }
    let taken = AtomicUsize::new(0);
    let threads = options.jobs.clamp(1, blocks.len().max(1));
    let mut done: Vec<(usize, Expanded)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut produced = BTreeSet::new();
                    let mut mine = Vec::new();
                    loop {
                        let index = taken.fetch_add(1, Ordering::Relaxed);
                        let Some(block) = blocks.get(index) else {
                            break;
                        };
                        let states = std::mem::take(
                            &mut *block.lock().expect("a block's lock is never poisoned"),
                        );
                        let expanded: Expanded = states
                            .into_iter()
                            .map(|pending| {
                                let node = pending.node;
                                (
                                    node,
                                    successors(pending, options, known, Some(&mut produced)),
                                )
                            })
                            .collect();
                        mine.push((index, expanded));
                    }
                    mine
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().expect("an expanding thread panicked"))
            .collect()
    });
    done.sort_by_key(|(index, _)| *index);
    done.into_iter()
        .flat_map(|(_, expanded)| expanded)
        .collect()
}
