//! The one integration-test binary; a module per area.

mod transition;
