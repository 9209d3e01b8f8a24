//! The artifact store: objects by effect token, every write kept as a
//! version, a hidden flag, and tombstones that fence a token. A put under a
//! token that already holds an object (or a tombstone) writes nothing and
//! returns what is there. Objects of compacted tasks move to a dense
//! archive that keeps only what the dump shows of them.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::hash::{Sha, sha256};
use crate::world::engine::cow::CowTable;
use crate::world::engine::ids::TaskId;
use crate::world::engine::table::IdTable;
use crate::world::stores::db::Token;

/// What an artifact says about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Metadata {
    pub task: TaskId,
    pub attempt: u32,
    pub size: u64,
    pub sha256: Sha,
}

/// One written version: the bytes (by their hash and size) and metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Observed {
    Absent,
    Tombstone,
    Present { version: Version, hidden: bool },
}

impl Observed {
    /// What a read of `object` observes.
    fn of(object: &Object) -> Observed {
        match object.current() {
            None => Observed::Tombstone,
            Some(version) => Observed::Present {
                version: *version,
                hidden: object.hidden,
            },
        }
    }
}

#[derive(Clone, Debug, Default, Hash)]
pub struct Store {
    /// Objects of tasks not compacted (and of compacted ones written
    /// again), by task: a task has a few tokens, found by a look along
    /// its short list after an index by task id.
    objects: CowTable<IdTable<TaskId, Vec<(Token, Object)>>>,
    /// Tokens first written per task, in write order, for the per-task
    /// artifact invariants; archiving a task drops its list (an archived
    /// object written again is not listed again).
    by_task: CowTable<IdTable<TaskId, Vec<Token>>>,
    /// Objects of compacted tasks in their usual shape (at most one version
    /// that describes itself and its token), 56 bytes each instead of a
    /// place in a task's list and a heap-allocated version list. In the
    /// order tasks were compacted, a task's tokens side by side: compaction
    /// follows retention, not task ids, so a list sorted by token would
    /// shift its tail for every task that finished late.
    archive: CowTable<Vec<Archived>>,
    /// Objects of compacted tasks in any other shape, as they were.
    archive_odd: CowTable<BTreeMap<Token, Object>>,
    /// By task slot: where the task's tokens start in `archive`, or
    /// `NOT_ARCHIVED`. Lets a read or write of a live task's token skip the
    /// archive, and finds an archived one without a search.
    archive_start: CowTable<Vec<u32>>,
}

/// `Store::archive_start` of a task whose objects were not archived.
const NOT_ARCHIVED: u32 = u32::MAX;

