//! JSON shapes of lesson 003 (states, events, results) and the canonical event hash.
