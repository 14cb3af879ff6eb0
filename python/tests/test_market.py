"""`simulate` with shorts, stops inside the bar, trailing stops and slippage equals
vectorbt 1.2's `Portfolio.from_signals` at its defaults (all cash in, no accumulation,
reverse on an opposite entry, stop exits at the stop price or at the open beyond it):
total return within 1e-9 relative, trade counts exact, on random signals over OHLC data
with gaps and without same-bar conflicts. CI installs vectorbt in the test venv and sets
THREADX_REQUIRE_VECTORBT=1, so there the comparison cannot be skipped."""

from __future__ import annotations

import os
from typing import Any, Dict, Tuple

import numpy as np
import pandas as pd
import pytest

import threadx
from market_data import ohlc, signals

if os.environ.get("THREADX_REQUIRE_VECTORBT") == "1":
    import vectorbt as vbt
else:
    vbt = pytest.importorskip("vectorbt")

FEE = 0.001


CASES: Dict[str, Tuple[Dict[str, Any], bool]] = {
    "long only, closes": ({}, False),
    "both sides, closes": ({"shorts": True}, False),
    "stop and take-profit on closes": ({"shorts": True, "sl_stop": 0.01, "tp_stop": 0.02}, False),
    "stop and take-profit inside the bar": ({"shorts": True, "sl_stop": 0.01, "tp_stop": 0.02}, True),
    "trailing stop inside the bar": ({"shorts": True, "sl_stop": 0.015, "sl_trail": True}, True),
    "per-column stops": ({"shorts": True, "sl_stop": np.linspace(0.005, 0.03, 6), "tp_stop": 0.03}, True),
    "per-column trails": ({"shorts": True, "sl_stop": 0.015, "sl_trail": np.array([True, False] * 3)}, True),
    "slippage": ({"shorts": True, "slippage": 0.001}, False),
    "slippage with stops inside the bar": ({"shorts": True, "sl_stop": 0.01, "tp_stop": 0.02, "slippage": 0.001}, True),
}

# Features in combination, not only one at a time: every stop kind × take-profit ×
# slippage × shorts × OHLC (a peer agreeing on each alone proves nothing about a pair).
STOPS = {"no stop": {}, "stop": {"sl_stop": 0.01}, "trail": {"sl_stop": 0.012, "sl_trail": True}}
COMBINED = {
    f"{stop}, {'tp' if tp else 'no tp'}, {'slippage' if slip else 'no slippage'}, "
    f"{'shorts' if shorts else 'long'}, {'OHLC' if ohlc else 'closes'}": (
        {**STOPS[stop], **({"tp_stop": 0.02} if tp else {}), **({"slippage": 0.0007} if slip else {}),
         **({"shorts": True} if shorts else {})},
        ohlc,
    )
    for stop in STOPS
    for tp in (False, True)
    for slip in (False, True)
    for shorts in (False, True)
    for ohlc in (False, True)
}


def case_inputs(case: str, bars: int, columns: int, seed: int) -> Tuple[pd.DataFrame, Dict[str, Any], Dict[str, Any], Dict[str, Any]]:
    """A case's bars, signals (long-only cases without the short ones), OHLC arguments
    (stops inside the bar) and the options both engines take."""
    options, intrabar = {**CASES, **COMBINED}[case]
    options = dict(options)
    shorts = options.pop("shorts", False)
    df = ohlc(bars, seed=seed)
    sig = signals(len(df), columns, seed=seed + 1)
    if not shorts:
        sig = {"entries": sig["entries"], "exits": sig["exits"]}
    prices: Dict[str, Any] = {"open": df["open"], "high": df["high"], "low": df["low"]} if intrabar else {}
    return df, sig, prices, options


@pytest.mark.parametrize("case", list(CASES) + list(COMBINED))
def test_simulate_equals_vectorbt(case: str) -> None:
    df, sig, prices, options = case_inputs(case, 3000, 6, seed=1)
    # vectorbt at its defaults: stops fill at their level without slippage ("stoplimit").
    pf = vbt.Portfolio.from_signals(df["close"], **sig, **prices, **options, fees=FEE, init_cash=100.0, freq="1h")
    got = threadx.simulate(df["close"], **sig, **prices, **options, fee=FEE, device="cpu")
    want_return = pf.total_return().to_numpy()
    want_trades = pf.trades.count().to_numpy()
    assert got["trades"].sum() > 300, "the case trades"
    np.testing.assert_array_equal(got["trades"].to_numpy(), want_trades)
    np.testing.assert_allclose(got["total_return"].to_numpy(), want_return, rtol=1e-9, atol=1e-12)


