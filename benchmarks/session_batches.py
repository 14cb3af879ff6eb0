"""Session.evaluate in batches against the full sweep, on the same data and grid: the
combos/s of each (best of --runs), and their ratio. Issue #27's goal: batches of 1,000
combos reach at least 50 % of the full sweep's combos/s.

    pip install ./python && python benchmarks/session_batches.py [--bars 35040] [--batch 1000] [--device cpu]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import threadx


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bars", type=int, default=35_040)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    data = threadx.synthetic(bars=args.bars, seed=42)
    grid = None  # bb_atr's own grid: 10,000 combos
    full = threadx.sweep(data, grid=grid, device=args.device, progress=False)
    session = threadx.Session(data, "bb_atr", device=args.device)
    order = np.random.default_rng(0).permutation(len(full))
    params = full.iloc[order][list(session.parameters)].reset_index(drop=True)
    batches = [params.iloc[i : i + args.batch] for i in range(0, len(params), args.batch)]
    best_full = best_batches = float("inf")
    for _ in range(args.runs):
        t = time.perf_counter()
        threadx.sweep(data, grid=grid, device=args.device, progress=False)
        best_full = min(best_full, time.perf_counter() - t)
        t = time.perf_counter()
        for batch in batches:
            session.evaluate(batch)
        best_batches = min(best_batches, time.perf_counter() - t)
    n = len(full)
    print(f"{n:,} combos, {args.bars:,} bars, device {args.device}, workers {session.workers}")
    print(f"full sweep:               {n / best_full:,.0f} combos/s ({best_full:.3f} s)")
    print(f"batches of {args.batch:,}: {n / best_batches:,.0f} combos/s ({best_batches:.3f} s), "
          f"{100 * best_full / best_batches:.0f} % of the full sweep's")


if __name__ == "__main__":
    main()
