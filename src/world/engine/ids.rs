//! Identifiers. Everything that reaches state, traces or dumps is named by a
//! counter (`task-1`, `outbox-1`) or a stable fact, never by an address or a
//! random id. Inside the world they are small integers; they are rendered as
//! text only for humans and dumps.

use std::fmt;

use crate::task::Text;
use crate::task::json::{Sink, decimal};

/// The kinds of actor in the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ActorKind {
    Client,
    Api,
    Publisher,
    Broker,
    Worker,
    Projector,
    Reconciler,
    Cache,
    Operator,
}

impl ActorKind {
    pub const ALL: [ActorKind; 9] = [
        ActorKind::Client,
        ActorKind::Api,
        ActorKind::Publisher,
        ActorKind::Broker,
        ActorKind::Worker,
        ActorKind::Projector,
        ActorKind::Reconciler,
        ActorKind::Cache,
        ActorKind::Operator,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ActorKind::Client => "client",
            ActorKind::Api => "api",
            ActorKind::Publisher => "publisher",
            ActorKind::Broker => "broker",
            ActorKind::Worker => "worker",
            ActorKind::Projector => "projector",
            ActorKind::Reconciler => "reconciler",
            ActorKind::Cache => "cache",
            ActorKind::Operator => "operator",
        }
    }

    /// Actors with several instances are numbered (`worker-2`); the others
    /// are singletons named by their kind.
    pub fn numbered(self) -> bool {
        matches!(
            self,
            ActorKind::Client | ActorKind::Api | ActorKind::Publisher | ActorKind::Worker
        )
    }

    /// Actors with volatile state that a crash wipes. The broker, the cache
    /// and the operator are durable or outside the pipeline.
    pub fn can_crash(self) -> bool {
        matches!(
            self,
            ActorKind::Client
                | ActorKind::Api
                | ActorKind::Publisher
                | ActorKind::Worker
                | ActorKind::Projector
                | ActorKind::Reconciler
        )
    }

    /// Actors that hold what another may take over once it runs out: a
    /// worker (a task's lease, a message), a publisher (outbox claims), the
    /// reconciler (a fence's lease). What `pause/until-takeover` freezes.
    pub fn holds_leases(self) -> bool {
        matches!(
            self,
            ActorKind::Publisher | ActorKind::Worker | ActorKind::Reconciler
        )
    }
}

/// One actor: its kind and, for numbered kinds, its 0-based index
/// (rendered 1-based: index 0 is `worker-1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ActorId {
    pub kind: ActorKind,
    pub index: u16,
}

impl ActorId {
    pub const BROKER: ActorId = ActorId::single(ActorKind::Broker);
    pub const PROJECTOR: ActorId = ActorId::single(ActorKind::Projector);
    pub const RECONCILER: ActorId = ActorId::single(ActorKind::Reconciler);
    pub const CACHE: ActorId = ActorId::single(ActorKind::Cache);
    pub const OPERATOR: ActorId = ActorId::single(ActorKind::Operator);

    pub const fn single(kind: ActorKind) -> ActorId {
        ActorId { kind, index: 0 }
    }

    pub const fn new(kind: ActorKind, index: u16) -> ActorId {
        ActorId { kind, index }
    }
}

impl fmt::Display for ActorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind.numbered() {
            write!(f, "{}-{}", self.kind.as_str(), self.index + 1)
        } else {
            f.write_str(self.kind.as_str())
        }
    }
}

/// Text built on the stack, then made shared text with one allocation
/// (building a `String` and converting it allocates twice). Text longer
/// than the buffer spills into a `String`.
pub struct TextBuf {
    bytes: [u8; 64],
    len: usize,
    spill: Option<String>,
}

impl TextBuf {
    pub fn new() -> TextBuf {
        TextBuf {
            bytes: [0; 64],
            len: 0,
            spill: None,
        }
    }

    pub fn as_str(&self) -> &str {
        match &self.spill {
            Some(spill) => spill,
            // Only whole `str`s are ever copied in.
            None => std::str::from_utf8(&self.bytes[..self.len]).expect("whole strs"),
        }
    }

    pub fn text(&self) -> Text {
        Text::from(self.as_str())
    }
}

impl Default for TextBuf {
    fn default() -> TextBuf {
        TextBuf::new()
    }
}

impl Sink for TextBuf {
    fn put(&mut self, text: &str) {
        if self.spill.is_none() && self.len + text.len() <= self.bytes.len() {
            self.bytes[self.len..self.len + text.len()].copy_from_slice(text.as_bytes());
            self.len += text.len();
            return;
        }
        let mut spill = self
            .spill
            .take()
            .unwrap_or_else(|| self.as_str().to_string());
        spill.push_str(text);
        self.spill = Some(spill);
    }
}