DETAILED = ["both sides, closes", "slippage with stops inside the bar", "trailing stop inside the bar",
            "trail, tp, slippage, shorts, OHLC"]


@pytest.mark.parametrize("case", DETAILED)
def test_details_give_vectorbts_equity_and_trades_in_currency(case: str) -> None:
    """``details=True`` with ``init_cash=100``: each column's equity is vectorbt's
    ``pf.value()`` and each trade's bars, side and profit are its trade records', within
    1e-9 relative; the metrics rows stay the same bytes as without details."""
    df, sig, prices, options = case_inputs(case, 2000, 4, seed=7)
    pf = vbt.Portfolio.from_signals(df["close"], **sig, **prices, **options, fees=FEE, init_cash=100.0, freq="1h")
    got = threadx.simulate(df["close"], **sig, **prices, **options, fee=FEE, init_cash=100.0, details=True)
    plain = threadx.simulate(df["close"], **sig, **prices, **options, fee=FEE)
    pd.testing.assert_frame_equal(got, plain, check_exact=True)
    equity = got.attrs["equity"]
    assert equity.shape == (len(df), 4) and equity.index.equals(df.index)
    np.testing.assert_allclose(equity.to_numpy(), pf.value().to_numpy(), rtol=1e-9)
    trades = got.attrs["trades"]
    want = pf.trades.records
    assert len(trades) == len(want) > 100, case
    np.testing.assert_array_equal(trades["column"].to_numpy(), want["col"])
    np.testing.assert_array_equal(trades["entry_bar"].to_numpy(), want["entry_idx"])
    np.testing.assert_array_equal(trades["exit_bar"].to_numpy(), want["exit_idx"])
    np.testing.assert_array_equal(trades["side"].to_numpy() == "short", want["direction"] == 1)
    np.testing.assert_allclose(trades["pnl"].to_numpy(), want["pnl"], rtol=1e-9, atol=1e-9)
    # Each column's profits add up to its equity's change.
    total = trades.groupby("column")["pnl"].sum().reindex(range(4), fill_value=0.0).to_numpy()
    np.testing.assert_allclose(total, equity.iloc[-1].to_numpy() - 100.0, rtol=1e-9, atol=1e-9)


def test_init_cash_must_be_positive() -> None:
    df = ohlc(100, seed=3)
    sig = signals(len(df), 1, seed=4)
    for bad in (0.0, -5.0, float("nan")):
        with pytest.raises(ValueError, match="init_cash"):
            threadx.simulate(df["close"], sig["entries"], sig["exits"], init_cash=bad, details=True)


def test_a_frame_of_prices_is_the_same_as_its_columns() -> None:
    df = ohlc(500, seed=3)
    sig = signals(len(df), 3, seed=4)
    by_frame = threadx.simulate(df, **sig, sl_stop=0.01, device="cpu")
    by_columns = threadx.simulate(df["close"], **sig, open=df["open"], high=df["high"], low=df["low"], sl_stop=0.01)
    pd.testing.assert_frame_equal(by_frame, by_columns, check_exact=True)


def test_the_cpu_and_the_gpu_give_the_same_bytes() -> None:
    """Fraction stops and slippage, alone and together, run on the whole-backtest kernel,
    and shorts, a trailing stop and stops inside the bar on the market kernel, with the
    CPU's bytes."""
    df = ohlc(2000, seed=5)
    sig = signals(len(df), 4, seed=6)
    for options in [
        {"sl_stop": 0.01, "tp_stop": 0.02},
        {"slippage": 0.0005},
        {"sl_stop": 0.01, "tp_stop": 0.02, "slippage": 0.0005},
        {"short_entries": sig["short_entries"]},
        {"short_entries": sig["short_entries"], "short_exits": sig["short_exits"], "sl_stop": 0.01,
         "sl_trail": True, "open": df["open"], "high": df["high"], "low": df["low"], "slippage": 0.0005},
    ]:
        cpu = threadx.simulate(df["close"], sig["entries"], sig["exits"], **options, device="cpu")
        gpu = threadx.simulate(df["close"], sig["entries"], sig["exits"], **options, device="gpu")
        pd.testing.assert_frame_equal(cpu, gpu, check_exact=True)


