"""``simulate``: your own signals (and vectorbt's stop arguments) run by ThreadX's engine,
one metrics row per column, and with ``details=True`` each column's trades and equity."""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
import pandas as pd

from . import _tables, _threadx
from ._inputs import _bools, _datetime_ms, _f64, _opt_float, _same_bars
from .portfolio import simulate_portfolio


def simulate(
    close: Any,
    entries: Any,
    exits: Any = None,
    stop: Any = None,
    fee: Optional[float] = None,
    device: Optional[str] = None,
    *,
    open: Any = None,
    high: Any = None,
    low: Any = None,
    short_entries: Any = None,
    short_exits: Any = None,
    sl_stop: Any = None,
    tp_stop: Any = None,
    sl_trail: Any = False,
    fees: Optional[float] = None,
    slippage: float = 0.0,
    fill: str = "close",
    periods_per_year: Optional[float] = None,
    init_cash: float = 1.0,
    details: bool = False,
    cash_sharing: bool = False,
    size: Optional[float] = None,
    size_type: Optional[str] = None,
    lot: Optional[float] = None,
    min_size: Optional[float] = None,
    max_positions: Optional[int] = None,
) -> pd.DataFrame:
    """Your own signals, run by ThreadX's engine (the rules of docs/strategies.md, which
    are vectorbt's ``Portfolio.from_signals`` at its defaults): one metrics row per column.

    ``close`` is the closes, or a frame with ``open``, ``high``, ``low`` and ``close``
    columns. ``entries``, ``exits``, ``short_entries`` and ``short_exits`` are booleans of
    shape (bars,) or (bars, columns); an opposite entry reverses the position. ``stop``
    optionally gives a long's stop as a price level per bar. vectorbt's names work as
    there: ``sl_stop`` and ``tp_stop`` are fractions of the entry close (scalars or
    arrays that broadcast to (bars, columns), read at the entry bar), ``sl_trail=True``
    makes ``sl_stop`` trail the best price since the entry (or one flag per column), ``fees`` is ``fee``.
    Decisions and fills are at the close, all cash in; with ``high`` and ``low`` given,
    stops and take-profits are checked inside each bar after the entry bar (filled at the
    level, or at the open when the bar opens beyond it; the stop first when a bar reaches
    both), otherwise against closes. ``fill="next_open"`` fills each decision at the next
    bar's open instead (ThreadX's own; vectorbt has no such argument). ``fee`` (default
    0.001) and ``slippage`` (a fraction of the price, against you) apply to every fill.
    The rows are the same bytes on the CPU and any GPU (``result.attrs["device"]`` says
    where they ran).

    ``details=True`` adds ``result.attrs["equity"]`` (each column's equity at every close,
    bars × columns, starting from ``init_cash``) and ``result.attrs["trades"]`` (every
    column's trades as ``Backtest.trades`` gives them, with their ``column`` and ``pnl``,
    the profit in currency out of ``init_cash``), vectorbt's ``pf.value()`` and
    ``pf.trades.records_readable`` at ``init_cash``. The metrics are ratios, the same for
    any ``init_cash``.

    ``cash_sharing=True`` trades every column of ``close`` (one per symbol, NaN where a
    symbol has no bar; signal and level frames read by symbol, as pandas aligns them)
    against one account of ``init_cash``: vectorbt's
    ``from_signals(..., group_by=True, cash_sharing=True, call_seq="auto")``. Each entry
    buys ``size`` of ``size_type`` ``"percent"`` (a fraction of the cash left, the default
    1.0), ``"value"`` (cash) or ``"targetpercent"`` (a fraction of the account's value),
    in lots of ``lot`` units and at least ``min_size``, holding at most ``max_positions``
    positions at once (no limit by default); a bar's exits sell first. ``sl_stop``,
    ``tp_stop`` and ``sl_trail`` close a position at its levels as vectorbt's do (frames
    of ``open``, ``high`` and ``low``, one column per symbol, check them inside the bar). It
    returns the account's one row (``attrs``: ``equity``, ``cash``, ``positions`` and
    ``trades`` with ``details=True``); docs/portfolios.md has the rules."""
    if cash_sharing:
        return _one_account(locals())
    sizing = {"size": size, "size_type": size_type, "lot": lot, "min_size": min_size, "max_positions": max_positions}
    given = [name for name, v in sizing.items() if v is not None]
    if given:
        raise ValueError(f"{', '.join(given)}: sizing needs cash_sharing=True (one account over the columns)")
    cash = float(init_cash)
    if not (np.isfinite(cash) and cash > 0):
        raise ValueError(f"init_cash={init_cash}: the starting cash must be a positive number")
    if fill not in ("close", "next_open"):
        raise ValueError(f"fill={fill!r}: \"close\" (at the bar's close) or \"next_open\" (at the next bar's open)")
    if fee is not None and fees is not None and float(fee) != float(fees):
        raise ValueError(f"fee={fee} and fees={fees}: give one (fees is vectorbt's name for fee)")
    cost = 0.001 if fee is None and fees is None else float(fee if fee is not None else fees)  # type: ignore[arg-type]
    if isinstance(close, pd.DataFrame):
        frame = close
        if "close" not in frame.columns:
            raise ValueError(f"close: a frame needs a `close` column (and optionally open, high, low); it has {list(frame.columns)}")
        close = frame["close"]
        open = frame["open"] if open is None and "open" in frame.columns else open
        high = frame["high"] if high is None and "high" in frame.columns else high
        low = frame["low"] if low is None and "low" in frame.columns else low
    close_series = close if isinstance(close, pd.Series) else None
    # Every input of one row per bar is read by position: a pandas one must have close's bars.
    for name, value in (("open", open), ("high", high), ("low", low), ("entries", entries), ("exits", exits),
                        ("short_entries", short_entries), ("short_exits", short_exits), ("stop", stop)):
        _same_bars(value, close_series, name)
    for name, value in (("sl_stop", sl_stop), ("tp_stop", tp_stop)):
        # A Series of these may hold one value per column; a frame is one row per bar.
        if isinstance(value, pd.DataFrame):
            _same_bars(value, close_series, name)
    prices = _f64(close, "close", "close")
    if prices.ndim != 1:
        raise ValueError(f"close must be one price per bar, shape (bars,); got shape {prices.shape}")
    times = None
    if close_series is not None and isinstance(close_series.index, pd.DatetimeIndex):
        times = _datetime_ms(close_series.index, "close")
    ohlc = {}
    for name, value in (("open", open), ("high", high), ("low", low)):
        if value is not None:
            array = _f64(value, name, name)
            if array.shape != prices.shape:
                raise ValueError(f"{name} has shape {array.shape}; expected {prices.shape}, one price per bar like close")
            ohlc[name] = array
    if ("high" in ohlc) != ("low" in ohlc):
        raise ValueError("give high and low together: stops inside the bar need both")
    if fill == "next_open" and "open" not in ohlc:
        raise ValueError('fill="next_open" needs the opens: pass open= (or a frame with an `open` column)')
    if ohlc and "open" not in ohlc:
        ohlc["open"] = prices
    bars = _threadx.Bars.from_close(prices, times, ohlc.get("open"), ohlc.get("high"), ohlc.get("low"))
    labels: Optional[pd.Index] = None
    signals: Dict[str, np.ndarray] = {}
    for name, value in (("entries", entries), ("exits", exits), ("short_entries", short_entries), ("short_exits", short_exits)):
        if value is None:
            continue
        signals[name] = _bools(value, name)
        if isinstance(value, pd.DataFrame):
            labels = value.columns
    levels = None if stop is None else _f64(stop, "stop", "stop")
    if isinstance(stop, pd.DataFrame):
        labels = stop.columns
    two_d = [*signals.values(), *([levels] if levels is not None else [])]
    for a in two_d:
        if a.ndim not in (1, 2):
            raise ValueError(f"signals must have shape (bars,) or (bars, columns); got shape {a.shape}")
    widths = {a.shape[1] for a in two_d if a.ndim == 2 and a.shape[1] != 1}
    given = {"sl_stop": sl_stop, "tp_stop": tp_stop}
    fractions = {name: _f64(v, name, name) for name, v in given.items() if v is not None}
    for name, a in fractions.items():
        if a.ndim == 2 and a.shape[1] != 1:
            widths.add(a.shape[1])
        if isinstance(given[name], pd.DataFrame):
            labels = given[name].columns
    if len(widths) > 1:
        raise ValueError(f"the signals and stops have different numbers of columns: {sorted(widths)}")
    width = widths.pop() if widths else 1
    n = len(prices)

    def wide(a: np.ndarray) -> np.ndarray:
        a = a.reshape(-1, 1) if a.ndim == 1 else a
        return np.broadcast_to(a, (a.shape[0], width))

    def spread(name: str) -> Optional[np.ndarray]:
        a = fractions.get(name)
        if a is None:
            return None
        try:
            # numpy's rules, as vectorbt's (a scalar, a value per column, (bars, columns)),
            # and a (bars,) array per bar, as `stop` and the signals take one.
            return np.broadcast_to(a if a.ndim != 1 or len(a) != n or width == n else a.reshape(-1, 1), (n, width))
        except ValueError:
            raise ValueError(f"{name} has shape {a.shape}: it must broadcast to (bars, columns) = ({n}, {width})") from None

    if "exits" not in signals:
        signals["exits"] = np.zeros(n, dtype=bool)
    trail = np.asarray(sl_trail.to_numpy() if isinstance(sl_trail, (pd.Series, pd.DataFrame)) else sl_trail)
    if trail.dtype != bool and not (trail.dtype.kind in "iu" and set(np.unique(trail)) <= {0, 1}):
        raise ValueError(f"sl_trail must be True/False, one for all columns or one per column (got dtype {trail.dtype})")
    if trail.ndim == 2 and trail.shape[0] == 1:
        trail = trail[0]
    if trail.ndim > 1 or (trail.ndim == 1 and len(trail) not in (1, width)):
        raise ValueError(
            f"sl_trail has shape {trail.shape}: give one flag for all columns or one per column ({width},); "
            "ThreadX reads it per column, not per bar"
        )
    rows, device_used, more = _threadx.simulate(
        bars,
        wide(signals["entries"]),
        wide(signals["exits"]),
        short_entries=None if "short_entries" not in signals else wide(signals["short_entries"]),
        short_exits=None if "short_exits" not in signals else wide(signals["short_exits"]),
        stop=None if levels is None else wide(levels),
        sl_stop=spread("sl_stop"),
        tp_stop=spread("tp_stop"),
        sl_trail=[bool(v) for v in np.atleast_1d(trail)],
        intrabar="high" in ohlc,
        next_open=fill == "next_open",
        fee=cost,
        slippage=float(slippage),
        periods_per_year=_opt_float(periods_per_year),
        device=device,
        details=bool(details),
    )
    index = labels if labels is not None and len(labels) == width else pd.RangeIndex(width, name="column")
    frame = _tables.frame(rows)
    frame.index = index
    frame.attrs["device"] = device_used
    if more is not None:
        bar_index = close_series.index if close_series is not None else pd.RangeIndex(n, name="bar")
        frame.attrs["equity"] = pd.DataFrame(cash * more["equity"], index=bar_index, columns=index)
        frame.attrs["trades"] = _column_trades(more["trades"], bar_index, index, cash)
    return frame


