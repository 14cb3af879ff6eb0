#!/usr/bin/env bash
# Issue #29's default-job figure: what --overfitting adds to the 10,000-combo default job
# (all 12,870 CSCV splits) on DEVICE (cpu, gpu or auto): RUNS alternating runs without and
# with it (default 5), each timed as a whole process to the microsecond (bash's
# EPOCHREALTIME: the job takes about 0.2 s, so /usr/bin/time's 10 ms steps are too coarse
# for a 10 % goal), with the summary's `backtests` phase (which records the blocks) and
# `overfitting` phase. Prints every run and the medians.
# Usage: bash benchmarks/overfitting_cost.sh [DEVICE] [RUNS]
#   THREADX_BIN: a built threadx (as on a GPU machine, from .gpu/bin); else builds --release.
#   WARM: warm-up runs of each kind before the timed ones (default: 6 for auto, else 1).
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
# Profiles and balance measured first, as a user's later runs would find them: `auto`
# explores each device until it has 3 timings of an operation (the dispatcher's
# min_samples), so it warms up 6 times; cpu and gpu once. WARM overrides.
warm="${WARM:-$([ "$device" = auto ] && echo 6 || echo 1)}"
for _ in $(seq "$warm"); do
    sweep warm --overfitting
    sweep warm
done
# One timed run of `sweep NAME ARGS...`: its wall seconds appended to the file NAME (bash
# 5's EPOCHREALTIME, read without a subshell; date's nanoseconds on an older bash).
timed() {
    local start=${EPOCHREALTIME:-$(date +%s.%N)}
    sweep "$@"
    local end=${EPOCHREALTIME:-$(date +%s.%N)}
    awk -v a="${start/,/.}" -v b="${end/,/.}" 'BEGIN { printf "%.4f\n", b - a }' >>"$dir/$1"
}
# A phase's seconds from the summary of run NAME: {"phase": "...", "s": ...}.
phase() { tr -d ' \n' <"$dir/$1.json" | grep -o "\"phase\":\"$2\",\"s\":[0-9.eE+-]*" | sed 's/.*"s"://'; }
for f in plain with backtests_plain backtests_with overfitting; do : >"$dir/$f"; done
for i in $(seq "$runs"); do
    timed plain
    timed with --overfitting
    phase plain backtests >>"$dir/backtests_plain"
    phase with backtests >>"$dir/backtests_with"
    phase with overfitting >>"$dir/overfitting"
    echo "run $i: without $(tail -1 "$dir/plain") s, with $(tail -1 "$dir/with") s;" \
        "backtests $(tail -1 "$dir/backtests_plain") → $(tail -1 "$dir/backtests_with") s," \
        "overfitting phase $(tail -1 "$dir/overfitting") s"
done
cmp -s "$dir/plain.csv" "$dir/with.csv" && echo "results: the same bytes with and without" || echo "results: DIFFER with and without"
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
plain=$(median "$dir/plain")
with=$(median "$dir/with")
added=$(awk -v a="$plain" -v b="$with" 'BEGIN { printf "%+.1f %%", 100 * (b - a) / a }')
echo "device $device, medians of $runs: without ${plain} s, with ${with} s (${added});" \
    "backtests $(median "$dir/backtests_plain") → $(median "$dir/backtests_with") s," \
    "overfitting phase $(median "$dir/overfitting") s"
