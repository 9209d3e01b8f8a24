#!/bin/sh
# For every named mutant: fuzz until caught (seeds 1..100, 10,000 steps,
# first failing seed), then shrink that seed's reproducer, and print one
# line per mutant: requests/faults before -> after, lines, seconds, and
# whether the shrunk scenario still breaks what the fuzz run broke (the
# invariant column; usually the mutant's own).
#   scripts/shrink-mutants.sh [SIM] [SHRINK_SECONDS]
set -eu
SIM=${1:-target/release/sim}
BUDGET=${2:-60}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
{ "$SIM" invariants | awk '{print $1}'; echo converges; } >"$WORK/ids"
printf '%-30s %-34s %5s %16s %16s %12s %7s %s\n' mutant invariant seed requests faults lines seconds ok
for mutant in $("$SIM" mutants | awk '{print $1}'); do
    expected=$("$SIM" mutants | grep "^$mutant " | tr ' ' '\n' | grep -Fx -f "$WORK/ids" | head -1)
    dir="$WORK/$mutant"
    "$SIM" fuzz --mutant "$mutant" --seed 1 --runs 100 --steps 10000 --stop-at-first --no-shrink --quiet --out "$dir" >/dev/null 2>&1 || true
    full=$(ls "$dir"/repro-*.toml 2>/dev/null | sort -t- -k2 -n | head -1)
    if [ -z "$full" ]; then
        printf '%-30s %-34s not caught\n' "$mutant" "$expected"
        continue
    fi
    seed=$(basename "$full" .toml | sed 's/repro-//')
    start=$(date +%s.%N)
    "$SIM" shrink "$full" --time "$BUDGET" --quiet --out "$dir/shrunk.toml" 2>"$dir/shrink.err" || true
    end=$(date +%s.%N)
    seconds=$(echo "$end - $start" | bc)
    before_r=$(grep -c '^\[\[requests\]\]' "$full" || true)
    before_f=$(grep -c '^\[\[faults\]\]' "$full" || true)
    after_r=$(grep -c '^\[\[requests\]\]' "$dir/shrunk.toml" || true)
    after_f=$(grep -c '^\[\[faults\]\]' "$dir/shrunk.toml" || true)
    lines_b=$(wc -l <"$full")
    lines_a=$(wc -l <"$dir/shrunk.toml")
    # What a scenario breaks: its violation, or `converges`.
    breaks() { "$SIM" run "$1" --quiet 2>/dev/null | awk '/^violations/ && $2 != "none" {print $2} /^converged +NO/ {print "converges"}' | head -1; }
    caught=$(breaks "$full")
    ok=no
    [ "$(breaks "$dir/shrunk.toml")" = "$caught" ] && ok=yes
    capped=""
    grep -q 'time cap' "$dir/shrink.err" && capped=" (time cap)"
    printf '%-30s %-34s %5s %7s -> %-5s %6s -> %-4s %5s -> %-4s %7.1f %s%s\n' \
        "$mutant" "$caught" "$seed" "$before_r" "$after_r" "$before_f" "$after_f" "$lines_b" "$lines_a" "$seconds" "$ok" "$capped"
done
