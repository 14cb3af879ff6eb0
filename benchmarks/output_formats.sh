#!/usr/bin/env bash
# Issue #31's output figures: the 2.9M-combo reference grid (cargo xtask reference's big
# grid: 960 bars, 100 bb_period × 29 bb_std × 25 atr_period × 40 atr_mult) as whole
# processes writing CSV, Parquet and Arrow, timed by hyperfine; then the files' sizes.
# Usage: bash benchmarks/output_formats.sh [RUNS]   (needs hyperfine; builds --release)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
cargo build --release -q -p threadx
bin="$PWD/target/release/threadx"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
export THREADX_GPU_THRESHOLD_PATH="$dir/profile.json"
sweep="$bin --device cpu sweep --data synthetic:bars=960,seed=1 --grid bb_period=5:104:1 --grid bb_std=1:3.8:0.1 \
--grid atr_period=5:29:1 --grid atr_mult=0.5:10.25:0.25 --quiet --heatmap /dev/null"
hyperfine -N -w 1 -r "$runs" \
    -n csv "$sweep --out $dir/r.csv" \
    -n parquet "$sweep --out $dir/r.parquet" \
    -n arrow "$sweep --out $dir/r.arrow"
ls -l "$dir"/r.csv "$dir"/r.parquet "$dir"/r.arrow
