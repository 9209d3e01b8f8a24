//! Scenario files: TOML in, a validated `Scenario` out, or one clear error
//! naming the file, line:column, the key and what was expected. Nothing is
//! run and nothing is written until a scenario is whole.

use std::path::Path;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::config::{Config, KNOBS, KnobType, KnobValue};
use crate::error::{InputError, line_column};
use crate::faults::{FaultKind, Placement, ScriptedFault, Site};
use crate::invariants::is_invariant;
use crate::mutants::Mutant;
use crate::task::Policy;
use crate::world::engine::ids::{ActorId, ActorKind, DeadLetterId, OutboxId, TaskId};
use crate::world::engine::schedule::Wake;
use crate::world::engine::step::Action;

use super::{DeadLetterRef, Expect, Request, RequestKind, Scenario, Target};

/// Reads and validates a scenario file.
pub fn load(path: &Path) -> Result<Scenario, InputError> {
    let fail = |message: String| Err(InputError::new(message).in_file(path));
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return fail("no such file".into());
        }
        Err(error) => return fail(format!("cannot read: {error}")),
    };
    if metadata.is_dir() {
        return fail("is a directory; expected a scenario file (.toml)".into());
    }
    let bytes = match crate::input::read_file(path, crate::input::SCENARIO_BYTES_MAX) {
        Ok(bytes) => bytes,
        Err(message) => return fail(message),
    };
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => {
            let offset = error.utf8_error().valid_up_to();
            let valid = std::str::from_utf8(&error.as_bytes()[..offset]).expect("valid prefix");
            let (line, column) = line_column(valid, offset);
            return Err(
                InputError::new("is not valid UTF-8; expected a UTF-8 TOML file")
                    .in_file(path)
                    .at(line, column),
            );
        }
    };
    parse(&text, Some(path))
}

/// Validates scenario text; `path` names it in errors.
pub fn parse(text: &str, path: Option<&Path>) -> Result<Scenario, InputError> {
    let parser = Parser { text, path };
    parser.scenario()
}

struct Parser<'a> {
    text: &'a str,
    path: Option<&'a Path>,
}

type Value<'i> = Spanned<DeValue<'i>>;

/// A table's entries in source order, so the first error reported is the
/// first in the file.
fn entries<'t, 'i>(
    table: &'t DeTable<'i>,
) -> Vec<(&'t str, std::ops::Range<usize>, &'t Value<'i>)> {
    let mut list: Vec<_> = table
        .iter()
        .map(|(key, value)| (key.get_ref().as_ref(), key.span(), value))
        .collect();
    list.sort_by_key(|(_, span, _)| span.start);
    list
}

