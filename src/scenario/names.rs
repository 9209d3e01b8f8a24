//! Reading the world's names back from scenario text: actors (`worker-2`),
//! step names (`worker.put`) and pinned wakes (`continue worker-1 2`). The
//! world writes these names (traces, reproducers); only readers of text
//! parse them, so the parsers live here, beside the scenario reader.

use crate::world::engine::ids::{ActorId, ActorKind, CallId, RequestId};
use crate::world::engine::schedule::Wake;
use crate::world::engine::step::{Action, STEP_NAMES, Verb};

impl ActorId {
    /// Parses `worker-2`, `projector`, …
    pub fn parse(text: &str) -> Option<ActorId> {
        for kind in ActorKind::ALL {
            if kind.numbered() {
                let Some(rest) = text
                    .strip_prefix(kind.as_str())
                    .and_then(|rest| rest.strip_prefix('-'))
                else {
                    continue;
                };
                if rest.is_empty()
                    || rest.starts_with('0')
                    || !rest.bytes().all(|b| b.is_ascii_digit())
                {
                    return None;
                }
                let number: u32 = rest.parse().ok()?;
                if number == 0 || number > u32::from(u16::MAX) {
                    return None;
                }
                return Some(ActorId::new(kind, (number - 1) as u16));
            } else if text == kind.as_str() {
                return Some(ActorId::single(kind));
            }
        }
        None
    }
}

impl Action {
    /// Parses `worker.put`; only names in `STEP_NAMES` are steps.
    pub fn parse(text: &str) -> Option<Action> {
        let (kind, verb) = text.split_once('.')?;
        let kind = ActorKind::ALL.into_iter().find(|k| k.as_str() == kind)?;
        let verb = Verb::ALL.iter().copied().find(|v| v.as_str() == verb)?;
        let action = Action::new(kind, verb);
        STEP_NAMES.contains(&action).then_some(action)
    }
}

impl Wake {
    /// Reads what `describe` writes; `None` for anything else.
    pub fn parse(text: &str) -> Option<Wake> {
        let words: Vec<&str> = text.split(' ').collect();
        let number = |word: &str| -> Option<u32> {
            (word == "0" || !word.starts_with('0') && !word.starts_with('+'))
                .then(|| word.parse().ok())
                .flatten()
        };
        let wake = match words.as_slice() {
            ["issue", index] => Wake::Issue(number(index)?),
            [call] if call.starts_with("call-") => Wake::Call(CallId::parse(call)?),
            ["timeout", request, send] => Wake::ClientTimeout {
                request: RequestId::parse(request)?,
                send: number(send)?,
            },
            ["continue", actor, incarnation] => Wake::Continue {
                actor: ActorId::parse(actor)?,
                incarnation: number(incarnation)?,
            },
            ["poke", actor] => Wake::Poke(ActorId::parse(actor)?),
            ["broker"] => Wake::Broker,
            ["restart", actor] => Wake::Restart(ActorId::parse(actor)?),
            ["workload"] => Wake::Workload,
            ["housekeeping"] => Wake::Housekeeping,
            _ => return None,
        };
        Some(wake)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actor_names_round_trip() {
        for name in [
            "worker-1",
            "api-12",
            "projector",
            "reconciler",
            "broker",
            "client-3",
        ] {
            assert_eq!(ActorId::parse(name).unwrap().to_string(), name);
        }
        for bad in [
            "worker-0",
            "worker-",
            "worker",
            "projector-1",
            "nobody",
            "worker-01",
        ] {
            assert_eq!(ActorId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn every_step_name_parses_back() {
        for action in STEP_NAMES {
            assert_eq!(Action::parse(&action.to_string()), Some(*action));
        }
        assert_eq!(Action::parse("worker.fly"), None);
        assert_eq!(Action::parse("broker.put"), None);
    }

    /// Every kind of wake reads back from its text; near misses do not.
    #[test]
    fn wakes_read_back_from_their_text() {
        use crate::world::engine::ids::ActorKind;
        let worker = ActorId::new(ActorKind::Worker, 1);
        let wakes = [
            Wake::Issue(0),
            Wake::Call(CallId(3)),
            Wake::ClientTimeout {
                request: RequestId(2),
                send: 1,
            },
            Wake::Continue {
                actor: worker,
                incarnation: 2,
            },
            Wake::Poke(worker),
            Wake::Broker,
            Wake::Restart(worker),
            Wake::Workload,
            Wake::Housekeeping,
        ];
        for wake in wakes {
            assert_eq!(Wake::parse(&wake.describe()), Some(wake));
        }
        for text in [
            "",
            "issue",
            "issue 01",
            "call-0",
            "poke",
            "poke worker-x",
            "broker 1",
        ] {
            assert_eq!(Wake::parse(text), None, "{text}");
        }
    }
}
