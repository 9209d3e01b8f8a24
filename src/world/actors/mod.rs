//! The actors, one file each: their volatile state between steps (explicit
//! phases) and the steps they take on the world.

pub mod api;
pub mod client;
pub mod deliver;
pub mod fence;
pub mod operator;
pub mod projector;
pub mod publisher;
pub mod reconciler;
pub mod worker;
