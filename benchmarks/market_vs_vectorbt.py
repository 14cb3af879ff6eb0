"""`threadx.simulate` against vectorbt 1.2's `Portfolio.from_signals` on the same signals:
shorts with reversals, stops and take-profits inside the bar, a trailing stop, slippage.
Checks the results agree (total return within 1e-9 relative, trade counts exact) and
times both (vectorbt's first call, which compiles, is left out).

    pip install vectorbt==1.2.0 ./python
    python benchmarks/market_vs_vectorbt.py [--bars 35040] [--columns 200]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Tuple

import numpy as np
import pandas as pd
import vectorbt as vbt

import threadx

# The data of python/tests/test_market.py's comparisons, at other sizes and rates.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python" / "tests"))
from market_data import ohlc, signals  # noqa: E402


def best_of(fn: Callable[[], Any], repeats: int) -> Tuple[Any, float]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return out, best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bars", type=int, default=35_040)
    parser.add_argument("--columns", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    df = ohlc(args.bars, 1, freq="15min")
    sig = signals(args.bars, args.columns, 2, rates=(0.005, 0.05))
    prices = {"open": df["open"], "high": df["high"], "low": df["low"]}
    cases: Dict[str, Dict[str, Any]] = {
        "both sides on closes": {},
        "stop and take-profit inside the bar": {**prices, "sl_stop": 0.01, "tp_stop": 0.02},
        "trailing stop inside the bar, slippage": {**prices, "sl_stop": 0.015, "sl_trail": True, "slippage": 0.0005},
    }
    print(f"{args.bars:,} bars x {args.columns} columns; best of {args.repeats}")
    for name, options in cases.items():
        def vectorbt() -> pd.Series:
            pf = vbt.Portfolio.from_signals(df["close"], **sig, **options, fees=0.001, init_cash=100.0, freq="15min")
            return pd.DataFrame({"total_return": pf.total_return().to_numpy(), "trades": pf.trades.count().to_numpy()})

        vectorbt()  # compiles
        want, vbt_s = best_of(vectorbt, args.repeats)
        got, tx_s = best_of(lambda: threadx.simulate(df["close"], **sig, **options, fee=0.001, device="cpu"), args.repeats)
        np.testing.assert_array_equal(got["trades"].to_numpy(), want["trades"].to_numpy())
        np.testing.assert_allclose(got["total_return"].to_numpy(), want["total_return"].to_numpy(), rtol=1e-9, atol=1e-12)
        print(f"{name:42s} vectorbt {vbt_s * 1e3:8.1f} ms   threadx {tx_s * 1e3:8.1f} ms   {vbt_s / tx_s:5.1f}x   (equal)")


if __name__ == "__main__":
    main()