def _one_account(args: Dict[str, Any]) -> pd.DataFrame:
    """``simulate(..., cash_sharing=True)``: what the portfolio takes, checked, then run."""
    unsupported = {"stop": None, "fill": "close", "device": None}
    given = [name for name, default in unsupported.items() if not _is_default(args[name], default)]
    if given:
        raise ValueError(
            f"{', '.join(given)}: cash_sharing=True takes closes (and open, high, low), entries and exits, "
            "short_entries and short_exits, sl_stop, tp_stop and sl_trail (filled at the close)"
        )
    fee, fees = args["fee"], args["fees"]
    if fee is not None and fees is not None and float(fee) != float(fees):
        raise ValueError(f"fee={fee} and fees={fees}: give one (fees is vectorbt's name for fee)")
    cost = 0.001 if fee is None and fees is None else float(fee if fee is not None else fees)
    exits = args["exits"] if args["exits"] is not None else np.zeros(np.shape(args["entries"]), dtype=bool)
    return simulate_portfolio(
        args["close"], args["entries"], exits, size=args["size"], size_type=args["size_type"], lot=args["lot"],
        min_size=args["min_size"], init_cash=args["init_cash"], fee=cost, slippage=args["slippage"],
        periods_per_year=args["periods_per_year"], details=args["details"], max_positions=args["max_positions"],
        levels={name: args[name] for name in ("sl_stop", "tp_stop", "sl_trail", "open", "high", "low")},
        short_entries=args["short_entries"], short_exits=args["short_exits"],
    )


def _is_default(value: Any, default: Any) -> bool:
    return value is None if default is None else (not isinstance(value, (np.ndarray, pd.Series)) and value == default)


def _column_trades(raw: Dict[str, Any], bars: pd.Index, columns: pd.Index, cash: float) -> pd.DataFrame:
    """Every column's trades, each with its column's label and its profit in currency:
    a column's equity before a trade is ``cash`` times its earlier trades' growth (all
    cash in, flat between trades), and the trade's return applies to that."""
    trades = _tables.trades_frame(raw, bars)
    column = np.asarray(raw["column"])
    growth = 1.0 + trades["return"].to_numpy()
    before = pd.Series(growth).groupby(column).cumprod().groupby(column).shift(1, fill_value=1.0).to_numpy()
    trades.insert(0, "column", columns.take(column))
    trades.insert(trades.columns.get_loc("return") + 1, "pnl", cash * before * trades["return"].to_numpy())
    return trades
