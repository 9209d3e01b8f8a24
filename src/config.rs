//! Every knob of the simulated world, declared once: its name, default,
//! allowed range and meaning. Scenario parsing, `sim config --defaults`,
//! reproducers and the fuzz swarm draw all read this one table.

use crate::task::Policy;

/// How a knob's value is typed in a scenario file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnobType {
    Integer { min: u64, max: u64 },
    Bool,
    Policy,
}

/// One row of the knob table.
#[derive(Clone, Copy, Debug)]
pub struct Knob {
    pub name: &'static str,
    pub kind: KnobType,
    pub default: &'static str,
    pub help: &'static str,
}

/// The largest value the integer knob `name` allows.
pub fn integer_max(name: &str) -> Option<u64> {
    KNOBS.iter().find_map(|knob| match knob.kind {
        KnobType::Integer { max, .. } if knob.name == name => Some(max),
        _ => None,
    })
}

macro_rules! knobs {
    ($( $field:ident : $ty:ident = $default:expr, [$min:expr, $max:expr], $help:expr; )*) => {
        /// The effective configuration of one run.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct Config {
            $( pub $field: knobs!(@rust $ty), )*
        }

        impl Default for Config {
            fn default() -> Config {
                Config { $( $field: knobs!(@default $ty, $default), )* }
            }
        }

        /// The knob table, in documentation order.
        pub const KNOBS: &[Knob] = &[
            $( Knob {
                name: stringify!($field),
                kind: knobs!(@kind $ty, $min, $max),
                default: knobs!(@text $ty, $default),
                help: $help,
            }, )*
        ];

        impl Config {
            /// Sets a knob by name from an already type-checked value.
            pub fn set(&mut self, name: &str, value: KnobValue) -> bool {
                match name {
                    $( stringify!($field) => { knobs!(@set self.$field, $ty, value) } )*
                    _ => false,
                }
            }

            /// Every knob with its current value, in table order.
            pub fn values(&self) -> Vec<(&'static str, KnobValue)> {
                vec![ $( (stringify!($field), knobs!(@get self.$field, $ty)), )* ]
            }
        }
    };
    (@rust int) => { u64 };
    (@rust bool) => { bool };
    (@rust policy) => { Policy };
    (@default int, $d:expr) => { $d };
    (@default bool, $d:expr) => { $d };
    (@default policy, $d:expr) => { $d };
    (@kind int, $min:expr, $max:expr) => { KnobType::Integer { min: $min, max: $max } };
    (@kind bool, $min:expr, $max:expr) => { KnobType::Bool };
    (@kind policy, $min:expr, $max:expr) => { KnobType::Policy };
    (@text int, $d:expr) => { stringify!($d) };
    (@text bool, $d:expr) => { stringify!($d) };
    (@text policy, $d:expr) => { "\"completion-wins\"" };
    (@set $place:expr, int, $v:expr) => { if let KnobValue::Integer(v) = $v { $place = v; true } else { false } };
    (@set $place:expr, bool, $v:expr) => { if let KnobValue::Bool(v) = $v { $place = v; true } else { false } };
    (@set $place:expr, policy, $v:expr) => { if let KnobValue::Policy(v) = $v { $place = v; true } else { false } };
    (@get $place:expr, int) => { KnobValue::Integer($place) };
    (@get $place:expr, bool) => { KnobValue::Bool($place) };
    (@get $place:expr, policy) => { KnobValue::Policy($place) };
}

/// A typed knob value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnobValue {
    Integer(u64),
    Bool(bool),
    Policy(Policy),
}

impl std::fmt::Display for KnobValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KnobValue::Integer(value) => write!(f, "{value}"),
            KnobValue::Bool(value) => write!(f, "{value}"),
            KnobValue::Policy(policy) => write!(f, "\"{}\"", policy.as_str()),
        }
    }
}

const HOUR_MS: u64 = 3_600_000;
const DAY_MS: u64 = 24 * HOUR_MS;

