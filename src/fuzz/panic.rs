//! A panic inside one seed is a bug in sim itself, not the end of a
//! campaign: `catching` runs a seed's simulation, turns a panic into a
//! failure with its message and location, and lets the campaign go on.

use std::cell::{Cell, RefCell};
use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::invariants::Violation;
use crate::world::World;

/// The failure a campaign reports for a seed whose run panicked.
pub const SIM_PANIC: &str = "sim-panic";

/// For tests only: the seed whose run panics at its first look at the
/// world's size (step 4096), so a test can watch a campaign survive a
/// panic without a bug planted in the protocol. `u64::MAX`: none.
pub static PANIC_AT_SEED: AtomicU64 = AtomicU64::new(u64::MAX);

thread_local! {
    /// This thread is inside `catching`: the hook records, not prints.
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    /// The last caught panic's message and location.
    static CAUGHT: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Installs, once per process, a hook that keeps the panic of a thread
/// inside `catching` for its report and leaves every other panic to the
/// hook that was there before (a test harness's, say).
fn install_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CATCHING.with(Cell::get) {
                let location = info
                    .location()
                    .map(|at| format!(" at {}:{}", at.file(), at.line()))
                    .unwrap_or_default();
                let payload = info.payload();
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|text| text.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".to_string());
                CAUGHT.with(|caught| *caught.borrow_mut() = Some(format!("{message}{location}")));
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs `f`; a panic inside it comes back as `Err` with its message and
/// location instead of unwinding further.
pub fn catching<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install_hook();
    let before = CATCHING.with(|flag| flag.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    CATCHING.with(|flag| flag.set(before));
    result.map_err(|_| {
        CAUGHT
            .with(|caught| caught.borrow_mut().take())
            .unwrap_or_else(|| "a panic".to_string())
    })
}

/// Panics if this world's seed is the one a test asked to panic.
pub fn deliberate(world: &World) {
    if world.seed == PANIC_AT_SEED.load(Ordering::Relaxed) {
        panic!("the panic a test asked for (seed {})", world.seed);
    }
}

/// The failure a panicked run ends with, at the step it had reached.
pub fn as_violation(world: &World, message: String) -> Violation {
    Violation {
        invariant: SIM_PANIC,
        step: world.steps,
        time_ms: world.now,
        message: format!("sim panicked (a bug in sim itself, please report it): {message}"),
        entities: Vec::new(),
    }
}
