#!/usr/bin/env bash
# Issue #29's last goal on a GPU machine, in one run: what --overfitting adds to the
# default job with CSCV's screen on the GPU, on the same machine's CPU, and as `auto`
# picks; that the statistics and rows are the same bytes on both; and the CSCV benches.
# Usage (on the GPU machine, from the project root, after .gpu/run.sh's loader setup):
#   bash benchmarks/gpu_overfitting.sh BIN_DIR [RUNS]
#   BIN_DIR: where shared/gpu/prepare.sh put threadx and the bench-* binaries (.gpu/bin).
# Everything goes to stdout; docs/performance.md says how the figures were read.
set -uo pipefail
cd "$(dirname "$0")/.."
bin_dir="$(cd "$1" && pwd)"
runs="${2:-7}"
threadx="$bin_dir/threadx"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
echo "cores: $(nproc)"
"$threadx" devices

echo "== the same bytes: the default job with --overfitting on cpu and on gpu"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
for device in cpu gpu; do
    THREADX_GPU_THRESHOLD_PATH="$dir/t.json" THREADX_MULTIGPU_PROFILE_PATH="$dir/m.json" \
        "$threadx" --device "$device" sweep --quiet --overfitting --out "$dir/$device.csv" >/dev/null
    if command -v python3 >/dev/null; then
        # The summary's `overfitting` object without its `seconds`.
        python3 -c 'import json, sys; o = json.load(open(sys.argv[1]))["overfitting"]; o.pop("seconds"); print(json.dumps(o, sort_keys=True))' \
            "$dir/$device.json" >"$dir/$device.overfitting"
    else
        # Without Python, the two plots: drawn from every split's logit, best and ratios.
        cat "$dir/$device-pbo.svg" "$dir/$device-oos.svg" >"$dir/$device.overfitting"
    fi
done
cmp -s "$dir/cpu.csv" "$dir/gpu.csv" && echo "rows: identical bytes" || echo "rows: DIFFER"
what=$(command -v python3 >/dev/null && echo "overfitting object" || echo "overfitting plots (no python3 here)")
cmp -s "$dir/cpu.overfitting" "$dir/gpu.overfitting" && echo "$what: identical" || echo "$what: DIFFER"

for device in gpu cpu auto; do
    echo "== what --overfitting adds, --device $device"
    THREADX_BIN="$threadx" bash benchmarks/overfitting_cost.sh "$device" "$runs"
done

# CSCV alone: the CPU's share with a device, and the default job's statistics on each device.
[ -x "$bin_dir/bench-pbo" ] && "$bin_dir/bench-pbo" --bench --warm-up-time 1 --measurement-time 3 host
[ -x "$bin_dir/bench-sweep" ] && "$bin_dir/bench-sweep" --bench --warm-up-time 1 --measurement-time 3 cscv
exit 0