knobs! {
    apis: int = 1, [1, 16], "API instances that accept requests";
    publishers: int = 1, [1, 16], "outbox publishers";
    workers: int = 1, [0, 16], "workers consuming `task-work`";
    clients: int = 1, [1, 64], "clients sending requests";
    delivery_attempts_max: int = 5, [1, 1000], "broker deliveries of one entry before it is dead-lettered";
    attempts_max: int = 3, [1, 100], "attempts of one task before `TaskFailed`";
    cancel_policy: policy = Policy::CompletionWins, [0, 0], "who wins a verified completion against a pending cancellation: \"completion-wins\" or \"cancel-wins\"";
    snapshot_every: int = 4, [0, 1000], "accepted events between task snapshots (0: no snapshots)";
    reconcile_every_ms: int = 5000, [1, DAY_MS], "period of the reconciler's scan";
    idempotency_ttl_ms: int = 60_000, [1, 30 * DAY_MS], "how long an idempotency record outlives its commit (and its task's work)";
    drain_steps_max: int = 100_000, [0, 1_000_000_000], "steps allowed to drain after the faults stop, before `converges` is judged";
    handler_version: int = 1, [1, 1000], "version of the worker's transform; `legacy-rtf` inputs need 2";
    quota: int = 1_000_000, [0, 1_000_000_000], "accepted creates allowed in the scope (never released)";
    store_supports_query: bool = true, [0, 0], "the artifact store can be read by token after an unknown outcome";
    latency_ms_min: int = 1, [0, HOUR_MS], "shortest time between two steps of one actor";
    latency_ms_max: int = 5, [0, HOUR_MS], "longest time between two steps of one actor";
    client_timeout_ms: int = 1000, [1, DAY_MS], "a client's wait for a response before it retries";
    client_attempts_max: int = 5, [1, 100], "sends of one request (first + retries) before the client gives up";
    visibility_timeout_ms: int = 2000, [1, DAY_MS], "an unacked delivery becomes visible again after this";
    inbox_lease_ms: int = 1000, [1, DAY_MS], "processing lease of an inbox row";
    task_lease_ms: int = 1500, [1, DAY_MS], "lease of a running attempt; the reconciler acts after it expires";
    publish_lease_ms: int = 1000, [1, DAY_MS], "lease a publisher holds on the outbox rows it claimed";
    publish_batch_max: int = 8, [1, 1000], "outbox rows claimed in one transaction";
    publish_retry_ms: int = 200, [1, DAY_MS], "backoff before republishing a row whose confirm was unknown";
    store_timeout_ms: int = 100, [1, DAY_MS], "how long a store call takes to time out";
    store_calls_max: int = 4, [1, 100], "store calls of one kind a worker tries within a delivery before giving it back";
    retry_backoff_ms: int = 500, [0, DAY_MS], "not-before delay of a retried attempt's message";
    redrive_max: int = 2, [0, 100], "fresh outbox rows the reconciler writes for a transiently dead-lettered task";
    restart_delay_ms: int = 500, [0, DAY_MS], "time a crashed actor stays down";
    cache_delete_retry_ms: int = 50, [1, DAY_MS], "backoff before retrying a failed cache delete";
    nack_delay_ms: int = 100, [0, DAY_MS], "delay before a nacked delivery is visible again";
    delay_ms_max: int = 300, [1, DAY_MS], "longest extra delay a `broker.deliver`/`delay` fault adds";
}

impl Config {
    /// The knobs as TOML lines, `name = value  # help`.
    pub fn defaults_toml() -> String {
        let mut out = String::from("[config]\n");
        for knob in KNOBS {
            out.push_str(&format!(
                "{} = {}  # {}\n",
                knob.name, knob.default, knob.help
            ));
        }
        out
    }

    /// Canonical text of the effective configuration, hashed into
    /// `config_sha256` for reproducers.
    pub fn canonical_text(&self) -> String {
        let mut out = String::new();
        for (name, value) in self.values() {
            out.push_str(&format!("{name}={value}\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_knob_default_round_trips_through_set() {
        let defaults = Config::default();
        let mut config = Config::default();
        for (name, value) in defaults.values() {
            assert!(config.set(name, value), "{name}");
        }
        assert_eq!(config, defaults);
        assert!(!config.set("no_such_knob", KnobValue::Integer(1)));
    }

    #[test]
    fn every_default_is_within_its_range() {
        for (knob, (_, value)) in KNOBS.iter().zip(Config::default().values()) {
            if let (KnobType::Integer { min, max }, KnobValue::Integer(v)) = (knob.kind, value) {
                assert!(min <= v && v <= max, "{}", knob.name);
            }
        }
    }
}
