"""ThreadX against the tools users would otherwise pick, on one grid and one data set.

Run by `benchmarks/compare.sh`, which makes the venv, the data and ThreadX's results.
Not run in CI. The workload: bb_atr (docs/strategies.md) over 20 bb_period x 9 bb_std x
6 atr_period x 10 atr_mult = 10,800 combos on 5,000 bars, fee 0.001.

- numba: TA-Lib's BBANDS and ATR, each unique series once, then a plain @njit loop over
  the combos (one thread), and the same loop with prange over every core.
- vectorbt: `Portfolio.from_signals` with entries, exits and the ATR stop as `sl_stop`,
  all combos as columns, in batches of columns.

Every tool's total_return and trade count is checked against ThreadX's CSV, so the times
are of the same answer. Times are whole computations (indicators included), best of the
repeats, after one warm-up call (numba compiles on its first call; that is reported).
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time

import numba
import numpy as np
import pandas as pd
import talib
import vectorbt as vbt

FEE = 0.001
# The metrics compared with ThreadX's CSV: (column, absolute tolerance, relative tolerance).
METRICS = [("total_return", 1e-9, 0), ("trades", 0, 0), ("max_drawdown", 1e-9, 0), ("sharpe", 0, 1e-6),
           ("exposure", 1e-12, 0), ("win_rate", 1e-12, 0)]
BB_PERIOD = list(range(10, 106, 5))
BB_STD = [1 + 0.25 * i for i in range(9)]
ATR_PERIOD = list(range(5, 31, 5))
ATR_MULT = [0.5 * i for i in range(1, 11)]


def combos() -> np.ndarray:
    """The grid in ThreadX's order: the last parameter varies fastest."""
    return np.array(list(itertools.product(BB_PERIOD, BB_STD, ATR_PERIOD, ATR_MULT)), dtype=np.float64)


def indicators(df: pd.DataFrame):
    close, high, low = (df[c].to_numpy(np.float64) for c in ("close", "high", "low"))
    bands = {(p, k): talib.BBANDS(close, p, k, k, 0) for p in BB_PERIOD for k in BB_STD}
    atr = {a: talib.ATR(high, low, close, a) for a in ATR_PERIOD}
    return close, bands, atr


@numba.njit(cache=False, error_model="numpy")
def simulate(close, lower, middle, atr, warmup, mult, fee, out):
    """bb_atr bar by bar with every metric ThreadX reports (docs/strategies.md)."""
    n = close.shape[0]
    cash, shares, in_pos, stop, entry_cash = 1.0, 0.0, False, 0.0, 1.0
    trades, closed, wins, held = 0, 0, 0, 0
    prev, peak, max_dd, s, s2 = 1.0, 1.0, 0.0, 0.0, 0.0
    for t in range(n):
        c = close[t]
        exited = False
        if in_pos and (c > middle[t] or c <= stop):
            cash, shares, in_pos, exited = shares * c * (1.0 - fee), 0.0, False, True
            closed += 1
            wins += cash > entry_cash
        if not in_pos and not exited and t >= warmup and c < lower[t]:
            entry_cash, shares, cash, in_pos = cash, cash / (c * (1.0 + fee)), 0.0, True
            trades += 1
            stop = c - mult * atr[t]
        held += in_pos
        equity = cash + shares * c
        r = equity / prev - 1.0
        s += r
        s2 += r * r
        prev = equity
        peak = max(peak, equity)
        max_dd = min(max_dd, equity / peak - 1.0)
    mean = s / n
    out[0] = prev - 1.0
    out[1] = trades
    out[2] = max_dd
    out[3] = mean / np.sqrt((s2 - s * mean) / (n - 1))
    out[4] = held / n
    out[5] = wins / closed if closed > 0 else np.nan


@numba.njit(cache=False)
def sweep_loop(close, lowers, middles, atrs, band_of, atr_of, warmups, mults, fee, out):
    for c in range(band_of.shape[0]):
        simulate(close, lowers[band_of[c]], middles[band_of[c]], atrs[atr_of[c]], warmups[c], mults[c], fee, out[c])


@numba.njit(parallel=True, cache=False)
def sweep_prange(close, lowers, middles, atrs, band_of, atr_of, warmups, mults, fee, out):
    for c in numba.prange(band_of.shape[0]):
        simulate(close, lowers[band_of[c]], middles[band_of[c]], atrs[atr_of[c]], warmups[c], mults[c], fee, out[c])


