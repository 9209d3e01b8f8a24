//! Tests of the pure state machine and the `sim transition` tool.
