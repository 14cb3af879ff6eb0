#!/usr/bin/env bash
# Issue #29's default-job figure: what --overfitting adds to the 10,000-combo default job
# (all 12,870 CSCV splits) on DEVICE (cpu, gpu or auto): RUNS alternating runs without and
# with it (default 5), each timed by /usr/bin/time as a whole process, with the summary's
# `overfitting` phase. Prints every run and the medians.
# Usage: bash benchmarks/overfitting_cost.sh [DEVICE] [RUNS]
#   THREADX_BIN: a built threadx (as on a GPU machine, from .gpu/bin); else builds --release.
set -euo pipefail
cd "$(dirname "$0")/.."
device="${1:-cpu}"
runs="${2:-5}"
if [ -n "${THREADX_BIN:-}" ]; then
    bin="$THREADX_BIN"
else
    cargo build --release -q -p threadx
    bin="$PWD/target/release/threadx"
fi
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
export THREADX_GPU_THRESHOLD_PATH="$dir/thresholds.json" THREADX_MULTIGPU_PROFILE_PATH="$dir/multigpu.json"
sweep() { "$bin" --device "$device" sweep --quiet --out "$dir/$1.csv" "${@:2}" >/dev/null; }
# Profiles and balance measured once, as a user's second run would find them.
sweep warm --overfitting
sweep warm
: >"$dir/plain" && : >"$dir/with" && : >"$dir/phase"
for i in $(seq "$runs"); do
    /usr/bin/time -f "%e" -a -o "$dir/plain" "$bin" --device "$device" sweep --quiet --out "$dir/plain.csv" >/dev/null
    /usr/bin/time -f "%e" -a -o "$dir/with" "$bin" --device "$device" sweep --quiet --overfitting --out "$dir/with.csv" >/dev/null
    # The summary's phases: {"phase": "overfitting", "s": ...}.
    tr -d ' \n' <"$dir/with.json" | grep -o '"phase":"overfitting","s":[0-9.eE+-]*' | sed 's/.*"s"://' >>"$dir/phase"
    echo "run $i: without $(tail -1 "$dir/plain") s, with $(tail -1 "$dir/with") s, overfitting phase $(tail -1 "$dir/phase") s"
done
cmp -s "$dir/plain.csv" "$dir/with.csv" && echo "results: the same bytes with and without" || echo "results: DIFFER with and without"
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
plain=$(median "$dir/plain")
with=$(median "$dir/with")
echo "device $device, medians of $runs: without ${plain} s, with ${with} s ($(awk -v a="$plain" -v b="$with" 'BEGIN { printf "%+.0f %%", 100 * (b - a) / a }')), overfitting phase $(median "$dir/phase") s"
