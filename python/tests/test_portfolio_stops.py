"""vectorbt's stop arguments in one shared account: `simulate(..., cash_sharing=True,
sl_stop=, tp_stop=, sl_trail=, open=, high=, low=)` equals vectorbt 1.2's
`from_signals(..., group_by=True, cash_sharing=True, call_seq="auto")` with the same
arguments, every figure of `test_portfolio.compare` (equity, cash, units at every bar;
every trade's size, prices, fees and profit) within 1e-9, in combination: a fixed or a
trailing stop × a take-profit × checked at closes or inside the bar × fees with and
without slippage × the cash running out or to spare × symbols that start late."""

from __future__ import annotations

import os
from typing import Any, Dict

import numpy as np
import pandas as pd
import pytest

import threadx
from test_portfolio import compare, universe

if os.environ.get("THREADX_REQUIRE_VECTORBT") == "1":
    import vectorbt as vbt
else:
    vbt = pytest.importorskip("vectorbt")


def bar_ranges(close: pd.DataFrame, seed: int) -> Dict[str, pd.DataFrame]:
    """Opens near the last close (gaps of either sign), highs and lows around the open and
    the close; NaN where the close is."""
    rng = np.random.default_rng(seed)
    shape = close.shape
    opens = close.shift(1) * np.exp(rng.normal(0.0, 0.004, shape))
    opens = opens.where(opens.notna(), close)
    high = np.maximum(opens, close) * (1.0 + rng.uniform(0.0, 0.006, shape))
    low = np.minimum(opens, close) * (1.0 - rng.uniform(0.0, 0.006, shape))
    return {"open": opens, "high": high, "low": low}


SIZINGS: Dict[str, Dict[str, Any]] = {
    "percent of the cash left": {"size": 0.3, "size_type": "percent", "init_cash": 1000.0},
    "value, cash running out": {"size": 400.0, "size_type": "value", "init_cash": 1000.0},
}


@pytest.mark.parametrize("sizing", list(SIZINGS))
@pytest.mark.parametrize("trail", [False, True])
@pytest.mark.parametrize("inside", [False, True])
@pytest.mark.parametrize("costs", [{"fees": 0.001}, {"fees": 0.002, "slippage": 0.001}])
def test_stops_in_one_account_are_vectorbts(sizing: str, trail: bool, inside: bool, costs: Dict[str, float]) -> None:
    close, entries, exits = universe(7, 8, late=True)
    # Fewer exit signals than entries: the levels close most trades.
    exits = exits & (np.random.default_rng(8).random(exits.shape) < 0.5)
    # A stop per bar and symbol, read at each entry's bar; one take-profit for all.
    sl_stop = pd.DataFrame(np.random.default_rng(9).uniform(0.005, 0.02, close.shape), index=close.index, columns=close.columns)
    options = {**SIZINGS[sizing], **costs, "sl_stop": sl_stop, "tp_stop": 0.02, "sl_trail": trail}
    ranges = bar_ranges(close, 10) if inside else {}
    ours = threadx.simulate(close, entries, exits, cash_sharing=True, details=True, **options, **ranges)
    pf = vbt.Portfolio.from_signals(
        close, entries, exits, **options, **ranges, group_by=True, cash_sharing=True, call_seq="auto", freq="1h"
    )
    reasons = ours.attrs["trades"]["exit_reason"].value_counts()
    assert reasons["trail" if trail else "stop"] > 20 and reasons["take_profit"] > 10, reasons.to_dict()
    if inside:
        trades = ours.attrs["trades"].dropna(subset=["exit_price"])
        at_close = close.to_numpy()[trades["exit_bar"].astype(int), close.columns.get_indexer(trades["symbol"])]
        assert (trades["exit_price"].to_numpy() != at_close).sum() > 20, "fills inside the bar"
    compare(ours, pf, close)


def test_what_the_levels_cannot_take_is_named() -> None:
    close, entries, exits = universe(6, 5, bars=50)
    ranges = bar_ranges(close, 1)
    with pytest.raises(ValueError, match="give high and low together"):
        threadx.simulate(close, entries, exits, cash_sharing=True, sl_stop=0.01, high=ranges["high"])
    with pytest.raises(ValueError, match=r"sl_stop at bar 0, symbol 0 is -0.01: a fraction of the entry's close is 0 or more"):
        threadx.simulate(close, entries, exits, cash_sharing=True, sl_stop=-0.01)
    with pytest.raises(ValueError, match="sl_trail=.*one flag for every symbol"):
        threadx.simulate(close, entries, exits, cash_sharing=True, sl_stop=0.01, sl_trail=np.array([True] * 5))
    with pytest.raises(ValueError, match=r"tp_stop has shape \(3,\); it must broadcast to the closes' \(50, 5\)"):
        threadx.simulate(close, entries, exits, cash_sharing=True, tp_stop=np.array([0.1, 0.2, 0.3]))
    low = ranges["low"].copy()
    low.iloc[9, 3] = 0.0
    with pytest.raises(ValueError, match="low at bar 9, symbol 3 is 0: a price is positive and finite"):
        threadx.simulate(close, entries, exits, cash_sharing=True, sl_stop=0.01, high=ranges["high"], low=low)
