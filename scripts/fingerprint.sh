#!/usr/bin/env bash
# The behaviour fingerprint: what a refactoring must leave unchanged. Prints
# one line per probe (a scenario's dump, a fuzz range's summary, a mutant's
# failures) with the SHA-256 of its output, wall-clock seconds removed.
# Usage: scripts/fingerprint.sh [SIM]   (default ./target/release/sim)
# Compare two builds with: diff <(scripts/fingerprint.sh old/sim) <(scripts/fingerprint.sh new/sim)
set -euo pipefail
sim=${1:-./target/release/sim}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
strip() { grep -v '"seconds"'; }
for file in scenarios/*.toml scenarios/*/*.toml; do
  "$sim" run "$file" --quiet --dump "$tmp/dump.json" >/dev/null 2>&1 || true
  printf '%s %s\n' "$(sha256sum <"$tmp/dump.json" | cut -c1-16)" "$file"
  rm -f "$tmp/dump.json"
done
for start in $(seq 1 20 281); do
  out=$("$sim" fuzz --seed "$start" --runs 20 --steps 10000 --jobs 2 --json --quiet --out "$tmp" 2>/dev/null | strip || true)
  printf '%s fuzz seeds %s..%s\n' "$(sha256sum <<<"$out" | cut -c1-16)" "$start" "$((start + 19))"
done
for mutant in $("$sim" mutants | awk '$1 ~ /^[a-z][a-z-]*$/ {print $1}'); do
  out=$("$sim" fuzz --seed 1 --runs 8 --steps 10000 --jobs 2 --json --quiet --mutant "$mutant" --out "$tmp" 2>/dev/null | strip || true)
  printf '%s mutant %s\n' "$(sha256sum <<<"$out" | cut -c1-16)" "$mutant"
done
