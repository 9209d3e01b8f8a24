//! Swarm testing: each fuzz seed draws its own world shape, which fault
//! kinds are on and how often (integer parts per million), and its workload
//! mix, from the seed's shape stream. One campaign explores many mixes.

use std::fmt::Write as _;

use crate::config::Config;
use crate::faults::{FaultKind, FaultRates, PauseFocus, Site, catalogue};
use crate::prng::{Prng, Stream};
use crate::task::Policy;
use crate::world::engine::step::{Action, STEP_NAMES, Verb};

use super::workload::{LIVE_TASKS_MAX, REQUESTS_IN_FLIGHT_MAX, WorkloadMix};

/// What one seed drew.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Draw {
    pub config: Config,
    pub rates: FaultRates,
    pub mix: WorkloadMix,
}

/// Fault rates a kind can be drawn at, in parts per million of its site's
/// occurrences. Sites reached on nearly every step get low rates; sites a
/// run reaches only now and then (a compensation's hide, a snapshot, a
/// cache delete) get high ones, so each kind fires often enough to matter
/// without drowning the run.
const RATES: [u32; 4] = [2_000, 10_000, 30_000, 80_000];
const RARE_SITE_RATES: [u32; 3] = [100_000, 250_000, 500_000];
/// Crashes are per step of an actor: rarer.
const CRASH_RATES: [u32; 3] = [500, 2_000, 8_000];

/// Outages, pauses and spikes last a while once they begin, up to
/// seconds where a fault phase lasts a few: rarer still. A pause or a
/// spike is drawn at every step of an actor, a broker outage at every call
/// to the broker: a few a run. The store is called far less often.
const WINDOW_RATES: [u32; 3] = [20, 100, 400];
/// Pauses are drawn higher: a pause is the fencing test (a holder frozen
/// past its leases while another takes over), and it needs a long pause of
/// a worker in the middle of a job, which the window rates above gave a
/// 300-seed campaign 29 times in all (151 pauses).
const PAUSE_RATES: [u32; 4] = [100, 400, 1_500, 4_000];
const STORE_OUTAGE_RATES: [u32; 3] = [200, 1_000, 4_000];

/// Sites added after the first milestone: drawn after the workload mix,
/// so a seed's world shape, mix and older rates stay what they were.
const LATER_SITES: [Site; 5] = [
    Site::BrokerPublish,
    Site::StoreOutage,
    Site::BrokerOutage,
    Site::Pause,
    Site::Latency,
];

fn rates_for(site: Site) -> &'static [u32] {
    match site {
        Site::Crash => &CRASH_RATES,
        Site::StoreOutage => &STORE_OUTAGE_RATES,
        Site::Pause => &PAUSE_RATES,
        Site::BrokerOutage | Site::Latency => &WINDOW_RATES,
        Site::StoreHide | Site::SnapshotWrite | Site::CacheEvict => &RARE_SITE_RATES,
        _ => &RATES,
    }
}

/// Rates of aimed pauses: an actor that just took an aimed step pauses
/// before its next one this often.
const PAUSE_FOCUS_RATES: [u32; 3] = [50_000, 150_000, 400_000];

/// Which steps a world aims its pauses after: up to six of the steps of
/// the actors that can pause, each followed by a window some guard
/// closes (the stale holder's, the stale reader's).
fn draw_pause_focus(rng: &mut Prng) -> PauseFocus {
    let candidates: Vec<Action> = STEP_NAMES
        .iter()
        .copied()
        .filter(|action| {
            action.kind.can_crash()
                && !matches!(action.verb, Verb::Crash | Verb::Restart | Verb::Pause)
        })
        .collect();
    let mut after = Vec::new();
    for _ in 0..rng.range(2, 6) {
        let action = candidates[rng.index(candidates.len())];
        if !after.contains(&action) {
            after.push(action);
        }
    }
    after.sort();
    PauseFocus {
        after,
        ppm: PAUSE_FOCUS_RATES[rng.index(PAUSE_FOCUS_RATES.len())],
    }
}

