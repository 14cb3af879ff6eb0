"""ThreadX from Python in one page: data, indicators, one backtest, a sweep with its
heatmap, and your own signals.

    pip install ./python          # from the repository root (needs a Rust toolchain)
    python examples/python/quickstart.py [--bars 35040] [--out artifacts/sweep/quickstart-heatmap.png]

The heatmap needs matplotlib (`pip install matplotlib`); without it the best combos are
printed and the plot is skipped. It is laid out as the CLI's: bb_period across, bb_std up.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import threadx


def main() -> None:
    parser = argparse.ArgumentParser(description="ThreadX from Python in one page")
    parser.add_argument("--bars", type=int, default=35_040, help="synthetic 15-minute bars (35,040: a year)")
    parser.add_argument(
        "--out",
        default="artifacts/sweep/quickstart-heatmap.png",
        help="where the heatmap goes (the default folder is the CLI's, which git ignores)",
    )
    args = parser.parse_args()

    # Any DataFrame with a DatetimeIndex and open/high/low/close[/volume] works the same.
    data = threadx.synthetic(bars=args.bars, seed=42)
    print(f"{len(data):,} bars from {data.index[0]} to {data.index[-1]}")

    ind = threadx.indicators(data, "bbands:period=20,std=2", "atr:period=14")
    print(ind.dropna().head(3), end="\n\n")

    bt = threadx.backtest(data, "bb_atr", fee=0.001, bb_period=20, bb_std=2, atr_mult=2.5)
    print(bt)
    print(bt.trades[["entry_time", "exit_time", "return", "exit_reason"]].head(3), end="\n\n")

    grid = {"bb_period": range(10, 105, 5), "bb_std": [1.5, 2.0, 2.5, 3.0], "atr_period": [14], "atr_mult": [1, 2, 3]}
    results = threadx.sweep(data, "bb_atr", grid=grid, fee=0.001)
    print(f"{len(results):,} combos; the best five by Sharpe ratio:")
    print(results.sort_values("sharpe", ascending=False).head(5), end="\n\n")

    # Your own rule, run by the same engine: buy 3 closes up in a row, sell 3 down.
    close = data["close"]
    up = close.diff() > 0
    entries = up & up.shift(1, fill_value=False) & up.shift(2, fill_value=False)
    down = close.diff() < 0
    exits = down & down.shift(1, fill_value=False) & down.shift(2, fill_value=False)
    mine = threadx.simulate(close, entries, exits, stop=close * 0.97, fee=0.001)
    print("three up, three down, 3 % stop:")
    print(mine, end="\n\n")

    # The best per-bar Sharpe ratio over atr_mult in each cell: bb_std rows, bb_period columns.
    best = results.groupby(["bb_std", "bb_period"])["sharpe"].max().unstack("bb_period")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no heatmap (pip install matplotlib)")
        return
    fig, ax = plt.subplots(figsize=(9, 4))
    image = ax.imshow(best.to_numpy(), aspect="auto", origin="lower", cmap="viridis")
    ax.set_xticks(np.arange(len(best.columns)), [str(c) for c in best.columns])
    ax.set_yticks(np.arange(len(best.index)), [str(i) for i in best.index])
    ax.set_xlabel("bb_period (bars)")
    ax.set_ylabel("bb_std (standard deviations)")
    ax.set_title("bb_atr: the best Sharpe ratio over atr_mult in each cell")
    fig.colorbar(image, ax=ax, label="Sharpe ratio per bar (higher is better)")
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"wrote the heatmap to {args.out}")


if __name__ == "__main__":
    main()
