//! The artifact store: objects by effect token, every write kept as a
//! version, a hidden flag, and tombstones that fence a token. A put under a
//! token that already holds an object (or a tombstone) writes nothing and
//! returns what is there. Objects of compacted tasks move to a dense
//! archive that keeps only what the dump shows of them.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::hash::{Sha, sha256};

use super::db::Token;
use super::ids::TaskId;

/// What an artifact says about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metadata {
    pub task: TaskId,
    pub attempt: u32,
    pub size: u64,
    pub sha256: Sha,
}

/// One written version: the bytes (by their hash and size) and metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    pub bytes_sha256: Sha,
    pub size: u64,
    pub metadata: Metadata,
}

impl Version {
    /// The version a worker writes for an attempt of a task: the bytes,
    /// and metadata that names the task and attempt and repeats their size
    /// and hash.
    pub fn plain(task: TaskId, attempt: u32, sha256: Sha, size: u64) -> Version {
        Version {
            bytes_sha256: sha256,
            size,
            metadata: Metadata {
                task,
                attempt,
                size,
                sha256,
            },
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Object {
    pub versions: Vec<Version>,
    pub hidden: bool,
    /// Written by a fence on an absent token: hidden, no bytes.
    pub tombstone: bool,
}

impl Object {
    /// The version readers see: the first one written (a conforming store
    /// never has a second).
    pub fn current(&self) -> Option<&Version> {
        self.versions.first()
    }

    pub fn visible(&self) -> bool {
        !self.hidden && !self.versions.is_empty()
    }
}

/// What a read by token observes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observed {
    Absent,
    Tombstone,
    Present { version: Version, hidden: bool },
}

#[derive(Debug, Default)]
pub struct Store {
    /// Objects of tasks not compacted.
    pub objects: BTreeMap<Token, Object>,
    /// Tokens written per task, for the per-task artifact invariants.
    pub by_task: BTreeMap<TaskId, Vec<Token>>,
    /// Objects of compacted tasks in their usual shape (at most one version
    /// that describes itself and its token), by token: 56 bytes each instead
    /// of a tree entry and a heap-allocated version list.
    archive: Vec<Archived>,
    /// Objects of compacted tasks in any other shape, as they were.
    archive_odd: BTreeMap<Token, Object>,
    /// One bit per task slot: the task's objects were archived. Lets a read
    /// or write of a live task's token skip the archive.
    archived_tasks: Vec<u64>,
}

/// `task`'s word and bit in `Store::archived_tasks`.
fn task_bit(task: TaskId) -> (usize, u64) {
    (task.slot() / 64, 1 << (task.slot() % 64))
}

/// An archived object: at most one version, whose metadata names the
/// token's task and attempt and repeats the bytes' size and hash.
#[derive(Clone, Copy, Debug)]
struct Archived {
    token: Token,
    sha256: Sha,
    size: u32,
    written: bool,
    hidden: bool,
    tombstone: bool,
}

impl Archived {
    /// The compact form of `object`, if it has the usual shape.
    fn of(token: Token, object: &Object) -> Option<Archived> {
        let (sha256, size) = match object.versions.as_slice() {
            [] => ([0; 32], 0),
            [version]
                if *version
                    == Version::plain(
                        token.task,
                        token.attempt,
                        version.bytes_sha256,
                        version.size,
                    ) =>
            {
                (version.bytes_sha256, u32::try_from(version.size).ok()?)
            }
            _ => return None,
        };
        Some(Archived {
            token,
            sha256,
            size,
            written: !object.versions.is_empty(),
            hidden: object.hidden,
            tombstone: object.tombstone,
        })
    }

    fn object(&self) -> Object {
        let versions = if self.written {
            vec![Version::plain(
                self.token.task,
                self.token.attempt,
                self.sha256,
                u64::from(self.size),
            )]
        } else {
            Vec::new()
        };
        Object {
            versions,
            hidden: self.hidden,
            tombstone: self.tombstone,
        }
    }
}

/// The damage a `corrupt` fault does to bytes: deterministic, and never the
/// hash of anything the transform writes.
pub fn corrupt_bytes(version: Version) -> Version {
    let mut damaged = version;
    let mut input = version.bytes_sha256.to_vec();
    input.extend_from_slice(b"corrupted");
    damaged.bytes_sha256 = sha256(&input);
    damaged.size += 9;
    damaged
}

impl Store {
    /// An object of a task not compacted (the ones anything but the dump
    /// reads).
    pub fn get(&self, token: Token) -> Option<&Object> {
        self.objects.get(&token)
    }

    pub fn observe(&self, token: Token) -> Observed {
        let archived;
        let object = match self.objects.get(&token) {
            Some(object) => Some(object),
            None if !self.was_archived(token.task) => None,
            None => {
                archived = self.archived(token);
                archived.as_ref()
            }
        };
        match object {
            None => Observed::Absent,
            Some(object) => match object.current() {
                None => Observed::Tombstone,
                Some(version) => Observed::Present {
                    version: *version,
                    hidden: object.hidden,
                },
            },
        }
    }

    /// Writes `version` under `token` unless something is there already;
    /// `overwrite` is the `unconditional-put` mutant. Returns whether a new
    /// version was written.
    pub fn put(&mut self, token: Token, version: Version, overwrite: bool) -> bool {
        self.unarchive(token);
        match self.objects.get_mut(&token) {
            Some(object) => {
                if overwrite && !object.tombstone {
                    object.versions.push(version);
                    true
                } else {
                    false
                }
            }
            None => {
                self.objects.insert(
                    token,
                    Object {
                        versions: vec![version],
                        hidden: false,
                        tombstone: false,
                    },
                );
                self.by_task.entry(token.task).or_default().push(token);
                true
            }
        }
    }

    /// Hides the object under `token`, or fences an absent token with a
    /// hidden tombstone.
    pub fn hide(&mut self, token: Token) {
        self.unarchive(token);
        match self.objects.get_mut(&token) {
            Some(object) => object.hidden = true,
            None => {
                self.objects.insert(
                    token,
                    Object {
                        versions: Vec::new(),
                        hidden: true,
                        tombstone: true,
                    },
                );
                self.by_task.entry(token.task).or_default().push(token);
            }
        }
    }

    pub fn tokens_of(&self, task: TaskId) -> &[Token] {
        self.by_task
            .get(&task)
            .map_or(&[], |tokens| tokens.as_slice())
    }

    /// Moves a compacted task's objects to the archive: nothing but the
    /// dump reads them any more, and the per-task list goes.
    pub fn archive_task(&mut self, task: TaskId) {
        let Some(tokens) = self.by_task.remove(&task) else {
            return;
        };
        let (word, bit) = task_bit(task);
        if self.archived_tasks.len() <= word {
            self.archived_tasks.resize(word + 1, 0);
        }
        self.archived_tasks[word] |= bit;
        for token in tokens {
            let Some(object) = self.objects.remove(&token) else {
                continue;
            };
            match Archived::of(token, &object) {
                Some(archived) => {
                    let at = self.insert_point(token);
                    self.archive.insert(at, archived);
                }
                None => {
                    self.archive_odd.insert(token, object);
                }
            }
        }
    }

    /// Where `token` goes in the archive. Compaction follows retention,
    /// which follows creation, so a token goes at or near the end: the
    /// search gallops back from there over memory still warm.
    fn insert_point(&self, token: Token) -> usize {
        let mut hi = self.archive.len();
        let mut step = 1;
        while hi > 0 {
            let probe = hi.saturating_sub(step);
            if self.archive[probe].token < token {
                let rest = &self.archive[probe + 1..hi];
                return probe + 1 + rest.partition_point(|a| a.token < token);
            }
            hi = probe;
            step *= 2;
        }
        0
    }

    fn was_archived(&self, task: TaskId) -> bool {
        let (word, bit) = task_bit(task);
        self.archived_tasks
            .get(word)
            .is_some_and(|bits| bits & bit != 0)
    }

    /// Where `token`'s object is in the compact archive, if it is there.
    fn archive_slot(&self, token: Token) -> Option<usize> {
        self.archive.binary_search_by(|a| a.token.cmp(&token)).ok()
    }

    /// An archived object, rebuilt.
    fn archived(&self, token: Token) -> Option<Object> {
        match self.archive_slot(token) {
            Some(at) => Some(self.archive[at].object()),
            None => self.archive_odd.get(&token).cloned(),
        }
    }

    /// Brings an archived object back among the live ones before a write.
    fn unarchive(&mut self, token: Token) {
        if !self.was_archived(token.task) || self.objects.contains_key(&token) {
            return;
        }
        let object = match self.archive_slot(token) {
            Some(at) => self.archive.remove(at).object(),
            None => match self.archive_odd.remove(&token) {
                Some(object) => object,
                None => return,
            },
        };
        self.objects.insert(token, object);
    }

    /// Every object, live or archived, for the dump (in no set order).
    pub fn all_objects(&self) -> impl Iterator<Item = (Token, Cow<'_, Object>)> {
        let live = self
            .objects
            .iter()
            .chain(&self.archive_odd)
            .map(|(token, object)| (*token, Cow::Borrowed(object)));
        let archived = self
            .archive
            .iter()
            .map(|archived| (archived.token, Cow::Owned(archived.object())));
        live.chain(archived)
    }
}
