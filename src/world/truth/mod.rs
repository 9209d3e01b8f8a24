//! Ground truth no actor sees: which client intent each request belongs to,
//! and (when asked) what each request got back.

pub mod answers;
pub mod intents;
