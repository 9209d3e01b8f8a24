#!/bin/sh
# sim check and the stateright model measured in the same run, one line
# each: unique states, seconds, unique states per second. Builds both
# (release). Each workload runs on 1 thread, then 2.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
(cd "$root" && cargo build --release --quiet)
(cd "$here" && cargo build --release --quiet --target-dir "${CARGO_TARGET_DIR:-target}")
sim="$root/target/release/sim"
model="$here/${CARGO_TARGET_DIR:-target}/release/sim-stateright-compare"
uptime
summary=$(cat <<'PY'
import json, sys
d = json.load(sys.stdin)
rate = d["uniqueStates"] / d["seconds"]
print("sim-check", " ".join(sys.argv[1:]),
      "unique_states=%d transitions=%d max_depth=%d seconds=%.3f unique_states_per_s=%.0f exhausted=%s"
      % (d["uniqueStates"], d["transitions"], d["maxDepth"], d["seconds"], rate,
         str(d["exhausted"]).lower()))
PY
)
check() {
  "$sim" check "$@" --json | python3 -c "$summary" "$@"
}
for jobs in 1 2; do
  check "$root/scenarios/happy-path.toml" --faults 2 --early 0 --jobs "$jobs"
  check "$here/two-tasks.toml" --faults 1 --early 0 --jobs "$jobs"
done
for threads in 1 2; do
  "$model" --tasks 2 --faults 3 --threads "$threads"
  "$model" --tasks 3 --faults 2 --threads "$threads"
done
