"""Shorts in one shared account: `simulate(..., cash_sharing=True, short_entries=,
short_exits=)` equals vectorbt 1.2's `from_signals(..., short_entries=, short_exits=,
group_by=True, cash_sharing=True, call_seq="auto")`, every figure of
`test_portfolio.compare` (equity, cash, units at every bar, a short's below zero; every
trade's size, prices, fees and profit) within 1e-9, in combination: a percent of the cash
(a short's, of the free cash) or a value × stops and take-profits, fixed or trailing, on
closes or inside the bar × fees with and without slippage × symbols that start late. And
the one place the two part: a cover the cash cannot pay."""

from __future__ import annotations

import os
from typing import Any, Dict, Tuple

import numpy as np
import pandas as pd
import pytest

import threadx
from test_portfolio import compare
from test_portfolio_stops import bar_ranges

if os.environ.get("THREADX_REQUIRE_VECTORBT") == "1":
    import vectorbt as vbt
else:
    vbt = pytest.importorskip("vectorbt")

Frames = Tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]


def two_sided(seed: int, symbols: int, bars: int = 400) -> Frames:
    """Hourly closes of random walks (a third of them starting late), and per symbol a
    run of trades, each long or short at random: its side's entry, then after a while its
    side's exit, the next entry after that. No bar holds two signals, and no entry comes
    while the plan holds a position (so no reversal: vectorbt refuses a percent one)."""
    rng = np.random.default_rng(seed)
    index = pd.date_range("2024-01-01", periods=bars, freq="h")
    names = [f"S{i:02d}" for i in range(symbols)]
    close = pd.DataFrame(50.0 * np.exp(np.cumsum(rng.normal(0.0, 0.012, (bars, symbols)), axis=0)), index=index, columns=names)
    for s in range(0, symbols, 3):
        close.iloc[: rng.integers(5, bars // 4), s] = np.nan
    signals = {name: np.zeros((bars, symbols), dtype=bool) for name in ("le", "lx", "se", "sx")}
    for s in range(symbols):
        t = 0
        while t < bars:
            if rng.random() < 0.08:
                side = "l" if rng.random() < 0.5 else "s"
                signals[side + "e"][t, s] = True
                t += 1 + int(rng.geometric(0.1))
                if t < bars:
                    signals[side + "x"][t, s] = True
            t += 1
    frames = [pd.DataFrame(signals[k], index=index, columns=names) for k in ("le", "lx", "se", "sx")]
    return close, frames[0], frames[1], frames[2], frames[3]


SIZINGS: Dict[str, Dict[str, Any]] = {
    "percent of the cash left (a short's: of the free cash)": {"size": 0.3, "size_type": "percent", "init_cash": 1000.0},
    "value, cash to spare": {"size": 10.0, "size_type": "value", "init_cash": 1_000_000.0},
}


def both(close: pd.DataFrame, signals: Frames, options: Dict[str, Any]) -> Tuple[pd.DataFrame, Any]:
    _, le, lx, se, sx = signals
    ours = threadx.simulate(close, le, lx, short_entries=se, short_exits=sx, cash_sharing=True, details=True, **options)
    pf = vbt.Portfolio.from_signals(
        close, le, lx, short_entries=se, short_exits=sx, **options, group_by=True, cash_sharing=True, call_seq="auto", freq="1h"
    )
    return ours, pf


@pytest.mark.parametrize("sizing", list(SIZINGS))
@pytest.mark.parametrize("costs", [{"fees": 0.001}, {"fees": 0.002, "slippage": 0.001}])
def test_shorts_in_one_account_are_vectorbts(sizing: str, costs: Dict[str, float]) -> None:
    signals = two_sided(1, 8)
    ours, pf = both(signals[0], signals, {**SIZINGS[sizing], **costs})
    trades = ours.attrs["trades"]
    assert (trades["side"] == "short").sum() > 50 and (trades["side"] == "long").sum() > 50
    assert list(trades.sort_values(["symbol", "entry_time"], kind="stable")["side"].str.title()) == list(
        pf.trades.records_readable.sort_values(["Column", "Entry Timestamp"], kind="stable")["Direction"]
    )
    assert (ours.attrs["positions"].to_numpy() < 0).any(), "short positions are held below zero"
    compare(ours, pf, signals[0])


@pytest.mark.parametrize("sizing", list(SIZINGS))
@pytest.mark.parametrize("trail", [False, True])
@pytest.mark.parametrize("inside", [False, True])
@pytest.mark.parametrize("costs", [{"fees": 0.001}, {"fees": 0.002, "slippage": 0.001}])
def test_shorts_with_stops_are_vectorbts(sizing: str, trail: bool, inside: bool, costs: Dict[str, float]) -> None:
    signals = two_sided(3, 8)
    close = signals[0]
    sl_stop = pd.DataFrame(np.random.default_rng(9).uniform(0.005, 0.02, close.shape), index=close.index, columns=close.columns)
    options = {**SIZINGS[sizing], **costs, "sl_stop": sl_stop, "tp_stop": 0.02, "sl_trail": trail}
    ours, pf = both(close, signals, {**options, **(bar_ranges(close, 10) if inside else {})})
    shorts = ours.attrs["trades"].query("side == 'short'")["exit_reason"].value_counts()
    assert shorts["trail" if trail else "stop"] > 20 and shorts["take_profit"] > 10, shorts.to_dict()
    compare(ours, pf, close)


def test_a_cover_the_cash_cannot_pay_is_bought_whole_where_vectorbt_stays_short() -> None:
    """$400 a position from $1,000: longs spend the shorts' proceeds, and a later cover
    lacks cash. vectorbt covers what its cash pays and stays short by the rest; ThreadX
    buys the whole position back and its cash goes below zero (what the account owes).
    Up to that bar the two are the same."""
    signals = two_sided(0, 8)
    close = signals[0]
    ours, pf = both(close, signals, {"size": 400.0, "size_type": "value", "init_cash": 1000.0, "fees": 0.002})
    cash = ours.attrs["cash"].to_numpy()
    owed = int(np.argmax(cash < 0))
    assert cash[owed] < 0 and owed > 20, "a cover lacks cash, after a while"
    np.testing.assert_allclose(ours.attrs["equity"].to_numpy()[:owed], pf.value().to_numpy()[:owed], rtol=1e-9)
    np.testing.assert_allclose(cash[:owed], pf.cash().to_numpy()[:owed], rtol=1e-9, atol=1e-9)
    ours_units, theirs_units = ours.attrs["positions"].to_numpy()[owed], pf.assets().to_numpy()[owed]
    covered = (ours_units == 0) & (theirs_units < 0)
    assert covered.any(), "vectorbt is still short where ThreadX covered"
    np.testing.assert_allclose(pf.cash().to_numpy()[owed], 0.0, atol=1e-9)


def test_one_symbols_short_is_worked_by_hand() -> None:
    """$100 at 1 % fees: a short at 10 sells 100 / 10.1 units and takes in 99 % of their
    value; the free cash is then 0, so a second symbol's short on the same bar sells
    nothing; the cover at 8 pays 101 % of their value there."""
    index = pd.RangeIndex(3, name="bar")
    close = pd.DataFrame({"A": [10.0, 9.0, 8.0], "B": [20.0, 20.0, 20.0]}, index=index)
    no = pd.DataFrame(False, index=index, columns=close.columns)
    short_entries = pd.DataFrame({"A": [True, False, False], "B": [True, False, False]}, index=index)
    short_exits = pd.DataFrame({"A": [False, False, True], "B": [False, False, False]}, index=index)
    got = threadx.simulate(
        close, no, no, short_entries=short_entries, short_exits=short_exits, cash_sharing=True, details=True,
        init_cash=100.0, fees=0.01,
    )
    units = 100.0 / (10.0 * 1.01)
    trades = got.attrs["trades"]
    assert list(trades["symbol"]) == ["A"] and list(trades["side"]) == ["short"]
    np.testing.assert_allclose(trades["size"], [units], rtol=1e-15)
    np.testing.assert_allclose(got.attrs["positions"]["A"], [-units, -units, 0.0], rtol=1e-15)
    proceeds = units * 10.0 * 0.99
    np.testing.assert_allclose(got.attrs["cash"], [100.0 + proceeds, 100.0 + proceeds, 100.0 + proceeds - units * 8 * 1.01], rtol=1e-14)
    np.testing.assert_allclose(got.attrs["equity"], [100.0 + proceeds - units * 10, 100.0 + proceeds - units * 9, 100.0 + proceeds - units * 8 * 1.01], rtol=1e-14)
    np.testing.assert_allclose(trades["pnl"], [proceeds - units * 8 * 1.01], rtol=1e-14)
    np.testing.assert_allclose(trades["return"], [(proceeds - units * 8 * 1.01) / (units * 10 * 1.01)], rtol=1e-14)
