"""`simulate`: a user's own signals equal a plain Python loop written here from the rules
(docs/strategies.md), equal the built-in bb_atr when given its signals, broadcast as
numpy does, and are the same bytes on the CPU and the GPU."""

from __future__ import annotations

import math
from typing import Dict, List, Optional

import numpy as np
import pandas as pd
import pytest

import threadx

FEE = 0.001


def plain_loop(close: np.ndarray, entries: np.ndarray, exits: np.ndarray, stop: Optional[np.ndarray]) -> Dict[str, float]:
    """One column's metrics by the rules, bar by bar in Python floats."""
    n = len(close)
    equity: List[float] = []
    cash, t = 1.0, 0
    trades = closed = wins = held = 0
    trade_returns: List[float] = []
    while t < n:
        if not entries[t]:
            equity.append(cash)
            t += 1
            continue
        e = t
        trades += 1
        shares = cash / (close[e] * (1 + FEE))
        equity.append(shares * close[e])
        level = stop[e] if stop is not None and stop[e] > 0 else None  # NaN > 0 is False
        exit_bar = None
        for x in range(e + 1, n):
            if (level is not None and close[x] <= level) or exits[x]:
                exit_bar = x
                break
            equity.append(shares * close[x])
        if exit_bar is None:
            held += n - e
            break
        proceeds = shares * close[exit_bar] * (1 - FEE)
        equity.append(proceeds)
        held += exit_bar - e
        closed += 1
        wins += proceeds > cash
        trade_returns.append(proceeds / cash - 1)
        cash = proceeds
        t = exit_bar + 1
    returns = np.diff(np.concatenate([[1.0], equity])) / np.concatenate([[1.0], equity[:-1]])
    peak = np.maximum.accumulate(np.maximum(equity, 1.0))
    std = returns.std(ddof=1)
    sharpe = returns.mean() / std if std > 0 else math.nan
    x = np.array(trade_returns)
    losses = -x[x < 0].sum()
    return {
        "profit_factor": x[x > 0].sum() / losses if losses > 0 else math.nan,
        "expectancy": x.mean() if len(x) else math.nan,
        "sqn": math.sqrt(len(x)) * x.mean() / x.std(ddof=1) if len(x) > 1 else math.nan,
        "total_return": equity[-1] - 1,
        "trades": trades,
        "closed_trades": closed,
        "win_rate": wins / closed if closed else math.nan,
        "max_drawdown": min(0.0, float((np.array(equity) / peak - 1).min())),
        "sharpe": sharpe,
        "exposure": held / n,
    }


def random_signals(bars: int, columns: int, seed: int):
    rng = np.random.default_rng(seed)
    rates = np.linspace(0.01, 0.1, columns)
    entries = rng.random((bars, columns)) < rates
    exits = rng.random((bars, columns)) < rates
    return entries, exits


def test_random_signals_are_the_plain_loops(data: pd.DataFrame) -> None:
    close = data["close"]
    entries, exits = random_signals(len(data), 6, seed=11)
    rng = np.random.default_rng(5)
    stop = close.to_numpy()[:, None] * (1 - rng.uniform(0.005, 0.04, (len(data), 6)))
    stop[rng.random(stop.shape) < 0.1] = np.nan
    stop[rng.random(stop.shape) < 0.05] = -1.0
    for levels in [None, stop]:
        got = threadx.simulate(close, entries, exits, stop=levels, fee=FEE)
        assert got.shape == (6, len(threadx.METRICS)) and got.index.name == "column"
        assert got["trades"].dtype == np.int64 and got["sharpe"].dtype == np.float64
        for c in range(6):
            want = plain_loop(close.to_numpy(), entries[:, c], exits[:, c], None if levels is None else levels[:, c])
            row = got.iloc[c]
            assert want["trades"] > 5
            for name, value in want.items():
                assert row[name] == pytest.approx(value, rel=1e-9, abs=1e-12, nan_ok=True), (c, name)
        per_year = data.index.to_series().diff().median() / pd.Timedelta(days=365)
        np.testing.assert_allclose(got["sharpe_annual"], got["sharpe"] / math.sqrt(per_year), rtol=1e-12)


def test_the_bb_atr_signals_give_the_built_in_bytes(data: pd.DataFrame) -> None:
    """The built-in strategy is these signals: the same engine, the same bytes."""
    ind = threadx.indicators(data, "bbands:period=20,std=2", "atr:period=14", device="cpu")
    close = data["close"]
    middle, lower, atr = ind["bbands_20_2_middle"], ind["bbands_20_2_lower"], ind["atr_14"]
    ready = middle.notna() & atr.notna()
    entries = (close < lower) & ready
    exits = close > middle
    stop = close - 2.0 * atr
    got = threadx.simulate(close, entries, exits, stop=stop, fee=FEE).iloc[0]
    built_in = threadx.backtest(data, "bb_atr", fee=FEE, bb_period=20, bb_std=2, atr_period=14, atr_mult=2)
    assert built_in.metrics["trades"] > 20
    for name, value in built_in.metrics.items():
        assert got[name] == value or (math.isnan(got[name]) and math.isnan(value)), name