/// An archived object: at most one version, whose metadata names the
/// token's task and attempt and repeats the bytes' size and hash.
#[derive(Clone, Copy, Debug, Hash)]
struct Archived {
    token: Token,
    sha256: Sha,
    size: u32,
    written: bool,
    hidden: bool,
    tombstone: bool,
    /// Brought back among the live objects by a later write: skipped.
    unarchived: bool,
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
            unarchived: false,
        })
    }

    /// Its one version, if it was written.
    fn version(&self) -> Option<Version> {
        self.written.then(|| {
            Version::plain(
                self.token.task,
                self.token.attempt,
                self.sha256,
                u64::from(self.size),
            )
        })
    }

    /// What a read observes: `Observed::of(&self.object())`, without
    /// building the object.
    fn observed(&self) -> Observed {
        match self.version() {
            None => Observed::Tombstone,
            Some(version) => Observed::Present {
                version,
                hidden: self.hidden,
            },
        }
    }

    fn object(&self) -> Object {
        Object {
            versions: self.version().into_iter().collect(),
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
    /// Lets copies share this part's `CowTable`s until one of them writes
    /// them (`World::share`).
    pub fn share(&mut self) {
        self.objects.share();
        self.by_task.share();
        self.archive.share();
        self.archive_odd.share();
        self.archive_start.share();
    }

    /// The bookkeeping of the objects table and the tokens by task, each
    /// with its name (`IdTable::bookkeeping_failure`; `converges` asks it).
    pub fn table_failures(&self) -> [(&'static str, Option<String>); 2] {
        [
            ("store objects", self.objects.bookkeeping_failure()),
            ("store's tokens by task", self.by_task.bookkeeping_failure()),
        ]
    }

    /// An object of a task not compacted (the ones anything but the dump
    /// reads).
    pub fn get(&self, token: Token) -> Option<&Object> {
        self.objects
            .get(token.task)?
            .iter()
            .find(|(written, _)| *written == token)
            .map(|(_, object)| object)
    }

    pub fn get_mut(&mut self, token: Token) -> Option<&mut Object> {
        self.objects
            .get_mut(token.task)?
            .iter_mut()
            .find(|(written, _)| *written == token)
            .map(|(_, object)| object)
    }

    /// Files a new object under `token`, which holds none.
    fn insert(&mut self, token: Token, object: Object) {
        self.objects
            .get_or_insert_with(token.task, Vec::new)
            .push((token, object));
    }

    /// Takes out the object under `token`.
    pub fn remove(&mut self, token: Token) -> Option<Object> {
        let objects = self.objects.get_mut(token.task)?;
        let at = objects.iter().position(|(written, _)| *written == token)?;
        let (_, object) = objects.remove(at);
        if objects.is_empty() {
            self.objects.remove(token.task);
        }
        Some(object)
    }

    pub fn observe(&self, token: Token) -> Observed {
        if let Some(object) = self.get(token) {
            return Observed::of(object);
        }
        if !self.was_archived(token.task) {
            return Observed::Absent;
        }
        // Read from the compact form as it is, not rebuilt into an object
        // (a version list to allocate): the checker observes every token of
        // a task before and after compacting it.
        match self.archive_slot(token) {
            Some(at) => self.archive[at].observed(),
            None => self
                .archive_odd
                .get(&token)
                .map_or(Observed::Absent, Observed::of),
        }
    }

    /// Writes `version` under `token` unless something is there already;
    /// `overwrite` is the `unconditional-put` mutant. Returns whether a new
    /// version was written.
    pub fn put(&mut self, token: Token, version: Version, overwrite: bool) -> bool {
        self.unarchive(token);
        match self.get_mut(token) {
            Some(object) => {
                if overwrite && !object.tombstone {
                    object.versions.push(version);
                    true
                } else {
                    false
                }
            }
            None => {
                self.insert(
                    token,
                    Object {
                        versions: vec![version],
                        hidden: false,
                        tombstone: false,
                    },
                );
                self.by_task
                    .get_or_insert_with(token.task, Vec::new)
                    .push(token);
                true
            }
        }
    }

    /// Hides the object under `token`, or fences an absent token with a
    /// hidden tombstone.
    pub fn hide(&mut self, token: Token) {
        self.unarchive(token);
        match self.get_mut(token) {
            Some(object) => object.hidden = true,
            None => {
                self.insert(
                    token,
                    Object {
                        versions: Vec::new(),
                        hidden: true,
                        tombstone: true,
                    },
                );
                self.by_task
                    .get_or_insert_with(token.task, Vec::new)
                    .push(token);
            }
        }
    }

    pub fn tokens_of(&self, task: TaskId) -> &[Token] {
        self.by_task
            .get(task)
            .map_or(&[], |tokens| tokens.as_slice())
    }

    /// Moves a compacted task's objects to the archive: nothing but the
    /// dump reads them any more, and the per-task list goes.
    pub fn archive_task(&mut self, task: TaskId) {
        let Some(tokens) = self.by_task.remove(task) else {
            return;
        };
        if self.archive_start.len() <= task.slot() {
            self.archive_start.resize(task.slot() + 1, NOT_ARCHIVED);
        }
        self.archive_start[task.slot()] =
            u32::try_from(self.archive.len()).expect("fewer than 2^32 archived objects");
        for token in tokens {
            let Some(object) = self.remove(token) else {
                continue;
            };
            match Archived::of(token, &object) {
                Some(archived) => self.archive.push(archived),
                None => {
                    self.archive_odd.insert(token, object);
                }
            }
        }
    }

    fn was_archived(&self, task: TaskId) -> bool {
        self.archive_start
            .get(task.slot())
            .is_some_and(|start| *start != NOT_ARCHIVED)
    }

    /// Where `token`'s object is in the compact archive, if it is there:
    /// among its task's few tokens, which sit side by side.
    fn archive_slot(&self, token: Token) -> Option<usize> {
        let start = *self.archive_start.get(token.task.slot())?;
        if start == NOT_ARCHIVED {
            return None;
        }
        let start = start as usize;
        self.archive
            .get(start..)?
            .iter()
            .take_while(|archived| archived.token.task == token.task)
            .position(|archived| archived.token == token && !archived.unarchived)
            .map(|offset| start + offset)
    }

    /// Brings an archived object back among the live ones before a write.
    fn unarchive(&mut self, token: Token) {
        if !self.was_archived(token.task) || self.get(token).is_some() {
            return;
        }
        let object = match self.archive_slot(token) {
            Some(at) => {
                self.archive[at].unarchived = true;
                self.archive[at].object()
            }
            None => match self.archive_odd.remove(&token) {
                Some(object) => object,
                None => return,
            },
        };
        self.insert(token, object);
    }

    /// Every object, live or archived, for the dump (in no set order).
    pub fn all_objects(&self) -> impl Iterator<Item = (Token, Cow<'_, Object>)> {
        let live = self
            .objects
            .values()
            .flatten()
            // `&(Token, Object)` as the pair of references the map yields.
            .map(|(token, object)| (token, object))
            .chain(&self.archive_odd)
            .map(|(token, object)| (*token, Cow::Borrowed(object)));
        let archived = self
            .archive
            .iter()
            .filter(|archived| !archived.unarchived)
            .map(|archived| (archived.token, Cow::Owned(archived.object())));
        live.chain(archived)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::stores::db::EffectKind;

    fn token(task: u32, attempt: u32) -> Token {
        Token {
            task: TaskId(task),
            attempt,
            kind: EffectKind::Artifact,
            generation: 0,
        }
    }

    fn version(task: u32, attempt: u32) -> Version {
        Version::plain(TaskId(task), attempt, [task as u8; 32], 100)
    }

    fn sorted_objects(store: &Store) -> Vec<(Token, Object)> {
        let mut all: Vec<(Token, Object)> = store
            .all_objects()
            .map(|(token, object)| (token, object.into_owned()))
            .collect();
        all.sort_by_key(|(token, _)| *token);
        all
    }

    /// Tasks compacted out of id order are archived in the order they came
    /// and still found by token; a write to an archived token brings the
    /// object back to the live ones, once.
    #[test]
    fn archive_finds_tokens_whatever_order_tasks_were_compacted_in() {
        let mut store = Store::default();
        for task in 1..=4 {
            for attempt in 1..=2 {
                store.put(token(task, attempt), version(task, attempt), false);
            }
        }
        // An odd object: two versions (the unconditional-put mutant).
        store.put(token(2, 1), version(9, 9), true);
        store.hide(token(3, 2));
        // A tombstone: hidden before anything was written.
        store.hide(token(4, 3));
        let before = sorted_objects(&store);
        let observed: Vec<Observed> = before.iter().map(|(t, _)| store.observe(*t)).collect();

        for task in [3, 1, 4, 2] {
            store.archive_task(TaskId(task));
        }
        assert!(store.objects.is_empty() && store.by_task.is_empty());
        assert_eq!(store.archive_odd.len(), 1, "task 2's two-version object");
        assert_eq!(sorted_objects(&store), before);
        let after: Vec<Observed> = before.iter().map(|(t, _)| store.observe(*t)).collect();
        assert_eq!(after, observed);
        assert!(observed.contains(&Observed::Tombstone));
        assert_eq!(store.observe(token(5, 1)), Observed::Absent);
        assert_eq!(store.observe(token(1, 3)), Observed::Absent);

        // A put on an archived token finds it there and writes nothing.
        assert!(!store.put(token(4, 1), version(7, 7), false));
        assert!(store.get(token(4, 1)).is_some());
        assert_eq!(sorted_objects(&store), before);
        store.hide(token(1, 2));
        let hidden = sorted_objects(&store);
        let (_, object) = hidden.iter().find(|(t, _)| *t == token(1, 2)).unwrap();
        assert!(object.hidden);
        assert_eq!(hidden.len(), before.len());
    }
}
