#!/usr/bin/env bash
# Issue #48's table: the same sweeps on --device cpu, gpu and all as whole processes, side
# by side in one run, with the hand-written numba.cuda peer (../shared/peers/gpu_numba_cuda.py,
# which ../shared/gpu/prepare.sh copies into .gpu/) on the same CSV and grid where
# numba.cuda can run. Every run's results are compared byte for byte with the CPU's.
#
# Usage: bash benchmarks/gpu_speed.sh BIN_DIR [--quick]
#   BIN_DIR  the folder holding a threadx binary (target/release, or .gpu/bin on the GPU machine)
#   --quick  small sizes that run on lavapipe in CI time (what CI runs; the figures then say
#            nothing of GPU speed, the byte comparisons still hold)
# The full run (the default job; 2.9M combos x 960 bars; 10,800 and 108,000 combos x 1M
# bars; issue #51's market-kernel sweeps of trend_trail and bb_long_short, 100,000 combos x
# 1M bars each) ends within 10 minutes on an H100 machine, RUN_LIMIT=90. Nothing is written outside a scratch folder.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bash benchmarks/gpu_speed.sh BIN_DIR [--quick]" >&2; exit 2; }
bin="$(cd "$1" && pwd)/threadx"
[ -x "$bin" ] || { echo "gpu_speed.sh: no threadx binary in $1" >&2; exit 2; }
quick=false
[ "${2:-}" = "--quick" ] && quick=true
# Each threadx process gets at most this many seconds (a GPU that hangs is a row, not a lost run).
limit="${RUN_LIMIT:-240}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Profiles of this run only: nothing measured before decides anything here.
export THREADX_GPU_THRESHOLD_PATH="$work/thresholds.json" THREADX_MULTIGPU_PROFILE_PATH="$work/multigpu.json"
unset THREADX_DEVICE THREADX_ADAPTER

peer=""
for p in "${PEER:-}" "$here/../.gpu/gpu_numba_cuda.py" "$here/../../shared/peers/gpu_numba_cuda.py"; do
    if [ -n "$p" ] && [ -f "$p" ]; then peer="$p"; break; fi
done
if [ -n "$peer" ] && ! python3 -c 'from numba import cuda; assert cuda.is_available()' 2>/dev/null; then
    peer=""
fi

now() { date +%s%N; }
# name | bars (0: the built-in default data) | threadx grid flags | peer grid name
if $quick; then
    workloads=(
        "short grid|2000|--grid bb_period=10:30:10 --grid bb_std=1.5,2.5 --grid atr_period=7,14 --grid atr_mult=1:3:1|"
        "long data|100000|--grid bb_period=10,20 --grid bb_std=2 --grid atr_period=14 --grid atr_mult=1:3:1|"
        "trend_trail (market kernel)|20000|--strategy $here/../examples/strategies/trend_trail.toml --grid fast=5,10 --grid slow=40,60 --grid trail_mult=2,3|"
        "bb_long_short (market kernel)|20000|--strategy $here/../examples/strategies/bb_long_short.toml --grid bb_period=10,20 --grid bb_std=2 --grid atr_mult=1,2|"
    )
else
    workloads=(
        "default job, 10,000 x 35,040|0||"
        "2.9M combos x 960 bars|960|--grid bb_period=5:104:1 --grid bb_std=1:3:0.1 --grid atr_period=5:34:1 --grid atr_mult=1:5.5:0.1|big"
        "10,800 combos x 1M bars|1000000|--grid bb_period=10:105:5 --grid bb_std=1:3:0.25 --grid atr_period=5:30:5 --grid atr_mult=0.5:5:0.5|large"
        "108,000 combos x 1M bars|1000000|--grid bb_period=10:105:5 --grid bb_std=1:3:0.25 --grid atr_period=5:30:5 --grid atr_mult=0.1:10:0.1|xl"
        "trend_trail 100,000 x 1M (market kernel)|1000000|--strategy $here/../examples/strategies/trend_trail.toml --grid fast=1:50:1 --grid slow=60:255:5 --grid trail_mult=0.2:10:0.2|"
        "bb_long_short 100,000 x 1M (market kernel)|1000000|--strategy $here/../examples/strategies/bb_long_short.toml --grid bb_period=10:59:1 --grid bb_std=1:2.95:0.05 --grid atr_mult=0.2:10:0.2|"
    )
fi

