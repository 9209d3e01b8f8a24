//! Outbox publishers (lesson 000 §4): claim unpublished rows with a short
//! lease in one transaction, publish each with `messageId = outboxId`, then
//! mark the confirmed ones published with a conditional update. An unknown
//! confirm republishes the SAME id later; an expired lease means a duplicate
//! publish, never a lost one.

use crate::world::engine::ids::OutboxId;
use crate::world::engine::life::Life;

mod steps;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PublisherPhase {
    Idle,
    Publishing,
    Marking,
}

/// A publisher's volatile state: what it claimed and what it heard back.
#[derive(Clone, Debug, Hash)]
pub struct Publisher {
    pub life: Life,
    pub phase: PublisherPhase,
    pub claimed: Vec<OutboxId>,
    /// The rows a claim finds due, before it commits: a buffer reused
    /// (swapped with `claimed`), so that a claim allocates nothing once the
    /// lists have grown. A fresh list per claim, freed at once, was one of
    /// malloc's triggers for consolidating its free lists.
    due: Vec<OutboxId>,
    pub next: usize,
    pub confirmed: Vec<OutboxId>,
    pub unknown: Vec<OutboxId>,
}

/// Message ids the `new-message-id-on-republish` mutant makes up.
pub const FRESH_MESSAGE_BASE: u32 = 2_000_000_000;

impl Publisher {
    pub fn new() -> Publisher {
        Publisher {
            life: Life::new(),
            phase: PublisherPhase::Idle,
            claimed: Vec::new(),
            due: Vec::new(),
            next: 0,
            confirmed: Vec::new(),
            unknown: Vec::new(),
        }
    }

    pub fn wipe(&mut self) {
        self.phase = PublisherPhase::Idle;
        self.claimed.clear();
        self.next = 0;
        self.confirmed.clear();
        self.unknown.clear();
    }
}

impl Default for Publisher {
    fn default() -> Publisher {
        Publisher::new()
    }
}
