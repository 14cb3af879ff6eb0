#!/usr/bin/env bash
# Issue #31's universe figure: N synthetic symbols (default 100, each 35,040 bars of its
# own seed, Parquet) swept with bb_atr's built-in 10,000-combo grid in one process,
# against one of them alone: bar·combos per second of wall time and peak RSS, each
# measured by /usr/bin/time as a whole process (one symbol: the median of 5 runs).
# Usage: bash benchmarks/universe.sh [SYMBOLS] [DEVICE]   (builds --release; DEVICE cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
symbols="${1:-100}"
device="${2:-cpu}"
bars=35040
combos=10000
cargo build --release -q -p threadx
bin="$PWD/target/release/threadx"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
export THREADX_GPU_THRESHOLD_PATH="$dir/profile.json"
mkdir "$dir/data"
for i in $(seq 0 $((symbols - 1))); do
    "$bin" data synth --bars "$bars" --seed "$i" --out "$(printf '%s/data/S%03d.parquet' "$dir" "$i")" >/dev/null
done
# Balance and profiles measured once before the timed runs (as a user's second run).
"$bin" --device "$device" sweep --data "$dir/data/S000.parquet" --out "$dir/warm.csv" --quiet >/dev/null
run() { # name, the sweep's --data and --out, the symbols, the runs (the median's wall is kept)
    local name="$1" data="$2" out="$3" n="$4" runs="$5"
    : >"$dir/times"
    for _ in $(seq "$runs"); do
        rm -f "$out"
        /usr/bin/time -f "%e %M" -a -o "$dir/times" "$bin" --device "$device" sweep --data "$data" --out "$out" --quiet >/dev/null
    done
    read -r wall rss < <(sort -n "$dir/times" | sed -n "$(((runs + 1) / 2))p")
    rate=$(python3 -c "print(f'{$n * $bars * $combos / $wall:,.0f}')")
    printf '%-12s %8s s  %15s bar·combos/s  peak RSS %8.1f MB\n' "$name" "$wall" "$rate" "$(python3 -c "print($rss/1024)")" >&2
    echo "$wall $rss"
}
one=$(run "1 symbol" "$dir/data/S000.parquet" "$dir/one.csv" 1 5)
all=$(run "$symbols symbols" "$dir/data" "$dir/all.csv" "$symbols" 1)
python3 - "$one" "$all" "$symbols" <<'EOF'
import sys
w1, m1 = map(float, sys.argv[1].split())
wn, mn = map(float, sys.argv[2].split())
n = int(sys.argv[3])
print(f"throughput kept: {100 * (n / wn) / (1 / w1):.1f} % of one symbol's; peak memory {mn / m1:.2f}x one symbol's")
EOF
