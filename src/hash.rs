//! SHA-256 helpers: digests as fixed arrays, hex rendering, and the one
//! canonical-JSON hashing rule (keys sorted at every depth) every hash uses.

use sha2::{Digest, Sha256};

/// A SHA-256 digest. Kept as bytes on the hot path; rendered as lowercase hex
/// only where a human or a dump sees it.
pub type Sha = [u8; 32];

pub fn sha256(bytes: &[u8]) -> Sha {
    sha256_of_parts(&[bytes])
}

/// The SHA-256 of `parts` one after another, without joining them first.
pub fn sha256_of_parts(parts: &[&[u8]]) -> Sha {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize().into()
}

/// Lowercase hex digits by value.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// Lowercase hex of any byte string.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_hex(&mut out, bytes);
    out
}

/// Appends lowercase hex to `out` without allocating a temporary.
pub fn push_hex(out: &mut String, bytes: &[u8]) {
    for byte in bytes {
        let [high, low] = hex_pair(*byte);
        out.push(char::from(high));
        out.push(char::from(low));
    }
}

/// Both lowercase hex digits of `byte`: one table lookup.
pub fn hex_pair(byte: u8) -> [u8; 2] {
    HEX_PAIRS[usize::from(byte)]
}

/// Both lowercase digits of every byte value, so a byte is one lookup.
const HEX_PAIRS: [[u8; 2]; 256] = {
    let mut pairs = [[0u8; 2]; 256];
    let mut byte = 0;
    while byte < 256 {
        pairs[byte] = [HEX[byte >> 4], HEX[byte & 0xf]];
        byte += 1;
    }
    pairs
};

/// Lowercase hex of a digest into a fixed buffer (no allocation).
pub fn hex_into(bytes: &Sha, out: &mut [u8; 64]) {
    for (pair, byte) in out.as_chunks_mut::<2>().0.iter_mut().zip(bytes) {
        *pair = hex_pair(*byte);
    }
}

/// Lowercase hex of a digest as shared text, built in place (one
/// allocation, the text's own).
pub fn hex_text(bytes: &Sha) -> crate::task::Text {
    let mut out = [0u8; 64];
    hex_into(bytes, &mut out);
    std::str::from_utf8(&out).expect("hex is ASCII").into()
}

/// Parses 64 lowercase or uppercase hex digits.
pub fn parse_sha_hex(text: &str) -> Option<Sha> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (index, pair) in bytes.chunks_exact(2).enumerate() {
        let high = (pair[0] as char).to_digit(16)?;
        let low = (pair[1] as char).to_digit(16)?;
        out[index] = (high * 16 + low) as u8;
    }
    Some(out)
}

/// Whether `text` is the hex of `sha`, as `parse_sha_hex(text) ==
/// Some(*sha)` judges it (64 digits, either case), without building the
/// parsed hash: the lowercase rendering is compared at once, and only text
/// that differs from it is parsed.
pub fn hex_is(text: &str, sha: &Sha) -> bool {
    let mut lower = [0u8; 64];
    hex_into(sha, &mut lower);
    text.as_bytes() == lower || parse_sha_hex(text) == Some(*sha)
}

/// Canonical JSON: object keys sorted (byte order) at every depth, no
/// whitespace. serde_json's `Value` map is a `BTreeMap` (the
/// `preserve_order` feature is off), so its compact rendering is already
/// canonical; this function exists so every caller states the rule once.
pub fn canonical_json(value: &serde_json::Value) -> String {
    serde_json::to_string(value).expect("a serde_json::Value always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_empty_input_is_the_known_digest() {
        assert_eq!(
            hex(&sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn hex_into_matches_hex() {
        let digest = sha256(b"sim");
        let mut out = [0u8; 64];
        hex_into(&digest, &mut out);
        assert_eq!(std::str::from_utf8(&out).unwrap(), hex(&digest));
    }

    #[test]
    fn hex_round_trips() {
        let digest = sha256(b"sim");
        assert_eq!(parse_sha_hex(&hex(&digest)), Some(digest));
        assert_eq!(parse_sha_hex("zz"), None);
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let value = serde_json::json!({"b": 1, "a": {"d": [ {"z": 1, "y": 2} ], "c": null}});
        assert_eq!(
            canonical_json(&value),
            r#"{"a":{"c":null,"d":[{"y":2,"z":1}]},"b":1}"#
        );
    }
}
