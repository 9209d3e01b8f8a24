//! One breadth-first level expanded on several threads (`sim check
//! --jobs J`, the only place sim's search uses threads). The level's
//! states are cut into one contiguous share per thread, in frontier order;
//! each thread expands its share in order against the fingerprints kept
//! before the level. The shares come back in frontier order, so the search
//! takes every successor in the order one thread would: which thread ran
//! a share changes nothing in the result.
//!
//! Shares, not small blocks handed to whichever thread is free: with
//! blocks of 16 states taken in turn, the two threads' worlds interleaved
//! through the frontier, each thread freed the other's allocations at
//! every step, and glibc's arenas locked and fragmented (two threads were
//! 0.6x to 0.9x of one). With contiguous shares a thread mostly frees what
//! one other thread allocated (measured in the README's "Model checking").
//!
//! The calling thread expands the first share itself and spawns a thread
//! for each other one. The next level's first share is then mostly the
//! calling thread's own successors, allocated from its own heap; when
//! every share went to a fresh thread, each level's threads took over
//! heaps that other threads had filled (200,000 states of the happy path
//! at two faults: 3.4-3.7 s with two fresh threads, 2.6-2.7 s this way).

use super::fingerprint::Fingerprints;
use super::options::CheckOptions;
use super::successors::{Pending, Reused, Successor, successors};

/// A share's states and their successors, in frontier order: each
/// state's node and how many of `successors` are its, in turn. One list
/// per share, so the merge frees one list a share, not one a state.
pub struct Expanded {
    pub states: Vec<(u32, usize)>,
    pub successors: Vec<Successor>,
}

/// Expands every state of `frontier` on `options.jobs` threads.
///
/// A thread marks `Seen` a fingerprint it produced earlier in the level:
/// it expands its share in order, so its earlier one comes first in the
/// search's order too, and the later one could never be kept. That drops
/// most of a level's repeats (two orders of two independent steps) on the
/// threads, not in the merge.
pub fn expand_level(
    frontier: Vec<Pending>,
    options: &CheckOptions,
    known: &Fingerprints,
) -> Vec<Expanded> {
    let threads = options.jobs.clamp(1, frontier.len().max(1));
    let share = frontier.len().div_ceil(threads);
    let mut shares = Vec::with_capacity(threads);
    let mut rest = frontier;
    while rest.len() > share {
        let tail = rest.split_off(share);
        shares.push(rest);
        rest = tail;
    }
    shares.push(rest);
    let expand = move |states: Vec<Pending>| {
        let mut produced = Fingerprints::default();
        let mut reused = Reused::default();
        let mut expanded = Expanded {
            states: Vec::with_capacity(states.len()),
            successors: Vec::new(),
        };
        for pending in states {
            let node = pending.node;
            let before = expanded.successors.len();
            successors(
                pending,
                options,
                known,
                Some(&mut produced),
                &mut reused,
                &mut expanded.successors,
            );
            let count = expanded.successors.len() - before;
            expanded.states.push((node, count));
        }
        expanded
    };
    let mut shares = shares.into_iter();
    let first = shares.next().expect("one share at least");
    std::thread::scope(|scope| {
        let others: Vec<_> = shares
            .map(|states| scope.spawn(move || expand(states)))
            .collect();
        let mut expanded = vec![expand(first)];
        for other in others {
            expanded.push(other.join().expect("an expanding thread panicked"));
        }
        expanded
    })
}