impl Parser<'_> {
    fn error(
        &self,
        span: std::ops::Range<usize>,
        key: &str,
        message: impl Into<String>,
    ) -> InputError {
        let (line, column) = line_column(self.text, span.start);
        let mut error = InputError::new(message).at(line, column);
        if !key.is_empty() {
            error = error.key(key);
        }
        match self.path {
            Some(path) => error.in_file(path),
            None => error,
        }
    }

    fn scenario(&self) -> Result<Scenario, InputError> {
        if self.text.trim().is_empty() {
            return Err(self.error(
                0..0,
                "",
                "is empty; expected a scenario with at least `name`, `seed` and `steps_max`",
            ));
        }
        let document = DeTable::parse(self.text).map_err(|error| {
            let span = error.span().unwrap_or(0..0);
            let message = error.message().trim().to_string();
            self.error(span, "", format!("is not valid TOML: {message}"))
        })?;
        let root = document.get_ref();
        let mut scenario = Scenario {
            name: String::new(),
            description: String::new(),
            seed: 0,
            steps_max: 0,
            mutant: None,
            config: Config::default(),
            requests: Vec::new(),
            faults: Vec::new(),
            schedule: Vec::new(),
            expect: Expect::default(),
            path: self.path.map(|p| p.display().to_string()),
            sim_version: None,
            config_sha256: None,
        };
        let mut seen = (false, false, false);
        for (key, span, value) in entries(root) {
            match key {
                "name" => {
                    scenario.name = self.string(value, key)?;
                    seen.0 = true;
                }
                "description" => scenario.description = self.string(value, key)?,
                "seed" => {
                    scenario.seed = self.integer(value, key, 0, u64::MAX)?;
                    seen.1 = true;
                }
                "steps_max" => {
                    scenario.steps_max = self.integer(value, key, 1, 1_000_000_000_000)?;
                    seen.2 = true;
                }
                "mutant" => {
                    let name = self.string(value, key)?;
                    scenario.mutant = Some(Mutant::parse(&name).ok_or_else(|| {
                        self.error(
                            value.span(),
                            key,
                            format!("unknown mutant `{name}`; `sim mutants` lists them"),
                        )
                    })?);
                }
                "sim_version" => scenario.sim_version = Some(self.string(value, key)?),
                "config_sha256" => scenario.config_sha256 = Some(self.string(value, key)?),
                "config" => self.config(value, &mut scenario.config)?,
                "requests" => {}
                "faults" => {}
                "schedule" => scenario.schedule = self.schedule(value)?,
                "expect" => scenario.expect = self.expect(value)?,
                other => {
                    return Err(self.error(
                        span,
                        other,
                        "unknown key; expected one of name, description, seed, steps_max, mutant, sim_version, config_sha256, schedule, [config], [[requests]], [[faults]], [expect]",
                    ));
                }
            }
        }
        let missing = [(seen.0, "name"), (seen.1, "seed"), (seen.2, "steps_max")];
        if let Some((_, key)) = missing.iter().find(|(present, _)| !present) {
            return Err(self.error(
                0..0,
                key,
                "is missing; every scenario needs `name`, `seed` and `steps_max`",
            ));
        }
        if let Some(value) = root.get("requests") {
            scenario.requests = self.requests(value, &scenario.config)?;
        }
        if let Some(value) = root.get("faults") {
            scenario.faults = self.faults(value, &scenario.config)?;
        }
        Ok(scenario)
    }

    /// `schedule = ["call-1", "continue worker-1 1", …]`: wakes to fire
    /// first, in order, as `Wake::describe` names them.
    fn schedule(&self, value: &Value<'_>) -> Result<Vec<Wake>, InputError> {
        let key = "schedule";
        let items = value.get_ref().as_array().ok_or_else(|| {
            self.error(
                value.span(),
                key,
                format!(
                    "expected an array of wakes (like [\"call-1\", \"continue worker-1 1\"]), found {}",
                    value.get_ref().type_str()
                ),
            )
        })?;
        let mut wakes = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let at = format!("schedule[{index}]");
            let text = self.string(item, &at)?;
            let wake = Wake::parse(&text).ok_or_else(|| {
                self.error(
                    item.span(),
                    &at,
                    format!(
                        "expected a wake: `issue N`, `call-N`, `timeout request-N SEND`, `continue ACTOR INCARNATION`, `poke ACTOR`, `restart ACTOR`, `broker`, `workload` or `housekeeping`; found \"{}\"",
                        crate::escape::escape(&text)
                    ),
                )
            })?;
            wakes.push(wake);
        }
        Ok(wakes)
    }

    fn string(&self, value: &Value<'_>, key: &str) -> Result<String, InputError> {
        value.get_ref().as_str().map(str::to_string).ok_or_else(|| {
            self.error(
                value.span(),
                key,
                format!("expected a string, found {}", value.get_ref().type_str()),
            )
        })
    }

    fn integer(&self, value: &Value<'_>, key: &str, min: u64, max: u64) -> Result<u64, InputError> {
        let Some(integer) = value.get_ref().as_integer() else {
            return Err(self.error(
                value.span(),
                key,
                format!(
                    "expected an integer from {min} to {max}, found {}",
                    value.get_ref().type_str()
                ),
            ));
        };
        let parsed = i128::from_str_radix(integer.as_str(), integer.radix()).ok();
        match parsed {
            Some(number) if number >= i128::from(min) && number <= i128::from(max) => {
                Ok(number as u64)
            }
            _ => Err(self.error(
                value.span(),
                key,
                format!("expected an integer from {min} to {max}, found {integer}"),
            )),
        }
    }

    fn boolean(&self, value: &Value<'_>, key: &str) -> Result<bool, InputError> {
        value.get_ref().as_bool().ok_or_else(|| {
            self.error(
                value.span(),
                key,
                format!(
                    "expected true or false, found {}",
                    value.get_ref().type_str()
                ),
            )
        })
    }

    fn table<'t, 'i>(
        &self,
        value: &'t Value<'i>,
        key: &str,
    ) -> Result<&'t DeTable<'i>, InputError> {
        value.get_ref().as_table().ok_or_else(|| {
            self.error(
                value.span(),
                key,
                format!("expected a table, found {}", value.get_ref().type_str()),
            )
        })
    }

    fn config(&self, value: &Value<'_>, config: &mut Config) -> Result<(), InputError> {
        let table = self.table(value, "config")?;
        for (key, span, value) in entries(table) {
            let path = format!("config.{key}");
            let Some(knob) = KNOBS.iter().find(|knob| knob.name == key) else {
                return Err(self.error(
                    span,
                    &path,
                    "unknown knob; `sim config --defaults` lists every knob",
                ));
            };
            let typed = match knob.kind {
                KnobType::Integer { min, max } => {
                    KnobValue::Integer(self.integer(value, &path, min, max)?)
                }
                KnobType::Bool => KnobValue::Bool(self.boolean(value, &path)?),
                KnobType::Policy => {
                    let text = self.string(value, &path)?;
                    KnobValue::Policy(Policy::parse(&text).ok_or_else(|| {
                        self.error(
                            value.span(),
                            &path,
                            format!(
                                "expected \"completion-wins\" or \"cancel-wins\", found \"{text}\""
                            ),
                        )
                    })?)
                }
            };
            assert!(config.set(key, typed), "every knob in the table can be set");
        }
        if config.latency_ms_min > config.latency_ms_max {
            let span = table
                .get("latency_ms_min")
                .map_or(value.span(), |v| v.span());
            return Err(self.error(
                span,
                "config.latency_ms_min",
                "must not exceed config.latency_ms_max",
            ));
        }
        Ok(())
    }

    fn array<'t, 'i>(
        &self,
        value: &'t Value<'i>,
        key: &str,
    ) -> Result<Vec<&'t Value<'i>>, InputError> {
        value
            .get_ref()
            .as_array()
            .map(|array| array.iter().collect())
            .ok_or_else(|| {
                self.error(
                    value.span(),
                    key,
                    format!(
                        "expected an array of tables ([[{key}]]), found {}",
                        value.get_ref().type_str()
                    ),
                )
            })
    }

    fn actor(
        &self,
        value: &Value<'_>,
        key: &str,
        kinds: &[ActorKind],
        config: &Config,
    ) -> Result<ActorId, InputError> {
        let name = self.string(value, key)?;
        let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        let actor = ActorId::parse(&name)
            .filter(|actor| kinds.contains(&actor.kind))
            .ok_or_else(|| {
                self.error(
                    value.span(),
                    key,
                    format!(
                        "expected an actor of kind {} (like `worker-1`), found \"{name}\"",
                        names.join(", ")
                    ),
                )
            })?;
        let count = match actor.kind {
            ActorKind::Client => config.clients,
            ActorKind::Api => config.apis,
            ActorKind::Publisher => config.publishers,
            ActorKind::Worker => config.workers,
            _ => 1,
        };
        if u64::from(actor.index) >= count {
            return Err(self.error(
                value.span(),
                key,
                format!(
                    "`{name}` does not exist: the world has {count} {}(s)",
                    actor.kind.as_str()
                ),
            ));
        }
        Ok(actor)
    }

    fn requests(&self, value: &Value<'_>, config: &Config) -> Result<Vec<Request>, InputError> {
        let mut requests = Vec::new();
        for (index, item) in self.array(value, "requests")?.into_iter().enumerate() {
            let at = format!("requests[{index}]");
            let table = self.table(item, &at)?;
            let field = |name: &str| format!("{at}.{name}");
            let kind_value = table
                .get("kind")
                .ok_or_else(|| self.error(item.span(), &field("kind"), "is missing; expected one of create, cancel, read-status, replay-dead-letter, bump-handler-version, append-event, deliver-event"))?;
            let kind = self.string(kind_value, &field("kind"))?;
            let allowed: &[&str] = match kind.as_str() {
                "create" => &["key", "input", "client", "api"],
                "cancel" | "read-status" => &["key", "task", "client", "api"],
                "replay-dead-letter" => &["dead_letter", "message", "task"],
                "bump-handler-version" => &["version"],
                "append-event" | "deliver-event" => &["event"],
                other => {
                    return Err(self.error(
                        kind_value.span(),
                        &field("kind"),
                        format!("unknown request kind \"{other}\"; expected one of create, cancel, read-status, replay-dead-letter, bump-handler-version, append-event, deliver-event"),
                    ));
                }
            };
            for (key, span, _) in entries(table) {
                let turns = ["waits", "wait_ms"];
                if key != "at" && key != "kind" && !allowed.contains(&key) && !turns.contains(&key)
                {
                    return Err(self.error(
                        span,
                        &field(key),
                        format!(
                            "unknown key for a `{kind}` request; expected at, kind, {}, waits, wait_ms",
                            allowed.join(", ")
                        ),
                    ));
                }
            }
            let at_ms = match table.get("at") {
                Some(value) => self.integer(value, &field("at"), 0, u64::MAX / 4)?,
                None => {
                    return Err(self.error(
                        item.span(),
                        &field("at"),
                        "is missing; expected the virtual time in ms",
                    ));
                }
            };
            let required = |name: &str| {
                table.get(name).ok_or_else(|| {
                    self.error(
                        item.span(),
                        &field(name),
                        format!("is missing; a `{kind}` request needs it"),
                    )
                })
            };
            let target = |this: &Self| -> Result<Target, InputError> {
                match (table.get("key"), table.get("task")) {
                    (Some(key), None) => Ok(Target::Key(this.string(key, &field("key"))?.into())),
                    (None, Some(task)) => Ok(Target::Task(this.task_id(task, &field("task"))?)),
                    _ => Err(this.error(
                        item.span(),
                        &field("key"),
                        "expected exactly one of `key` or `task`",
                    )),
                }
            };
            let kind = match kind.as_str() {
                "create" => RequestKind::Create {
                    key: self.string(required("key")?, &field("key"))?.into(),
                    input: crate::world::stores::db::Input::of(
                        &self.json(required("input")?, &field("input"))?,
                    ),
                },
                "cancel" => RequestKind::Cancel {
                    target: target(self)?,
                },
                "read-status" => RequestKind::ReadStatus {
                    target: target(self)?,
                },
                "replay-dead-letter" => {
                    let present: Vec<&str> = ["dead_letter", "message", "task"]
                        .into_iter()
                        .filter(|name| table.get(*name).is_some())
                        .collect();
                    if present.len() != 1 {
                        return Err(self.error(
                            item.span(),
                            &field("dead_letter"),
                            "expected exactly one of `dead_letter`, `message` or `task`",
                        ));
                    }
                    let name = present[0];
                    let value = table.get(name).expect("present");
                    let text = self.string(value, &field(name))?;
                    let reference = match name {
                        "dead_letter" => DeadLetterId::parse(&text).map(DeadLetterRef::Id),
                        "message" => OutboxId::parse(&text).map(DeadLetterRef::Message),
                        _ => TaskId::parse(&text).map(DeadLetterRef::Task),
                    };
                    let example = match name {
                        "dead_letter" => "dead-letter-1",
                        "message" => "outbox-1",
                        _ => "task-1",
                    };
                    RequestKind::ReplayDeadLetter {
                        dead_letter: reference.ok_or_else(|| {
                            self.error(
                                value.span(),
                                &field(name),
                                format!("expected an id like \"{example}\", found \"{text}\""),
                            )
                        })?,
                    }
                }
                // The fuzz workload bumps one version at a time for as
                // long as a run lasts (seed 1 passed 1,000 at 213 s of
                // virtual time), so its reproducers need more than the
                // `handler_version` knob's range, which is a starting point.
                "bump-handler-version" => RequestKind::BumpHandlerVersion {
                    version: self.integer(
                        required("version")?,
                        &field("version"),
                        1,
                        1_000_000_000_000,
                    )?,
                },
                _ => {
                    let value = required("event")?;
                    let json = self.json(value, &field("event"))?;
                    let event = crate::lesson_json::event_from_json(
                        &json,
                        crate::lesson_json::Reading::Strict,
                    )
                    .map_err(|message| {
                        self.error(
                            value.span(),
                            &field("event"),
                            format!("not a well-typed TaskEvent: {message}"),
                        )
                    })?;
                    if kind == "append-event" {
                        RequestKind::AppendEvent { event }
                    } else {
                        RequestKind::DeliverEvent { event }
                    }
                }
            };
            let client = match table.get("client") {
                Some(value) => {
                    self.actor(value, &field("client"), &[ActorKind::Client], config)?
                        .index
                }
                None => 0,
            };
            let api = match table.get("api") {
                Some(value) => Some(
                    self.actor(value, &field("api"), &[ActorKind::Api], config)?
                        .index,
                ),
                None => None,
            };
            // A fuzz client logs at most 63 waits before a request; the
            // bound keeps a hand-written count from spinning for hours.
            let waits = match table.get("waits") {
                Some(value) => self.integer(value, &field("waits"), 0, 1_000_000)? as u32,
                None => 0,
            };
            let wait_ms = match table.get("wait_ms") {
                Some(value) => self.integer(value, &field("wait_ms"), 1, 1_000_000)?,
                None if waits > 0 => {
                    return Err(self.error(
                        item.span(),
                        &field("wait_ms"),
                        "is missing; a request with `waits` needs the time between them",
                    ));
                }
                None => 0,
            };
            if u64::from(waits) * wait_ms > at_ms {
                return Err(self.error(
                    item.span(),
                    &field("waits"),
                    format!(
                        "{waits} waits every {wait_ms} ms start before 0 ms; expected at most `at` ({at_ms}) ms of waits"
                    ),
                ));
            }
            requests.push(Request {
                at_ms,
                kind,
                client,
                api,
                waits,
                wait_ms,
            });
        }
        Ok(requests)
    }

    fn task_id(&self, value: &Value<'_>, key: &str) -> Result<TaskId, InputError> {
        let text = self.string(value, key)?;
        TaskId::parse(&text).ok_or_else(|| {
            self.error(
                value.span(),
                key,
                format!("expected a task id like \"task-1\", found \"{text}\""),
            )
        })
    }

    fn faults(&self, value: &Value<'_>, config: &Config) -> Result<Vec<ScriptedFault>, InputError> {
        let mut faults = Vec::new();
        for (index, item) in self.array(value, "faults")?.into_iter().enumerate() {
            let at = format!("faults[{index}]");
            let field = |name: &str| format!("{at}.{name}");
            let table = self.table(item, &at)?;
            for (key, span, _) in entries(table) {
                if !["site", "kind", "nth", "step", "after", "actor"].contains(&key) {
                    return Err(self.error(
                        span,
                        &field(key),
                        "unknown key; expected site, kind, nth, step, after, actor",
                    ));
                }
            }
            let site_value = table.get("site").ok_or_else(|| {
                self.error(
                    item.span(),
                    &field("site"),
                    "is missing; expected a fault site",
                )
            })?;
            let site_name = self.string(site_value, &field("site"))?;
            let sites: Vec<&str> = Site::ALL.iter().map(|s| s.as_str()).collect();
            let site = Site::parse(&site_name).ok_or_else(|| {
                self.error(
                    site_value.span(),
                    &field("site"),
                    format!(
                        "unknown fault site \"{site_name}\"; expected one of {}",
                        sites.join(", ")
                    ),
                )
            })?;
            let kinds: Vec<&str> = site.kinds().iter().map(|k| k.as_str()).collect();
            let kind = match table.get("kind") {
                Some(value) => {
                    let name = self.string(value, &field("kind"))?;
                    *site.kinds().iter().find(|k| k.as_str() == name).ok_or_else(|| {
                        self.error(value.span(), &field("kind"), format!("unknown kind \"{name}\" at site {site_name}; expected one of {}", kinds.join(", ")))
                    })?
                }
                None if site == Site::Crash => FaultKind::Crash,
                None => {
                    return Err(self.error(
                        item.span(),
                        &field("kind"),
                        format!("is missing; expected one of {}", kinds.join(", ")),
                    ));
                }
            };
            let actor_kinds = actor_kinds_for(site);
            let actor = match table.get("actor") {
                Some(value) => Some(self.actor(value, &field("actor"), actor_kinds, config)?),
                None => None,
            };
            let nth = match table.get("nth") {
                Some(value) => Some(self.integer(value, &field("nth"), 1, u64::MAX / 4)?),
                None => None,
            };
            let step = match table.get("step") {
                Some(value) => Some(self.integer(value, &field("step"), 1, u64::MAX / 4)?),
                None => None,
            };
            let after = match table.get("after") {
                Some(value) => {
                    let name = self.string(value, &field("after"))?;
                    Some(Action::parse(&name).ok_or_else(|| {
                        self.error(value.span(), &field("after"), format!("unknown step \"{name}\"; expected a step name like \"worker.put\" (the README lists them)"))
                    })?)
                }
                None => None,
            };
            let placement = match (nth, step, after) {
                (Some(n), None, None) => Placement::Nth(n),
                (None, Some(s), None) => Placement::Step(s),
                (Some(n), Some(s), None) => Placement::StepReach { step: s, reach: n },
                (n, None, Some(action)) => Placement::After {
                    action,
                    nth: n.unwrap_or(1),
                },
                _ => {
                    return Err(self.error(item.span(), &field("nth"), "expected exactly one of `nth`, `step` or `after` (`nth` may go with `after` or `step`)"));
                }
            };
            if site == Site::Crash
                && actor.is_none()
                && !matches!(placement, Placement::After { .. })
            {
                return Err(self.error(
                    item.span(),
                    &field("actor"),
                    "is missing; a crash at `nth` or `step` needs the actor to crash",
                ));
            }
            faults.push(ScriptedFault {
                site,
                kind,
                placement,
                actor,
            });
        }
        Ok(faults)
    }

    fn expect(&self, value: &Value<'_>) -> Result<Expect, InputError> {
        let table = self.table(value, "expect")?;
        let mut expect = Expect::default();
        for (key, span, value) in entries(table) {
            let path = format!("expect.{key}");
            if key == "violation" {
                let id = self.string(value, &path)?;
                if !is_invariant(&id) {
                    return Err(self.error(
                        value.span(),
                        &path,
                        format!("unknown invariant \"{id}\"; `sim invariants` lists them"),
                    ));
                }
                expect.violation = Some(id);
            } else if key.starts_with('/') {
                let expected = self.json(value, &path)?;
                // A one-key table naming a matcher must spell it right.
                if let Some(map) = expected.as_object()
                    && map.len() == 1
                    && let Some((name, given)) = map.iter().next()
                    && matches!(name.as_str(), "null" | "absent" | "len")
                    && crate::scenario::Matcher::of(&expected)
                        == crate::scenario::Matcher::Equals(&expected)
                {
                    let wanted = if name == "len" {
                        "a non-negative integer, like { len = 3 }"
                    } else {
                        "true, like { null = true }"
                    };
                    return Err(self.error(
                        value.span(),
                        &path,
                        format!("`{name}` takes {wanted}, found {given}"),
                    ));
                }
                expect.facts.push((key.to_string(), expected));
            } else {
                return Err(self.error(span, &path, "expected `violation` or a JSON pointer into the dump, like \"/tasks/task-1/status\""));
            }
        }
        Ok(expect)
    }

    /// A TOML value as JSON (documents, events, expected values).
    fn json(&self, value: &Value<'_>, key: &str) -> Result<serde_json::Value, InputError> {
        Ok(match value.get_ref() {
            DeValue::String(text) => serde_json::Value::String(text.to_string()),
            DeValue::Integer(_) => serde_json::Value::from(self.signed(value, key)?),
            DeValue::Float(float) => {
                let parsed: f64 = float.as_str().replace('_', "").parse().map_err(|_| {
                    self.error(
                        value.span(),
                        key,
                        format!("expected a finite number, found {}", float.as_str()),
                    )
                })?;
                serde_json::Number::from_f64(parsed)
                    .map(serde_json::Value::Number)
                    .ok_or_else(|| self.error(value.span(), key, "expected a finite number"))?
            }
            DeValue::Boolean(flag) => serde_json::Value::Bool(*flag),
            DeValue::Datetime(_) => return Err(self.error(
                value.span(),
                key,
                "expected a string, number, boolean, array or table; datetimes have no JSON form",
            )),
            DeValue::Array(array) => serde_json::Value::Array(
                array
                    .iter()
                    .enumerate()
                    .map(|(index, item)| self.json(item, &format!("{key}[{index}]")))
                    .collect::<Result<_, _>>()?,
            ),
            DeValue::Table(table) => {
                let mut map = serde_json::Map::new();
                for (name, _, item) in entries(table) {
                    map.insert(name.to_string(), self.json(item, &format!("{key}.{name}"))?);
                }
                serde_json::Value::Object(map)
            }
        })
    }

    fn signed(&self, value: &Value<'_>, key: &str) -> Result<i64, InputError> {
        let integer = value.get_ref().as_integer().expect("called on integers");
        i64::from_str_radix(integer.as_str(), integer.radix()).map_err(|_| {
            self.error(
                value.span(),
                key,
                format!("expected a 64-bit integer, found {integer}"),
            )
        })
    }
}

/// Which actors a fault at `site` can name.
fn actor_kinds_for(site: Site) -> &'static [ActorKind] {
    use ActorKind::*;
    match site {
        Site::ApiResponse | Site::CacheEvict => &[Api],
        Site::DbCommit | Site::SnapshotWrite => &[Api, Publisher, Worker, Reconciler, Operator],
        Site::PublisherConfirm => &[Publisher],
        Site::BrokerDeliver => &[Worker, Projector],
        Site::WorkerAck => &[Worker],
        Site::StorePut => &[Worker],
        Site::StoreRead | Site::StoreHide => &[Worker, Reconciler],
        Site::CacheDelete => &[Projector],
        Site::Crash | Site::Pause => &[Client, Api, Publisher, Worker, Projector, Reconciler],
        Site::BrokerPublish => &[Publisher],
        Site::StoreOutage => &[Worker, Reconciler],
        Site::BrokerOutage => &[Publisher, Worker, Projector],
        Site::Latency => &[Client, Api, Publisher, Worker, Projector, Reconciler],
    }
}
