//! Scenarios back to TOML: reproducers that fuzz writes, with the workload
//! and faults spelled out (not only the seed), the sim version and a hash
//! of the effective configuration.

use std::fmt::Write as _;

use crate::config::Config;
use crate::faults::{Placement, ScriptedFault};
use crate::hash::{hex, sha256};
use crate::lesson_json::event_to_json;

use super::{DeadLetterRef, Request, RequestKind, Scenario, Target};

pub const SIM_VERSION: &str = env!("CARGO_PKG_VERSION");

pub fn config_sha256(config: &Config) -> String {
    hex(&sha256(config.canonical_text().as_bytes()))
}

/// A TOML string literal.
fn quote(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// A JSON value as an inline TOML value.
fn inline(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => "\"\"".into(),
        serde_json::Value::Bool(flag) => flag.to_string(),
        serde_json::Value::Number(number) => number.to_string(),
        serde_json::Value::String(text) => quote(text),
        serde_json::Value::Array(items) => {
            format!(
                "[{}]",
                items.iter().map(inline).collect::<Vec<_>>().join(", ")
            )
        }
        serde_json::Value::Object(map) => {
            let fields: Vec<String> = map
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| format!("{} = {}", bare_or_quoted(k), inline(v)))
                .collect();
            format!("{{ {} }}", fields.join(", "))
        }
    }
}

fn bare_or_quoted(key: &str) -> String {
    if !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        key.to_string()
    } else {
        quote(key)
    }
}

fn request_toml(request: &Request) -> String {
    let mut out = String::from("[[requests]]\n");
    let _ = writeln!(out, "at = {}", request.at_ms);
    let _ = writeln!(out, "kind = {}", quote(request.kind.name()));
    if request.waits > 0 {
        let _ = writeln!(
            out,
            "waits = {}\nwait_ms = {}",
            request.waits, request.wait_ms
        );
    }
    if request.kind.from_client() {
        let _ = writeln!(out, "client = \"client-{}\"", request.client + 1);
        if let Some(api) = request.api {
            let _ = writeln!(out, "api = \"api-{}\"", api + 1);
        }
    }
    let target = |out: &mut String, target: &Target| match target {
        Target::Key(key) => {
            let _ = writeln!(out, "key = {}", quote(key));
        }
        Target::Task(task) => {
            let _ = writeln!(out, "task = \"{task}\"");
        }
    };
    match &request.kind {
        RequestKind::Create { key, input } => {
            let _ = writeln!(out, "key = {}", quote(key));
            let input: serde_json::Value =
                serde_json::from_str(&input.canonical).expect("canonical JSON parses");
            let _ = writeln!(out, "input = {}", inline(&input));
        }
        RequestKind::Cancel { target: t } | RequestKind::ReadStatus { target: t } => {
            target(&mut out, t)
        }
        RequestKind::ReplayDeadLetter { dead_letter } => {
            let _ = match dead_letter {
                DeadLetterRef::Id(id) => writeln!(out, "dead_letter = \"{id}\""),
                DeadLetterRef::Message(message) => writeln!(out, "message = \"{message}\""),
                DeadLetterRef::Task(task) => writeln!(out, "task = \"{task}\""),
            };
        }
        RequestKind::BumpHandlerVersion { version } => {
            let _ = writeln!(out, "version = {version}");
        }
        RequestKind::AppendEvent { event } | RequestKind::DeliverEvent { event } => {
            let _ = writeln!(out, "event = {}", inline(&event_to_json(event)));
        }
    }
    out
}

fn fault_toml(fault: &ScriptedFault) -> String {
    let mut out = String::from("[[faults]]\n");
    let _ = writeln!(out, "site = {}", quote(fault.site.as_str()));
    let _ = writeln!(out, "kind = {}", quote(fault.kind.as_str()));
    if let Some(actor) = fault.actor {
        let _ = writeln!(out, "actor = \"{actor}\"");
    }
    let _ = match &fault.placement {
        Placement::Nth(n) => writeln!(out, "nth = {n}"),
        Placement::Step(s) => writeln!(out, "step = {s}"),
        Placement::StepReach { step, reach } => writeln!(out, "step = {step}\nnth = {reach}"),
        Placement::After { action, nth: 1 } => writeln!(out, "after = \"{action}\""),
        Placement::After { action, nth } => writeln!(out, "after = \"{action}\"\nnth = {nth}"),
    };
    out
}

/// The whole scenario as TOML, every knob written out (a reproducer's
/// world stays the same when a default changes).
pub fn to_toml(scenario: &Scenario) -> String {
    write_toml(scenario, true)
}

/// The scenario as TOML with only the knobs that differ from their
/// defaults, for a shrunk scenario a person reads: its `config_sha256`
/// still says when the effective configuration moved.
pub fn to_toml_compact(scenario: &Scenario) -> String {
    write_toml(scenario, false)
}

fn write_toml(scenario: &Scenario, every_knob: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "name = {}", quote(&scenario.name));
    let _ = writeln!(out, "description = {}", quote(&scenario.description));
    let _ = writeln!(out, "seed = {}", scenario.seed);
    let _ = writeln!(out, "steps_max = {}", scenario.steps_max);
    if let Some(mutant) = scenario.mutant {
        let _ = writeln!(out, "mutant = {}", quote(mutant.name()));
    }
    let _ = writeln!(out, "sim_version = {}", quote(SIM_VERSION));
    let _ = writeln!(
        out,
        "config_sha256 = {}",
        quote(&config_sha256(&scenario.config))
    );
    if !scenario.schedule.is_empty() {
        let _ = writeln!(out, "schedule = [");
        for wake in &scenario.schedule {
            let _ = writeln!(out, "    {},", quote(&wake.describe()));
        }
        let _ = writeln!(out, "]");
    }
    let defaults = Config::default().values();
    let knobs: Vec<_> = scenario
        .config
        .values()
        .into_iter()
        .zip(defaults)
        .filter(|(value, default)| every_knob || value != default)
        .map(|(value, _)| value)
        .collect();
    if !knobs.is_empty() {
        let _ = writeln!(out, "\n[config]");
    }
    for (name, value) in knobs {
        let _ = writeln!(out, "{name} = {value}");
    }
    if scenario.expect.violation.is_some() || !scenario.expect.facts.is_empty() {
        let _ = writeln!(out, "\n[expect]");
        if let Some(violation) = &scenario.expect.violation {
            let _ = writeln!(out, "violation = {}", quote(violation));
        }
        for (pointer, value) in &scenario.expect.facts {
            let _ = writeln!(out, "{} = {}", quote(pointer), inline(value));
        }
    }
    for request in &scenario.requests {
        let _ = write!(out, "\n{}", request_toml(request));
    }
    for fault in &scenario.faults {
        let _ = write!(out, "\n{}", fault_toml(fault));
    }
    out
}

/// A reproducer written by another sim version or for another config is
/// still run; these say so, for the caller to tell the user.
pub fn version_warnings(scenario: &Scenario) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(version) = &scenario.sim_version
        && version != SIM_VERSION
    {
        warnings.push(format!(
            "written by sim {}, running sim {SIM_VERSION}",
            crate::escape::escape(version)
        ));
    }
    if let Some(recorded) = &scenario.config_sha256 {
        let actual = config_sha256(&scenario.config);
        if *recorded != actual {
            warnings.push(format!(
                "config_sha256 {} does not match the effective config ({actual})",
                crate::escape::escape(recorded)
            ));
        }
    }
    warnings
}
