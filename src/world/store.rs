//! The artifact store: objects by effect token, every write kept as a
//! version, a hidden flag, and tombstones that fence a token. A put under a
//! token that already holds an object (or a tombstone) writes nothing and
//! returns what is there.

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
    pub objects: BTreeMap<Token, Object>,
    /// Tokens written per task, for the per-task artifact invariants.
    pub by_task: BTreeMap<TaskId, Vec<Token>>,
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
    pub fn get(&self, token: Token) -> Option<&Object> {
        self.objects.get(&token)
    }

    pub fn observe(&self, token: Token) -> Observed {
        match self.objects.get(&token) {
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
}