def run_numba(df: pd.DataFrame, loop) -> np.ndarray:
    close, bands, atr = indicators(df)
    band_keys = list(bands)
    lowers = np.stack([bands[k][2] for k in band_keys])
    middles = np.stack([bands[k][1] for k in band_keys])
    atr_keys = list(atr)
    atrs = np.stack([atr[a] for a in atr_keys])
    grid = combos()
    band_index = {k: i for i, k in enumerate(band_keys)}
    band_of = np.array([band_index[(int(p), k)] for p, k in grid[:, :2]], dtype=np.int64)
    atr_of = np.array([atr_keys.index(int(a)) for a in grid[:, 2]], dtype=np.int64)
    warmups = np.maximum(grid[:, 0] - 1, grid[:, 2]).astype(np.int64)
    out = np.empty((len(grid), len(METRICS)))
    loop(close, lowers, middles, atrs, band_of, atr_of, warmups, grid[:, 3].copy(), FEE, out)
    return out


def run_vectorbt(df: pd.DataFrame, batch: int) -> np.ndarray:
    close, bands, atr = indicators(df)
    grid = combos()
    idx = np.arange(len(close))
    rets, trades = [], []
    for start in range(0, len(grid), batch):
        part = grid[start : start + batch]
        lower = np.column_stack([bands[(int(p), k)][2] for p, k in part[:, :2]])
        middle = np.column_stack([bands[(int(p), k)][1] for p, k in part[:, :2]])
        atr_cols = np.column_stack([atr[int(a)] for a in part[:, 2]])
        warm = np.maximum(part[:, 0] - 1, part[:, 2])
        c = close[:, None]
        entries = (c < lower) & (idx[:, None] >= warm[None, :])
        exits = c > middle
        sl = part[:, 3][None, :] * atr_cols / c
        pf = vbt.Portfolio.from_signals(
            pd.Series(close), entries, exits, sl_stop=np.nan_to_num(sl, nan=np.inf), fees=FEE, init_cash=1.0, freq="15min"
        )
        rets.append(pf.total_return().to_numpy())
        trades.append(pf.trades.count().to_numpy())
    out = np.full((len(grid), len(METRICS)), np.nan)
    out[:, 0], out[:, 1] = np.concatenate(rets), np.concatenate(trades)
    return out


def timed(fn, repeats: int):
    start = time.perf_counter()
    first = fn()
    first_s = time.perf_counter() - start
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return first, first_s, best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--threadx", required=True, help="the threadx binary")
    ap.add_argument("--work", required=True, help="a folder for threadx's results")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", required=True, help="JSON report")
    args = ap.parse_args()
    df = pd.read_csv(args.data)
    df.columns = [c.lower() for c in df.columns]
    rows = []
    grid = ["--grid", "bb_period=10:105:5", "--grid", "bb_std=1:3:0.25", "--grid", "atr_period=5:30:5",
            "--grid", "atr_mult=0.5:5:0.5"]
    for mode in ("cpu", "auto"):
        out = f"{args.work}/threadx-{mode}.csv"
        cmd = [args.threadx, "--device", mode, "sweep", "--data", args.data, *grid, "--quiet", "--out", out]

        def run(cmd=cmd):
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)

        _, first_s, best_s = timed(run, 5)
        rows.append({"tool": f"threadx --device {mode} sweep (whole process)", "first_s": first_s, "best_s": best_s,
                     "mismatches": 0, "compared": []})
        print(f"threadx --device {mode}: best of 5 processes {best_s:.3f} s", flush=True)
    ref = pd.read_csv(f"{args.work}/threadx-cpu.csv")
    want = ref[[m for m, _, _ in METRICS]].to_numpy(np.float64)
    tools = {
        "numba loop over TA-Lib, 1 thread": lambda: run_numba(df, sweep_loop),
        f"numba prange over TA-Lib, {numba.config.NUMBA_NUM_THREADS} threads": lambda: run_numba(df, sweep_prange),
        "vectorbt Portfolio.from_signals": lambda: run_vectorbt(df, 1800),
    }
    for name, fn in tools.items():
        got, first_s, best_s = timed(fn, 1 if "vectorbt" in name else args.repeats)
        compared = [i for i in range(len(METRICS)) if not np.isnan(got[:, i]).all()]
        bad = np.zeros(len(got), dtype=bool)
        for i in compared:
            _, atol, rtol = METRICS[i]
            bad |= ~np.isclose(got[:, i], want[:, i], rtol=rtol, atol=atol, equal_nan=True)
        names = [METRICS[i][0] for i in compared]
        rows.append({"tool": name, "first_s": first_s, "best_s": best_s, "mismatches": int(bad.sum()), "compared": names})
        print(f"{name}: first call {first_s:.2f} s, best {best_s:.3f} s; {int(bad.sum())} of {len(got)} combos differ"
              f" in {', '.join(names)}", flush=True)
    versions = {"python": sys.version.split()[0], "numpy": np.__version__, "pandas": pd.__version__,
                "numba": numba.__version__, "ta-lib": talib.__version__, "vectorbt": vbt.__version__}
    with open(args.out, "w") as f:
        json.dump({"combos": len(want), "bars": len(df), "versions": versions, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