pub fn draw(seed: u64) -> Draw {
    let mut rng = Prng::new(seed, Stream::Shape);
    let mut config = Config {
        apis: rng.range(1, 3),
        publishers: rng.range(1, 3),
        workers: rng.range(1, 4),
        clients: rng.range(1, 4),
        ..Config::default()
    };
    config.quota = if rng.chance(200_000) {
        rng.range(5, 60)
    } else {
        1_000_000
    };
    config.snapshot_every = rng.range(0, 5);
    config.delivery_attempts_max = rng.range(2, 6);
    config.attempts_max = rng.range(1, 4);
    config.cancel_policy = if rng.chance(500_000) {
        Policy::CancelWins
    } else {
        Policy::CompletionWins
    };
    // A quarter of the worlds run against a store that cannot be queried:
    // a whole branch of every read-back and compensation (only a call's own
    // answer can confirm it), which one world in ten reached too seldom.
    config.store_supports_query = !rng.chance(250_000);
    config.reconcile_every_ms = rng.range(2, 20) * 100;
    config.visibility_timeout_ms = rng.range(5, 30) * 100;
    config.inbox_lease_ms = rng.range(3, 20) * 100;
    config.task_lease_ms = rng.range(10, 50) * 100;
    config.client_timeout_ms = rng.range(2, 15) * 100;
    config.store_timeout_ms = rng.range(2, 20) * 10;
    config.retry_backoff_ms = rng.range(0, 10) * 100;
    config.redrive_max = rng.range(0, 3);
    config.idempotency_ttl_ms = rng.range(30, 120) * 1000;
    let mut rates = FaultRates::none();
    let mut draw_rates = |rng: &mut Prng, later: bool| {
        for (index, (site, kind)) in catalogue().into_iter().enumerate() {
            // Drawn after the rest (below), so that the draws before it
            // keep their values.
            if kind == FaultKind::UntilTakeover {
                continue;
            }
            if LATER_SITES.contains(&site) == later && rng.chance(500_000) {
                let menu = rates_for(site);
                rates.ppm[index] = menu[rng.index(menu.len())];
            }
        }
    };
    draw_rates(&mut rng, false);
    let mut mix = WorkloadMix {
        gap_ms_max: rng.range(1, 10),
        create: rng.range(20, 60) as u32,
        duplicate_create: rng.range(0, 10) as u32,
        retry_same_key: rng.range(0, 10) as u32,
        reuse_key: rng.range(0, 6) as u32,
        cancel: rng.range(0, 15) as u32,
        read_status: rng.range(0, 20) as u32,
        poison: rng.range(0, 4) as u32,
        replay: rng.range(0, 4) as u32,
        outside: 0,
        operator: 0,
        malformed: 0,
        live_tasks_max: LIVE_TASKS_MAX,
        requests_in_flight_max: REQUESTS_IN_FLIGHT_MAX,
    };
    draw_rates(&mut rng, true);
    // Drawn last, so the earlier draws of a seed keep their values.
    mix.outside = rng.range(0, 4) as u32;
    mix.operator = rng.range(0, 3) as u32;
    // A third of the worlds keep records for seconds, not minutes, so that
    // a run of 10^4 steps sees retention: expiries racing late messages,
    // open effects and deferred compactions. Drawn after the rest.
    if rng.chance(333_333) {
        config.idempotency_ttl_ms = rng.range(2, 20) * 500;
    }
    // A quarter of the worlds send creates at the edges of the key and
    // input checks. Drawn after the rest.
    if rng.chance(250_000) {
        mix.malformed = rng.range(1, 3) as u32;
    }
    // Half the worlds aim pauses at the moment after a few steps. Drawn
    // after the rest.
    if rng.chance(500_000) {
        rates.pause_focus = Some(draw_pause_focus(&mut rng));
    }
    // Half the worlds also pause actors until a takeover. Drawn after the
    // rest.
    if rng.chance(500_000) {
        let index = catalogue()
            .iter()
            .position(|pair| *pair == (Site::Pause, FaultKind::UntilTakeover))
            .expect("until-takeover is in the catalogue");
        rates.ppm[index] = PAUSE_RATES[rng.index(PAUSE_RATES.len())];
    }
    Draw { config, rates, mix }
}

impl Draw {
    /// One line per aspect, for summaries.
    pub fn describe(&self) -> String {
        let c = &self.config;
        let mut out = format!(
            "shape: apis {} publishers {} workers {} clients {} quota {} snapshot_every {} delivery_attempts_max {} attempts_max {} {} store_supports_query {}\n",
            c.apis,
            c.publishers,
            c.workers,
            c.clients,
            c.quota,
            c.snapshot_every,
            c.delivery_attempts_max,
            c.attempts_max,
            c.cancel_policy.as_str(),
            c.store_supports_query
        );
        let _ = writeln!(
            out,
            "timeouts: visibility {}ms task_lease {}ms inbox_lease {}ms client {}ms store {}ms reconcile every {}ms",
            c.visibility_timeout_ms,
            c.task_lease_ms,
            c.inbox_lease_ms,
            c.client_timeout_ms,
            c.store_timeout_ms,
            c.reconcile_every_ms
        );
        let on: Vec<String> = catalogue()
            .into_iter()
            .zip(self.rates.ppm.iter())
            .filter(|(_, ppm)| **ppm > 0)
            .map(|((site, kind), ppm)| format!("{}/{}@{}ppm", site.as_str(), kind.as_str(), ppm))
            .collect();
        let _ = writeln!(
            out,
            "faults on: {}",
            if on.is_empty() {
                "none".to_string()
            } else {
                on.join(" ")
            }
        );
        if let Some(focus) = &self.rates.pause_focus {
            let after: Vec<String> = focus.after.iter().map(Action::to_string).collect();
            let _ = writeln!(
                out,
                "pauses aimed after: {} @{}ppm",
                after.join(" "),
                focus.ppm
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// About half the worlds aim their pauses, each at a few distinct
    /// steps an actor that can pause takes, and say so in their draw.
    #[test]
    fn half_the_worlds_aim_pauses_at_steps_of_actors_that_pause() {
        let mut aimed = 0;
        for seed in 1..=400 {
            let draw = draw(seed);
            let Some(focus) = &draw.rates.pause_focus else {
                assert!(!draw.describe().contains("pauses aimed"));
                continue;
            };
            aimed += 1;
            assert!((1..=6).contains(&focus.after.len()), "seed {seed}");
            assert!(focus.after.is_sorted() && focus.after.windows(2).all(|w| w[0] != w[1]));
            for action in &focus.after {
                assert!(action.kind.can_crash(), "seed {seed}: {action}");
                assert!(!matches!(
                    action.verb,
                    Verb::Crash | Verb::Restart | Verb::Pause
                ));
                assert!(STEP_NAMES.contains(action));
            }
            assert!(PAUSE_FOCUS_RATES.contains(&focus.ppm));
            assert!(draw.describe().contains("pauses aimed after: "));
        }
        assert!(
            (140..=260).contains(&aimed),
            "{aimed} of 400 worlds aim pauses"
        );
    }
}