def test_next_open_fills_take_the_opens_alone() -> None:
    """`open=` alone is enough for next-open fills (the documented call): the bars span
    their open and close; they were refused as an open above a high that was the close."""
    df = ohlc(300, seed=5)
    sig = signals(len(df), 2, seed=6)
    alone = threadx.simulate(df["close"], sig["entries"], sig["exits"], open=df["open"], fill="next_open",
                             details=True, device="cpu")
    # Without stops the bar's range decides nothing: the whole frame gives the same bytes.
    whole = threadx.simulate(df, sig["entries"], sig["exits"], fill="next_open", details=True, device="cpu")
    pd.testing.assert_frame_equal(alone, whole, check_exact=True)
    trades = alone.attrs["trades"]
    assert len(trades) > 0
    # Each entry fills at the open of the bar after its signal.
    first = trades.iloc[0]
    entries = np.asarray(sig["entries"])[:, int(first["column"])] if np.ndim(sig["entries"]) == 2 else sig["entries"]
    decided = int(np.flatnonzero(np.asarray(entries))[0])
    assert first["entry_price"] == df["open"].iloc[decided + 1], (first, decided)


def test_bad_arguments_are_refused_with_what_is_wrong() -> None:
    df = ohlc(100, seed=7)
    sig = signals(len(df), 2, seed=8)
    with pytest.raises(ValueError, match="fee=0.001 and fees=0.002"):
        threadx.simulate(df, sig["entries"], fee=0.001, fees=0.002)
    with pytest.raises(ValueError, match="high and low together"):
        threadx.simulate(df["close"], sig["entries"], high=df["high"])
    with pytest.raises(ValueError, match="sl_trail.*needs `sl_stop`"):
        threadx.simulate(df["close"], sig["entries"], sl_trail=True)
    with pytest.raises(ValueError, match="slippage -0.1 is outside"):
        threadx.simulate(df["close"], sig["entries"], slippage=-0.1)
    with pytest.raises(ValueError, match="short_exits` without `short_entries"):
        threadx.simulate(df["close"], sig["entries"], short_exits=sig["exits"])
    with pytest.raises(ValueError, match="sl_stop has shape"):
        threadx.simulate(df["close"], sig["entries"], sl_stop=np.ones(7))
    with pytest.raises(ValueError, match=r"sl_trail has shape \(100, 2\).*one per column \(2,\)"):
        threadx.simulate(df["close"], sig["entries"], sl_stop=0.01, sl_trail=np.ones((100, 2), dtype=bool))
    with pytest.raises(ValueError, match='fill="next_open" needs the opens'):
        threadx.simulate(df["close"], sig["entries"], fill="next_open")


RATIO_CASES = ["long only, closes", "both sides, closes", "trail, tp, slippage, shorts, OHLC", "stop, no tp, slippage, long, OHLC"]


@pytest.mark.parametrize("case", RATIO_CASES)
def test_the_ratios_are_vectorbts_and_the_trade_statistics_its_trades(case: str) -> None:
    """CAGR, annual volatility, Sortino and Calmar equal vectorbt's returns accessor on its
    own per-bar returns, annualised with ThreadX's bars per year; profit factor,
    expectancy and SQN equal those of vectorbt's closed trades (gains over losses, mean,
    √n · mean / std of their returns on the cash each took), within 1e-9 relative."""
    df, sig, prices, options = case_inputs(case, 3000, 6, seed=3)
    pf = vbt.Portfolio.from_signals(df["close"], **sig, **prices, **options, fees=FEE, init_cash=100.0, freq="1h")
    got = threadx.simulate(df["close"], **sig, **prices, **options, fee=FEE, device="cpu")
    per_year = float((got["sharpe_annual"] / got["sharpe"]).iloc[0] ** 2)
    assert abs(per_year - 8760.0) < 1e-6, "hourly bars round the clock"
    rets = pf.returns().vbt.returns(freq="1h", year_freq=pd.Timedelta(hours=8760))
    for ours, theirs in [("cagr", rets.annualized()), ("volatility", rets.annualized_volatility()),
                         ("sortino", rets.sortino_ratio()), ("calmar", rets.calmar_ratio())]:
        np.testing.assert_allclose(got[ours].to_numpy(), theirs.to_numpy(), rtol=1e-9, err_msg=ours)
    # A trade's return on the cash it took: its profit over its entry value with the fee.
    records = pf.trades.closed.records
    returns = records["pnl"] / (records["size"] * records["entry_price"] + records["entry_fees"])
    for column in range(6):
        r = pd.Series(returns[records["col"] == column])
        row = got.iloc[column]
        assert len(r) == row["closed_trades"] > 10, (case, column, len(r), row["closed_trades"])
        gains, losses = r[r > 0].sum(), -r[r < 0].sum()
        np.testing.assert_allclose(row["profit_factor"], gains / losses, rtol=1e-9)
        np.testing.assert_allclose(row["expectancy"], r.mean(), rtol=1e-9)
        np.testing.assert_allclose(row["sqn"], np.sqrt(len(r)) * r.mean() / r.std(ddof=1), rtol=1e-9)
