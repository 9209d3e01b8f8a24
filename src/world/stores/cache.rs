//! The cache: cache-aside task views under `task-view:v1:<taskId>`. A delete
//! leaves a version tombstone; a fill below it is refused. Views carry a TTL
//! and may be evicted, leaving their version as a tombstone; tombstones
//! carry none and, under a `volatile-*` eviction policy, are never evicted
//! (see README, decisions).

use crate::task::Status;
use crate::world::engine::cow::CowTable;
use crate::world::engine::ids::TaskId;
use crate::world::engine::table::IdTable;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheEntry {
    View { status: Status, version: i64 },
    Tombstone { version: i64 },
}

impl CacheEntry {
    /// The version a fill must reach to replace this entry: a view's
    /// own, or a tombstone's floor.
    pub fn version(&self) -> i64 {
        match *self {
            CacheEntry::View { version, .. } | CacheEntry::Tombstone { version } => version,
        }
    }
}

/// Outcome of a fill.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fill {
    Stored,
    /// Below the tombstone or the view already there.
    Refused,
}

#[derive(Clone, Debug, Default, Hash)]
pub struct Cache {
    pub entries: CowTable<IdTable<TaskId, CacheEntry>>,
}

pub fn cache_key(task: TaskId) -> String {
    format!("task-view:v1:{task}")
}

impl Cache {
    /// Lets copies share this part's `CowTable`s until one of them writes
    /// them (`World::share`).
    pub fn share(&mut self) {
        self.entries.share();
    }

    pub fn get(&self, task: TaskId) -> Option<CacheEntry> {
        self.entries.get(task).copied()
    }

    /// Fills a view unless a tombstone above its version, or a view at its
    /// version or above, is there. A fill at the tombstone's own version is
    /// the current state and is kept.
    pub fn fill(&mut self, task: TaskId, status: Status, version: i64) -> Fill {
        let refused = match self.entries.get(task) {
            Some(CacheEntry::Tombstone { version: floor }) => *floor > version,
            Some(CacheEntry::View {
                version: cached, ..
            }) => *cached >= version,
            None => false,
        };
        if refused {
            return Fill::Refused;
        }
        self.entries
            .insert(task, CacheEntry::View { status, version });
        Fill::Stored
    }

    /// Deletes the view, leaving a tombstone at `version`, never below the
    /// version of the entry there (a tombstone's, or a view's that a reader
    /// filled from a database ahead of the projector).
    pub fn delete(&mut self, task: TaskId, version: i64) {
        let floor = self
            .entries
            .get(task)
            .map_or(version, |entry| entry.version().max(version));
        self.entries
            .insert(task, CacheEntry::Tombstone { version: floor });
    }

    /// Evicts a view's value, keeping its version as a tombstone: a floor
    /// is never volatile, whether a delete or a fill set it. An eviction
    /// that dropped the version too let a reader that had read the
    /// database before the view's version was committed, and filled after
    /// the eviction, store its older view for good (fuzz seed 7301 of
    /// 10,000; see README, decisions). Tombstones stay as they are.
    pub fn evict(&mut self, task: TaskId) -> bool {
        if let Some(CacheEntry::View { version, .. }) = self.entries.get(task).copied() {
            self.entries.insert(task, CacheEntry::Tombstone { version });
            true
        } else {
            false
        }
    }
}
