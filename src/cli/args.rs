//! Parsers for flag values that several commands share: a mutant's name,
//! a shard `I/N`, a cancel policy.

use crate::mutants::Mutant;
use crate::task::Policy;

pub(crate) fn parse_mutant(text: &str) -> Result<Mutant, String> {
    Mutant::parse(text).ok_or_else(|| "unknown mutant; `sim mutants` lists them".to_string())
}

pub(crate) fn parse_shard(text: &str) -> Result<(u64, u64), String> {
    let (index, count) = text.split_once('/').ok_or("expected I/N, like 0/4")?;
    let index: u64 = index
        .parse()
        .map_err(|_| "expected I/N with integers, like 0/4")?;
    let count: u64 = count
        .parse()
        .map_err(|_| "expected I/N with integers, like 0/4")?;
    if count == 0 || index >= count {
        return Err("expected 0 <= I < N".into());
    }
    Ok((index, count))
}

pub(crate) fn parse_policy(text: &str) -> Result<Policy, String> {
    Policy::parse(text).ok_or_else(|| "expected `completion-wins` or `cancel-wins`".to_string())
}