def test_shapes_broadcast_and_labels(data: pd.DataFrame) -> None:
    close = data["close"]
    entries, exits = random_signals(len(data), 4, seed=2)
    wide = threadx.simulate(close, entries, np.repeat(exits[:, :1], 4, axis=1))
    broadcast = threadx.simulate(close, entries, exits[:, 0])
    pd.testing.assert_frame_equal(wide, broadcast, check_exact=True)
    one = threadx.simulate(close.to_numpy(), entries[:, 2], exits[:, 0])
    same = ["total_return", "trades", "closed_trades", "win_rate", "max_drawdown", "sharpe", "exposure"]
    pd.testing.assert_series_equal(one.iloc[0][same], broadcast.iloc[2][same], check_exact=True, check_names=False)
    assert math.isnan(one["sharpe_annual"].iloc[0]), "no timestamps: bars per year unknown"
    assert threadx.simulate(close.to_numpy(), entries[:, 2], exits[:, 0], periods_per_year=35040).notna().all(axis=None)
    labelled = threadx.simulate(close, pd.DataFrame(entries, index=data.index, columns=list("abcd")), exits[:, 0])
    assert list(labelled.index) == list("abcd")
    as_ints = threadx.simulate(close, entries.astype(np.int8), exits[:, 0])
    pd.testing.assert_frame_equal(as_ints, broadcast, check_exact=True)


def test_the_same_bytes_on_the_cpu_and_the_gpu(data: pd.DataFrame) -> None:
    entries, exits = random_signals(len(data), 32, seed=9)
    stop = data["close"] * 0.98
    cpu = threadx.simulate(data["close"], entries, exits, stop=stop, device="cpu")
    gpu = threadx.simulate(data["close"], entries, exits, stop=stop, device="gpu")
    assert cpu.attrs["device"] == "cpu"
    if threadx.devices():
        assert gpu.attrs["device"] == "gpu", "an adapter is there: the kernel ran"
    assert cpu.to_numpy().tobytes() == gpu.to_numpy().tobytes()


def test_bad_signals_are_refused(data: pd.DataFrame) -> None:
    close = data["close"]
    entries, exits = random_signals(len(data), 3, seed=1)
    with pytest.raises(ValueError, match=r"exits has shape \(2999, 3\); expected \(3000, 3\)"):
        threadx.simulate(close, entries, exits[1:])
    with pytest.raises(ValueError, match="different numbers of columns"):
        threadx.simulate(close, entries, exits[:, :2])
    with pytest.raises(ValueError, match="entries must be booleans"):
        threadx.simulate(close, entries.astype(float), exits)
    with pytest.raises(ValueError, match=r"stop level \+inf at bar 4, column 0"):
        threadx.simulate(close, entries, exits, stop=np.where(np.arange(len(data)) == 4, np.inf, 1.0))
    with pytest.raises(ValueError, match="close, row 2, column `close`: price -1 is not positive"):
        threadx.simulate(np.array([1.0, 2.0, -1.0]), np.ones(3, bool), np.ones(3, bool))
    with pytest.raises(ValueError, match="fee"):
        threadx.simulate(close, entries, exits, fee=1.5)
    # A negative stop is refused, as vectorbt refuses it ("Stop value must be 0 or greater").
    with pytest.raises(ValueError, match=r"sl_stop at bar 0, column 0 is -0.1: a fraction of the entry's close is 0 or more"):
        threadx.simulate(close, entries, exits, sl_stop=-0.1)
    with pytest.raises(ValueError, match=r"tp_stop at bar 17, column 0 is -0.5"):
        threadx.simulate(close, entries, exits, tp_stop=np.where(np.arange(len(data))[:, None] == 17, -0.5, 0.02) * np.ones(3))
    # pandas inputs are read by position, so they must have close's bars; arrays are taken as they are.
    shifted = pd.Series(entries[:, 0], index=close.index + pd.Timedelta("1min"))
    with pytest.raises(ValueError, match=r"entries has other bars \(index\) than close: give it close's index"):
        threadx.simulate(close, shifted, exits[:, 0])
    with pytest.raises(ValueError, match=r"high has other bars \(index\) than close"):
        threadx.simulate(close, entries, exits, high=data["high"].reset_index(drop=True), low=data["low"])
    same = threadx.simulate(close, pd.Series(entries[:, 0], index=close.index), exits[:, 0])
    assert same.equals(threadx.simulate(close, entries[:, 0], exits[:, 0]))
