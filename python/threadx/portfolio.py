"""One account over many symbols (docs/portfolios.md): ``simulate(close, entries, exits,
cash_sharing=True, size=..., size_type=...)``, vectorbt's ``Portfolio.from_signals(...,
group_by=True, cash_sharing=True, call_seq="auto")``; ``backtest(..., portfolio=True)``
(``PortfolioBacktest``) and ``sweep(..., portfolio=True)``, a strategy's rules."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np
import pandas as pd

from . import _report, _tables, _threadx
from ._inputs import Data, _bools, _by_symbol, _datetime_ms, _f64, _market, _opt_float, _text, _utc_index
from ._progress import ProgressCallback, _progress

#: What ``size_type`` may be (vectorbt's names and meanings).
SIZE_TYPES = ("percent", "value", "targetpercent")


def simulate_portfolio(
    close: Any,
    entries: Any,
    exits: Any,
    *,
    size: Optional[float],
    size_type: Optional[str],
    lot: Optional[float],
    min_size: Optional[float],
    init_cash: float,
    fee: float,
    slippage: float,
    periods_per_year: Optional[float],
    details: bool,
    max_positions: Optional[int] = None,
    levels: Optional[Dict[str, Any]] = None,
    short_entries: Any = None,
    short_exits: Any = None,
) -> pd.DataFrame:
    """The one account's metrics row (index ``["portfolio"]``); with ``details``, its
    ``equity``, ``cash``, ``positions`` and ``trades`` in ``attrs``. ``levels`` holds
    vectorbt's ``sl_stop``, ``tp_stop``, ``sl_trail`` and the ``open``, ``high`` and
    ``low`` that check them inside the bar; ``short_entries`` and ``short_exits`` sell
    short (one given alone: the other all False)."""
    prices = _f64(close, "close", "close")
    if prices.ndim != 2:
        raise ValueError(
            f"close has shape {prices.shape}: with cash_sharing=True it is one column per symbol, (bars, symbols)"
        )
    signals = {}
    shorts = short_entries is not None or short_exits is not None
    given = [("entries", entries), ("exits", exits)]
    if shorts:
        no = np.zeros(prices.shape, dtype=bool)
        given += [("short_entries", no if short_entries is None else short_entries)]
        given += [("short_exits", no if short_exits is None else short_exits)]
    for name, value in given:
        array = _bools(_by_symbol(value, close, name), name)
        if array.ndim == 1 and prices.shape[1] == 1:
            array = array.reshape(-1, 1)
        if array.shape != prices.shape:
            raise ValueError(f"{name} has shape {array.shape}; close has {prices.shape} (bars, symbols)")
        signals[name] = array
    kind = "percent" if size_type is None else str(size_type).lower()
    if kind not in SIZE_TYPES:
        raise ValueError(f"size_type={size_type!r}: one of {', '.join(SIZE_TYPES)}")
    index = close.index if isinstance(close, pd.DataFrame) else pd.RangeIndex(prices.shape[0], name="bar")
    symbols = close.columns if isinstance(close, pd.DataFrame) else pd.RangeIndex(prices.shape[1], name="symbol")
    times = _datetime_ms(index, "close") if isinstance(index, pd.DatetimeIndex) else None
    table, record = _threadx.simulate_portfolio(
        np.ascontiguousarray(prices),
        np.ascontiguousarray(signals["entries"]),
        np.ascontiguousarray(signals["exits"]),
        size=1.0 if size is None else float(size),
        size_type=kind,
        lot=_opt_float(lot),
        min_size=0.0 if min_size is None else float(min_size),
        init_cash=float(init_cash),
        fee=fee,
        slippage=float(slippage),
        periods_per_year=_opt_float(periods_per_year),
        times=times,
        details=bool(details),
        max_positions=None if max_positions is None else int(max_positions),
        **_level_arrays({k: _by_symbol(v, close, k) for k, v in (levels or {}).items()}, prices),
        shorts=[np.ascontiguousarray(signals[n]) for n in ("short_entries", "short_exits")] if shorts else None,
    )
    frame = _tables.frame(table)
    frame.index = pd.Index(["portfolio"], name="account")
    frame.attrs["device"] = "cpu"
    if record is not None:
        frame.attrs["equity"] = pd.Series(record["equity"], index=index, name="equity")
        frame.attrs["cash"] = pd.Series(record["cash"], index=index, name="cash")
        frame.attrs["positions"] = pd.DataFrame(record["positions"], index=index, columns=symbols)
        frame.attrs["trades"] = _trades(record["trades"], index, symbols)
    return frame


def _level_arrays(levels: Dict[str, Any], prices: np.ndarray) -> Dict[str, Any]:
    """``sl_stop`` and ``tp_stop`` broadcast to the closes' (bars, symbols), ``sl_trail``
    one flag, and ``range``: the open (the close where not given, as vectorbt takes it),
    high and low, each (bars, symbols), when high and low are given."""
    out: Dict[str, Any] = {}
    for name in ("sl_stop", "tp_stop"):
        value = levels.get(name)
        if value is not None:
            array = _f64(value, name, name)
            try:
                out[name] = np.ascontiguousarray(np.broadcast_to(array, prices.shape))
            except ValueError:
                raise ValueError(f"{name} has shape {array.shape}; it must broadcast to the closes' {prices.shape}") from None
    trail = levels.get("sl_trail", False)
    if not isinstance(trail, (bool, np.bool_)):
        raise ValueError(f"sl_trail={trail!r}: with cash_sharing=True, one flag for every symbol (True or False)")
    out["sl_trail"] = bool(trail)
    given = {name: levels.get(name) for name in ("open", "high", "low") if levels.get(name) is not None}
    if ("high" in given) != ("low" in given):
        raise ValueError("give high and low together: stops inside the bar need both")
    if "high" in given:
        arrays = {name: _f64(value, name, name) for name, value in given.items()}
        for name, array in arrays.items():
            if array.shape != prices.shape:
                raise ValueError(f"{name} has shape {array.shape}; close has {prices.shape} (bars, symbols)")
        opens = arrays.get("open", prices)
        out["range"] = [np.ascontiguousarray(a) for a in (opens, arrays["high"], arrays["low"])]
    elif given:
        raise ValueError("open: stops inside the bar need high and low (open is optional with them)")
    return out


def _trades(raw: Dict[str, Any], bars: pd.Index, symbols: pd.Index) -> pd.DataFrame:
    """The trades in the order filled, indexed by ``trade``: symbol, side, entry and exit
    (``bars`` at their bars, and the bars; an open trade's exit is missing), units,
    prices, fees, profit in cash, return (a long's on the cash spent, a short's on the
    units' value at the sale and its fee) and why each ended."""
    entry_bar = np.asarray(raw["entry_bar"])
    exit_bar = np.asarray(raw["exit_bar"])
    closed = exit_bar >= 0
    exit_time = pd.Series(bars.take(np.where(closed, exit_bar, 0))).where(closed)
    trades = pd.DataFrame(
        {
            "symbol": symbols.take(np.asarray(raw["symbol"])),
            "side": pd.Categorical(raw["side"], categories=["long", "short"]),
            "entry_time": bars.take(entry_bar),
            "entry_bar": entry_bar,
            "exit_time": exit_time.to_numpy(),
            "exit_bar": pd.array(np.where(closed, exit_bar, 0), dtype="Int64", copy=True),
            "size": raw["size"],
            "entry_price": raw["entry_price"],
            "exit_price": raw["exit_price"],
            "entry_fees": raw["entry_fees"],
            "exit_fees": raw["exit_fees"],
            "pnl": raw["pnl"],
            "return": raw["return"],
            "exit_reason": pd.Categorical(raw["exit_reason"], categories=_tables.EXIT_REASONS),
        }
    )
    trades.loc[~closed, "exit_bar"] = pd.NA
    trades.index.name = "trade"
    return trades


@dataclass(frozen=True)
class PortfolioBacktest:
    """One parameter set over many symbols as one account (``backtest(...,
    portfolio=True)``): its metrics, the account's ``equity`` and ``cash`` per bar of the
    clock (every symbol's bar times), each symbol's units held (``positions``), and every
    trade with its ``symbol``, ``size``, prices, fees and ``pnl`` in the account's
    currency (an open trade's exit fields missing)."""

    strategy: str
    params: Dict[str, Any]
    metrics: Dict[str, float]
    equity: pd.Series
    cash: pd.Series
    positions: pd.DataFrame
    trades: pd.DataFrame
    bars_per_year: float
    #: The value bought and sold over the mean equity, and the symbols held at a bar's
    #: close on average.
    turnover: float = float("nan")
    mean_positions: float = float("nan")
    _page: Any = field(default=None, repr=False, compare=False)

    def report(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the account's HTML report to ``path`` (``threadx backtest --portfolio
        --report``'s page: key metrics with the turnover and the positions held, equity
        over drawdown, each symbol's share of the equity over time, each symbol's
        contribution, the trades); one file, no network."""
        _report.write(path, self._page.html())

    def _repr_html_(self) -> str:
        return _report.inline(self._page.html())


def _portfolio_backtest(
    data: Data,
    strategy: str,
    fee: float,
    slippage: float,
    periods_per_year: Optional[float],
    sizing: Mapping[str, Any],
    params: Mapping[str, Any],
) -> PortfolioBacktest:
    """``backtest(..., portfolio=True)``."""
    market = _market(data)
    if not isinstance(market, _threadx.Universe):
        market = _threadx.Universe.from_bars("data", [("data", market[0])])
    out = _threadx.backtest_portfolio(
        market,
        strategy,
        [(name, _text(name, value)) for name, value in params.items()],
        float(fee),
        slippage=float(slippage),
        **_account(sizing),
        periods_per_year=_opt_float(periods_per_year),
    )
    index = _utc_index(out["times"])
    symbols = pd.Index(out["symbols"], name="symbol")
    record = out["record"]
    return PortfolioBacktest(
        strategy=strategy,
        params=dict(out["params"]),
        metrics=out["metrics"],
        equity=pd.Series(record["equity"], index=index, name="equity"),
        cash=pd.Series(record["cash"], index=index, name="cash"),
        positions=pd.DataFrame(record["positions"], index=index, columns=symbols),
        trades=_trades(record["trades"], index, symbols),
        bars_per_year=out["bars_per_year"],
        turnover=float(out["turnover"]),
        mean_positions=float(out["mean_positions"]),
        _page=out["page"],
    )


def _portfolio_sweep(
    market: Any,
    request: str,
    sizing: Mapping[str, Any],
    progress: Union[bool, ProgressCallback],
    overfitting: Any,
    ranking: Tuple[str, bool, List[str]],
) -> SweepFrame:
    """``sweep(..., portfolio=True)``: every combo one account over the symbols, with the
    overfitting statistics of the accounts in ``.attrs["overfitting"]`` when asked; with
    ``walk_forward``, the windows of the account's clock, one row each."""
    if not isinstance(market, _threadx.Universe):
        market = _threadx.Universe.from_bars("data", [("data", market[0])])
    if overfitting is not False:
        fields = {} if overfitting is True else dict(overfitting)
        request = json.dumps({**json.loads(request), "overfitting": fields})
    by, minimize, rules = ranking
    options = _account(sizing)
    callback, finish = _progress(progress, "combos")
    try:
        out = _threadx.sweep_portfolio(
            market, request, progress=callback, by=by, minimize=minimize, constraints=rules, **options
        )
    finally:
        finish()
    if "windows" in out:
        return _report.sweep_frame(_tables.frame(out["windows"]).set_index("window"), None)
    rows = _report.sweep_frame(_tables.frame(out["rows"]).set_index("combo"), None)
    if "overfitting" in out:
        rows.attrs["overfitting"] = json.loads(out["overfitting"])
    return rows


def _portfolio_search(
    data: Data, request: str, sizing: Mapping[str, Any], callback: Optional[ProgressCallback]
) -> Dict[str, Any]:
    """``search(..., portfolio=True)``: the native search's output over the symbols of
    ``data`` as one account."""
    market = _market(data)
    if not isinstance(market, _threadx.Universe):
        market = _threadx.Universe.from_bars("data", [("data", market[0])])
    return dict(_threadx.search_portfolio(market, request, callback, **_account(sizing)))


def _no_portfolio_page() -> Any:
    """A portfolio search's report, which is not built yet (issue #52)."""
    raise ValueError("the report of a portfolio search is not built yet")


def _sizing(portfolio: bool, **sizing: Any) -> Dict[str, Any]:
    """The sizing keywords of ``backtest`` and ``sweep``, refused without ``portfolio=True``."""
    given = [name for name, value in sizing.items() if value is not None]
    if given and not portfolio:
        raise ValueError(f"{', '.join(given)}: sizing needs portfolio=True (one account over the symbols)")
    return sizing


def _account(sizing: Mapping[str, Any]) -> Dict[str, Any]:
    """The sizing keywords as the native module takes them: None where not given (the rule
    file's ``[sizing]``, else the default: all the cash left into each entry, a starting
    cash of 1)."""
    def number(name: str) -> Optional[float]:
        return None if sizing.get(name) is None else float(sizing[name])

    return {
        "size": number("size"),
        "size_type": None if sizing["size_type"] is None else str(sizing["size_type"]).lower(),
        "lot": number("lot"),
        "min_size": number("min_size"),
        "init_cash": number("init_cash"),
        "max_positions": None if sizing.get("max_positions") is None else int(sizing["max_positions"]),
        "leverage": number("leverage"),
    }
