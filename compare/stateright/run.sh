#!/bin/sh
# Build (release) and run the stateright model: tasks=2 faults=2 by
# default (or ./run.sh TASKS FAULTS), three times on 1 thread, then three
# times on 2 threads, one line per run.
set -eu
cd "$(dirname "$0")"
TASKS=${1:-2}
FAULTS=${2:-2}
TARGET=${CARGO_TARGET_DIR:-target}
cargo build --release --quiet --target-dir "$TARGET"
for threads in 1 2; do
  for _ in 1 2 3; do
    "$TARGET/release/sim-stateright-compare" --tasks "$TASKS" --faults "$FAULTS" --threads "$threads"
  done
done