rows="$work/rows.tsv"
: > "$rows"
for w in "${workloads[@]}"; do
    IFS='|' read -r name bars grid peer_grid <<< "$w"
    data=()
    if [ "$bars" != 0 ]; then
        csv="$work/bars-$bars.csv"
        [ -f "$csv" ] || "$bin" data synth --bars "$bars" --seed 1 --out "$csv" >/dev/null
        data=(--data "$csv")
    fi
    for device in cpu gpu all; do
        out="$work/$device.csv"
        started=$(now)
        # One run that fails or passes the limit is a row saying so; the others still run,
        # and the script fails at the end.
        # shellcheck disable=SC2086 # the grid flags are words
        if ! timeout "$limit" "$bin" --device "$device" sweep "${data[@]}" $grid --quiet --heatmap /dev/null \
            --out "$out" > "$work/$device.log" 2>&1; then
            echo "gpu_speed.sh: $name on --device $device failed or passed ${limit} s:" >&2
            tail -5 "$work/$device.log" >&2
            printf '%s\t%s\t%s\t%s\t0\t0\t0\t0\t0\tFAILED\n' "$name" "$device" "$limit" "$limit" >> "$rows"
            continue
        fi
        wall=$(( $(now) - started ))
        echo "gpu_speed.sh: $name, --device $device: $(( wall / 1000000 )) ms" >&2
        same="-"
        if [ "$device" != cpu ]; then
            if cmp -s "$work/cpu.csv" "$out"; then same="same bytes"; else same="DIFFER"; fi
        fi
        python3 - "$work/${device}.json" "$name" "$device" "$wall" "$same" >> "$rows" <<'EOF'
import json, sys
path, name, device, wall_ns, same = sys.argv[1:]
s = json.load(open(path))
phase = {p["phase"]: p["s"] for p in s.get("phases", {}).get("phases", [])}
workers = s.get("workers", {})
gpu = [w for n, w in workers.items() if n.startswith("gpu")]
kernel = sum(w.get("kernel_s", 0) for w in gpu if isinstance(w.get("kernel_s"), (int, float)))
share = sum(w.get("share", 0) for w in gpu)
dispatches = sum(w.get("dispatches", 0) for w in gpu)
combos, bars = s["combos"]["positions"], s["data"]["bars"]
print("\t".join(map(str, [name, device, int(wall_ns) / 1e9, phase.get("backtests", float("nan")),
                          kernel, share, dispatches, combos, bars, same])))
EOF
    done
    if [ "$bars" != 0 ] && [ -n "$peer" ] && [ -n "$peer_grid" ]; then
        timeout "$limit" python3 "$peer" "$bars" "$peer_grid" --data "$csv" > "$work/peer.json" || true
        python3 - "$work/peer.json" "$name" >> "$rows" <<'EOF'
import json, sys
try:
    p = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit(0)  # the peer failed: no row
print("\t".join(map(str, [sys.argv[2], "numba.cuda", p["seconds"], p["seconds"], p["seconds"], 1.0, 1, p["combos"], p["bars"], "-"])))
EOF
    fi
    rm -f "$work"/cpu.csv "$work"/gpu.csv "$work"/all.csv
done

echo "threadx: $bin ($("$bin" --version 2>/dev/null || echo unknown))"
"$bin" devices 2>/dev/null | sed -n '2,3p' || true
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
echo "host: $(nproc) cores; peer: ${peer:-none (numba.cuda not importable or no GPU)}"
python3 - "$rows" <<'EOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
print(f"{'workload':30} {'device':10} {'wall s':>8} {'backtests s':>11} {'kernel s':>9} {'gpu share':>9} "
      f"{'dispatches':>10} {'vs cpu':>7} {'bar*combos/s':>13}  results")
cpu, gpu = {}, {}
notes = []
for name, device, wall, backtests, kernel, share, dispatches, combos, bars, same in rows:
    wall, backtests, kernel = float(wall), float(backtests), float(kernel)
    if device == "cpu":
        cpu[name] = (wall, backtests)
    if device == "gpu":
        gpu[name] = backtests
    if device == "all" and name in cpu and name in gpu and backtests > 0:
        # --device all against the sum of each device's own throughput (goal: >= 0.9).
        alone = 1 / cpu[name][1] + 1 / gpu[name]
        notes.append(f"{name}: --device all runs the backtests at {(1 / backtests) / alone:.2f} of cpu + gpu alone")
    base = cpu.get(name)
    # The peer is timed on its kernel and transfers: compare it with the backtests phase.
    ratio = (base[1] / backtests if device == "numba.cuda" else base[0] / wall) if base else float("nan")
    work = float(bars) * float(combos)
    rate = work / kernel if kernel > 0 else work / backtests if backtests > 0 else float("nan")
    print(f"{name:30} {device:10} {wall:8.3f} {backtests:11.3f} {kernel:9.3f} {float(share):9.1%} "
          f"{dispatches:>10} {ratio:6.2f}x {rate:13.3g}  {same}")
for note in notes:
    print(note)
bad = [r for r in rows if r[-1] in ("DIFFER", "FAILED")]
if bad:
    sys.exit(f"results differ from the CPU's or failed: {[(r[0], r[1], r[-1]) for r in bad]}")
EOF
