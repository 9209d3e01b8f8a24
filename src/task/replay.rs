//! Replay: folding an event history with the same transition function.