/// Appends `number` in decimal, without `format!`.
pub fn push_decimal(out: &mut impl Sink, number: u64) {
    let mut digits = [0u8; 20];
    out.put(decimal(&mut digits, number));
}

macro_rules! counter_id {
    ($name:ident, $prefix:literal) => {
        #[doc = concat!("`", $prefix, "-N`, N counting from 1.")]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u32);

        impl $name {
            /// 0-based position in the dense table that holds these rows.
            pub fn slot(self) -> usize {
                (self.0 - 1) as usize
            }

            pub fn parse(text: &str) -> Option<$name> {
                let rest = text.strip_prefix(concat!($prefix, "-"))?;
                if rest.is_empty()
                    || rest.starts_with('0')
                    || !rest.bytes().all(|b| b.is_ascii_digit())
                {
                    return None;
                }
                rest.parse().ok().filter(|n| *n > 0).map($name)
            }

            /// Appends the id's text (`task-12`) without `format!`.
            pub fn push_to(self, out: &mut impl Sink) {
                out.put(concat!($prefix, "-"));
                push_decimal(out, u64::from(self.0));
            }
        }

        impl crate::world::engine::table::Slot for $name {
            fn slot(self) -> usize {
                $name::slot(self)
            }

            fn from_slot(slot: usize) -> $name {
                $name(u32::try_from(slot + 1).expect("a slot of a u32 id"))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut digits = [0u8; 20];
                f.write_str(concat!($prefix, "-"))?;
                f.write_str(decimal(&mut digits, u64::from(self.0)))
            }
        }
    };
}

counter_id!(TaskId, "task");
counter_id!(OutboxId, "outbox");
counter_id!(EntryId, "entry");
counter_id!(IntentId, "intent");
counter_id!(RequestId, "request");
counter_id!(DeadLetterId, "dead-letter");
counter_id!(SignalId, "sig");
counter_id!(CallId, "call");

/// An idempotency key as the maps that look keys up file it: a 64-bit
/// fingerprint of its bytes, then the key itself. The maps are `KeyMap`s,
/// which hash by the fingerprint: a lookup is a probe or two and one
/// compare of the text, where a search ordered by the text compared long
/// shared prefixes (`intent-000123`) at every node.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KeyOf(u64, Text);

impl KeyOf {
    pub fn new(key: &Text) -> KeyOf {
        KeyOf(fingerprint(key.as_bytes()), key.clone())
    }
}

impl std::hash::Hash for KeyOf {
    /// The fingerprint alone: equal keys have equal fingerprints, and it
    /// is already well mixed (see `KeyMap`).
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.0);
    }
}

/// One word into a running fingerprint: rotate, xor, multiply.
pub fn mix_word(state: u64, word: u64) -> u64 {
    (state.rotate_left(5) ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Eight bytes at a time, multiply-rotate, then murmur3's finaliser so
/// that keys differing only in their last digits differ in every bit.
pub fn fingerprint(bytes: &[u8]) -> u64 {
    let mut state = bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        state = mix_word(
            state,
            u64::from_le_bytes(word.try_into().expect("eight bytes")),
        );
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        state = mix_word(state, u64::from_le_bytes(last));
    }
    state ^= state >> 33;
    state = state.wrapping_mul(0xff51_afd7_ed55_8ccd);
    state ^= state >> 33;
    state = state.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    state ^ (state >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_ids_round_trip() {
        assert_eq!(TaskId::parse("task-12"), Some(TaskId(12)));
        assert_eq!(TaskId(12).to_string(), "task-12");
        assert_eq!(EntryId(u32::MAX).to_string(), "entry-4294967295");
        let mut text = String::from("x ");
        DeadLetterId(10).push_to(&mut text);
        push_decimal(&mut text, 0);
        assert_eq!(text, "x dead-letter-100");
        let mut short = TextBuf::new();
        TaskId(7).push_to(&mut short);
        assert_eq!(&*short.text(), "task-7");
        let mut long = TextBuf::new();
        for piece in ["a".repeat(40), "b".repeat(30), "c".repeat(5)] {
            long.put(&piece);
        }
        assert_eq!(
            &*long.text(),
            format!("{}{}ccccc", "a".repeat(40), "b".repeat(30))
        );
        assert_eq!(TaskId::parse("task-0"), None);
        assert_eq!(OutboxId::parse("task-1"), None);
    }
}
