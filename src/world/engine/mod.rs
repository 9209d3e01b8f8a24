//! The engine's plumbing: the scheduler's queue, step names and counts,
//! identifiers, and the containers rows live in (`IdTable` and its chunked
//! window `Slots`, `KeyMap`).

pub mod cow;
pub mod ids;
pub mod keymap;
pub mod lanes;
pub mod life;
pub mod schedule;
pub mod slots;
pub mod step;
pub mod table;
