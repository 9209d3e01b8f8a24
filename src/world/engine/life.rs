//! What every crashable actor keeps about itself: whether it is up, its
//! incarnation (a wake for an older one finds nothing to do), and which
//! wake is already queued for it.

/// Volatile bookkeeping every crashable actor has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Life {
    pub up: bool,
    pub incarnation: u32,
    /// When a poke is already queued, so pokes are not piled up.
    pub poke_at: QueuedAt,
    /// A `pause` fault froze the actor until then: its wakes wait.
    pub paused_until: u64,
    /// The pause is an `until-takeover` one: it ends early, just after
    /// another holder takes over a lease or claim the actor holds.
    pub thaw_at_takeover: bool,
    /// A latency `spike` multiplies the delays before its next steps by
    /// `slow_factor` until then.
    pub slow_until: u64,
    pub slow_factor: u32,
}

/// When a wake of one kind is already queued, so that another for the
/// same or a later time is not queued too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct QueuedAt(Option<u64>);

impl QueuedAt {
    /// Whether a wake at `at` must be queued (none is at or before it);
    /// if so, it counts as queued from now on.
    pub fn wants(&mut self, at: u64) -> bool {
        if self.0.is_some_and(|queued| queued <= at) {
            return false;
        }
        self.0 = Some(at);
        true
    }

    /// The queued wake for `now` has fired.
    pub fn fired(&mut self, now: u64) {
        if self.0 == Some(now) {
            self.0 = None;
        }
    }

    /// When the queued wake is due, if one is.
    pub fn due(&self) -> Option<u64> {
        self.0
    }

    /// Its wake will find nothing to do (its actor crashed).
    pub fn forget(&mut self) {
        self.0 = None;
    }
}

impl Life {
    pub fn new() -> Life {
        Life {
            up: true,
            incarnation: 1,
            poke_at: QueuedAt::default(),
            paused_until: 0,
            thaw_at_takeover: false,
            slow_until: 0,
            slow_factor: 1,
        }
    }
}
