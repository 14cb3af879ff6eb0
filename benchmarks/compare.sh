#!/usr/bin/env bash
# ThreadX side by side with a numba loop over TA-Lib and vectorbt, on one grid and one data
# set (see compare.py). Makes its own venv (benchmarks/.venv, or $VENV) from
# requirements.txt; needs network for PyPI the first time. Not run in CI: it takes
# minutes and hundreds of MB of packages. Writes artifacts/bench/compare.json.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-benchmarks/.venv}
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
fi
"$venv/bin/pip" install -q -r benchmarks/requirements.txt
cargo build --release --quiet -p threadx
threadx=target/release/threadx
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$work}
"$threadx" data synth --bars 5000 --seed 1 --out "$work/data.csv" >/dev/null
mkdir -p artifacts/bench
# Every tool's own threads: numba's prange and ThreadX use every core.
"$venv/bin/python" benchmarks/compare.py --data "$work/data.csv" --threadx "$threadx" --work "$work" \
    --out artifacts/bench/compare.json
echo "wrote artifacts/bench/compare.json"
