"""What the Python package costs over the CLI on the reference grid (docs/performance.md):
bb_atr over 20 bb_period x 9 bb_std x 6 atr_period x 10 atr_mult = 10,800 combos on
5,000 synthetic bars (seed 1), fee 0.001.

It times, best and median of --runs runs each, per device mode:
- the CLI: whole `threadx sweep` processes (start, read the CSV, sweep, write the CSV,
  summary and heatmap), as docs/performance.md reports them;
- `threadx.sweep(frame, grid=...)` called in this warm Python process (the frame read
  once), the DataFrame of results included;
and once, a whole Python process that imports threadx and pandas and runs the sweep.
It checks that the DataFrame equals the CLI's CSV. Not run in CI: it needs release
builds (`cargo build --release -p threadx` and `pip install ./python`).

    python benchmarks/python_overhead.py [--threadx target/release/threadx] [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np
import pandas as pd

import threadx

GRID = {
    "bb_period": list(range(10, 106, 5)),
    "bb_std": [1 + 0.25 * i for i in range(9)],
    "atr_period": list(range(5, 31, 5)),
    "atr_mult": [0.5 * i for i in range(1, 11)],
}


def timed(f: Callable[[], object], runs: int) -> List[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        f()
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    repo = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threadx", default=str(repo / "target" / "release" / "threadx"))
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="threadx-overhead-"))
    csv = work / "bars.csv"
    subprocess.run([args.threadx, "data", "synth", "--bars", "5000", "--seed", "1", "--out", str(csv)], check=True,
                   capture_output=True)
    flags = [f"--grid={k}={','.join(repr(v) for v in vs)}" for k, vs in GRID.items()]
    frame = threadx.load(csv)
    results: Dict[str, Dict[str, List[float]]] = {}
    for device in ["cpu", "auto"]:
        out = work / f"cli-{device}.csv"
        command = [args.threadx, "--device", device, "sweep", "--data", str(csv), *flags, "--out", str(out), "--quiet"]

        def cli() -> None:
            subprocess.run(command, check=True, capture_output=True, cwd=work)

        def python() -> pd.DataFrame:
            return threadx.sweep(frame, grid=GRID, device=device, progress=False)

        bars = threadx._bars(frame)[0]
        axes = [(k, ",".join(repr(v) for v in vs)) for k, vs in GRID.items()]

        def native() -> object:
            # The engine alone: bars already checked, no DataFrame in or out.
            return threadx._threadx.sweep(bars, "bb_atr", axes, 0.001, device)

        # Interleaved, so that both see the same machine.
        cli_times: List[float] = []
        py_times: List[float] = []
        native_times: List[float] = []
        cli()
        got = python()
        for _ in range(args.runs):
            cli_times += timed(cli, 1)
            py_times += timed(python, 1)
            native_times += timed(native, 1)
        want = pd.read_csv(out, index_col="combo")
        assert len(got) == len(want) == 10_800
        for column in want.columns:
            assert np.array_equal(got[column].to_numpy(np.float64), want[column].to_numpy(np.float64), equal_nan=True), column
        results[device] = {"cli": cli_times, "python": py_times, "native": native_times}
    script = (
        "import threadx\n"
        f"frame = threadx.load({str(csv)!r})\n"
        f"threadx.sweep(frame, grid={GRID!r}, device='cpu', progress=False)\n"
    )
    whole = timed(lambda: subprocess.run([sys.executable, "-c", script], check=True), 5)
    print(f"10,800 combos x 5,000 bars, {args.runs} interleaved runs each (best / median):")
    for device, r in results.items():
        cli_best, py_best = min(r["cli"]), min(r["python"])
        cli_med, py_med = statistics.median(r["cli"]), statistics.median(r["python"])
        print(
            f"  --device {device:<4}  CLI process {cli_best * 1e3:7.1f} / {cli_med * 1e3:7.1f} ms   "
            f"threadx.sweep() {py_best * 1e3:7.1f} / {py_med * 1e3:7.1f} ms   "
            f"overhead {py_med / cli_med - 1:+.1%} (median), {py_best / cli_best - 1:+.1%} (best)"
        )
        native_med = statistics.median(r["native"])
        print(
            f"  {'':14}  the native call alone {native_med * 1e3:.1f} ms (median): the pandas layer adds "
            f"{(py_med - native_med) * 1e3:.1f} ms"
        )
    print(f"  a whole Python process (import threadx and pandas, load, sweep on cpu): best {min(whole) * 1e3:.0f} ms, "
          f"median {statistics.median(whole) * 1e3:.0f} ms")
    print("  the DataFrame equals the CLI's CSV for every combo")


if __name__ == "__main__":
    main()
