#!/usr/bin/env bash
# What a fuzz campaign never runs: builds sim with LLVM source coverage,
# runs the campaign of tests/detect.rs (300 seeds x 10^4 steps, one thread)
# and prints, for the protocol's files (src/world/actors, src/world/stores,
# src/task), the lines the campaign executed and every line it did not.
# A bug on a line never run cannot be caught by any invariant: this is the
# blind-spot list that mutation testing samples, measured whole.
# Needs the toolchain's llvm-tools (`rustup component add llvm-tools`) and
# python3. Runs from the repository whatever the current directory.
# Usage: scripts/coverage.sh [SEEDS] [STEPS]   (default 300 10000)
# Prints the summary on stdout; the full listing is in target/coverage/uncovered.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd -P)
if ! command -v python3 >/dev/null; then
  echo "coverage.sh: python3 not found; it lists the lines" >&2
  exit 2
fi
seeds=${1:-300}
steps=${2:-10000}
bin=$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin
for tool in llvm-profdata llvm-cov; do
  if [ ! -x "$bin/$tool" ]; then
    echo "coverage.sh: $bin/$tool not found; run: rustup component add llvm-tools" >&2
    exit 2
  fi
done
out=target/coverage
mkdir -p "$out"
rm -f "$out"/*.profraw
# Build scripts run instrumented too: their profiles go with the rest.
LLVM_PROFILE_FILE="$root/$out/build-%p.profraw" \
  RUSTFLAGS="-C instrument-coverage" CARGO_PROFILE_RELEASE_LTO=false \
  CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
  cargo build --release --quiet --target-dir "$out/build"
sim="$out/build/release/sim"
# A seed that fails still counts its lines; its reproducer goes to $out.
LLVM_PROFILE_FILE="$root/$out/fuzz-%p.profraw" \
  "$sim" fuzz --seed 1 --runs "$seeds" --steps "$steps" --jobs 1 --no-shrink --quiet \
  --out "$out" >"$out/fuzz.txt" ||
  echo "coverage.sh: the campaign reported failures; see $out/fuzz.txt" >&2
rm -f "$out"/build-*.profraw
"$bin/llvm-profdata" merge -sparse "$out"/fuzz-*.profraw -o "$out/fuzz.profdata"
"$bin/llvm-cov" export -format=lcov "$sim" -instr-profile="$out/fuzz.profdata" >"$out/fuzz.lcov"
python3 - "$out/fuzz.lcov" "$root/src/" "$out/uncovered.txt" <<'EOF'
"""Per-file executed lines of the protocol, and every line not executed."""
import sys
lcov, root, listing = sys.argv[1], sys.argv[2], sys.argv[3]
# The protocol's files; a named mutant's hooks run only with --mutant.
IN_SCOPE = ("world/actors/", "world/stores/", "task/")
hits, current = {}, None
for line in open(lcov):
    if line.startswith("SF:"):
        path = line[3:].strip()
        rel = path[len(root):] if path.startswith(root) else None
        current = rel if rel and rel.startswith(IN_SCOPE) and "mutant_hooks" not in rel else None
        if current:
            hits.setdefault(current, {})
    elif line.startswith("DA:") and current:
        number, count = line[3:].strip().split(",")[:2]
        hits[current][int(number)] = hits[current].get(int(number), 0) + int(count)
if not hits:
    sys.exit(f"coverage.sh: no line of {root} in the profile: were the sources moved?")
total = run = 0
with open(listing, "w") as out:
    for path in sorted(hits):
        lines = hits[path]
        missed = sorted(n for n, c in lines.items() if c == 0)
        total += len(lines)
        run += len(lines) - len(missed)
        print(f"{len(lines) - len(missed):6d} / {len(lines):5d}  {path}")
        if missed:
            source = open(root + path).read().split("\n")
            out.write(f"== src/{path}\n")
            for n in missed:
                out.write(f"{n:6d}| {source[n - 1]}\n")
print(f"{run:6d} / {total:5d}  lines of the protocol run by the campaign ({100 * run / total:.1f}%)")
EOF
echo "lines never run: $out/uncovered.txt"
