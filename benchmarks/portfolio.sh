#!/usr/bin/env bash
# Issue #52's portfolio figure: N synthetic symbols (default 100, each 35,040 bars of its
# own seed, Parquet) swept with bb_atr's built-in 10,000-combo grid as one account per
# combo (`sweep --portfolio`), against the same universe run as independent accounts
# (`sweep` over the folder: each symbol its own account), both as whole processes under
# /usr/bin/time: symbol·bar·combos per second of wall time, and the ratio (the issue asks
# the portfolio for >= 25 % of the independent accounts' throughput).
# Usage: bash benchmarks/portfolio.sh [SYMBOLS] [BARS] [GRID...]
#   (builds --release; GRID: --grid flags for a smaller run, e.g. --grid bb_period=10:40:10)
set -euo pipefail
cd "$(dirname "$0")/.."
symbols="${1:-100}"
bars="${2:-35040}"
shift $(($# < 2 ? $# : 2))
grid=("$@")
cargo build --release -q -p threadx
bin="$PWD/target/release/threadx"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
export THREADX_GPU_THRESHOLD_PATH="$dir/profile.json" THREADX_MULTIGPU_PROFILE_PATH="$dir/multigpu.json"
mkdir "$dir/data"
for i in $(seq 0 $((symbols - 1))); do
    "$bin" data synth --bars "$bars" --seed "$i" --out "$(printf '%s/data/S%03d.parquet' "$dir" "$i")" >/dev/null
done
run() { # name, then the sweep's own flags; prints "wall rss rows"
    local name="$1"
    shift
    /usr/bin/time -f "%e %M" -o "$dir/time" "$bin" --device cpu sweep --data "$dir/data" "${grid[@]}" \
        --out "$dir/$name.csv" --quiet "$@" >/dev/null
    read -r wall rss <"$dir/time"
    echo "$wall $rss $(($(wc -l <"$dir/$name.csv") - 1))"
}
independent=$(run independent)
portfolio=$(run portfolio --portfolio --size 0.1 --init-cash 100000)
python3 - "$independent" "$portfolio" "$symbols" "$bars" <<'PY'
import sys
(w1, m1, r1), (w2, m2, r2) = (tuple(map(float, a.split())) for a in sys.argv[1:3])
symbols, bars = int(sys.argv[3]), int(sys.argv[4])
combos = r2  # one row per combo; the independent run writes a row per symbol and combo
assert r1 == symbols * combos, (r1, symbols, combos)
print(f"{symbols} symbols x {bars:,} bars x {combos:,.0f} combos, --device cpu, whole processes")
print(f"{'run':<22} {'wall':>8} {'symbol·bar·combos/s':>22} {'peak RSS':>10}")
for name, wall, rss in (("independent accounts", w1, m1), ("one account (--portfolio)", w2, m2)):
    print(f"{name:<22} {wall:>7.2f}s {symbols * bars * combos / wall:>22,.0f} {rss / 1024:>8.1f}MB")
print(f"the portfolio keeps {100 * w1 / w2:.1f} % of the independent accounts' throughput (the issue asks >= 25 %)")
PY
