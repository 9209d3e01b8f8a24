//! The engine's plumbing: the scheduler's queue, step names and counts,
//! identifiers, the containers rows live in (`IdTable` and its chunked
//! window `Slots`, `KeyMap`, and `CowTable`, which a model checker's copy
//! shares), and `Lanes`, the hasher of the checker's fingerprints.

pub mod cow;
pub mod ids;
pub mod keymap;
pub mod lanes;
pub mod life;
pub mod schedule;
pub mod slots;
pub mod step;
pub mod table;
