//! Ground truth no actor sees: which client intent each request belongs to.

pub mod intents;
