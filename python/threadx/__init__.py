"""ThreadX for Python: indicators, backtests, parameter sweeps and your own signals on
pandas and numpy, run by the ThreadX engine on the CPU or a GPU, with the same bytes on
every device.

Data is a pandas DataFrame (a DatetimeIndex or a time column, and open/high/low/close
[/volume] columns in any case), an Arrow table (pyarrow, polars), a dict of numpy
arrays, the path of a CSV, Parquet or Arrow file, or ``synthetic(bars, seed)``. Every function releases the GIL while it computes; bad input
raises ``ValueError`` with the CLI's message, a missing file ``FileNotFoundError``, a
device failure that could not fall back ``RuntimeError``; Ctrl-C stops a sweep between
chunks with ``KeyboardInterrupt``. Definitions: docs/strategies.md; this API:
docs/python.md.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np
import pandas as pd

from . import _report, _tables, _threadx

__version__: str = _threadx.__version__

from ._inputs import Data, _axis_value, _bars, _f64, _finite, _market, _opt_float, _opt_int, _text, _utc_index
from ._progress import ProgressCallback, _progress
from ._report import METRICS, SweepFrame
from .overfitting import PboResult, deflated_sharpe, pbo
from .portfolio import (
    PortfolioBacktest,
    _no_portfolio_page,
    _portfolio_backtest,
    _portfolio_search,
    _portfolio_sweep,
    _sizing,
)
from .signals import simulate

__all__ = [
    "METRICS",
    "Backtest",
    "PboResult",
    "SearchResult",
    "Session",
    "SweepFrame",
    "backtest",
    "deflated_sharpe",
    "devices",
    "indicators",
    "load",
    "pbo",
    "search",
    "simulate",
    "PortfolioBacktest",
    "strategies",
    "sweep",
    "synthetic",
]

#: A built-in strategy's name (``"bb_atr"``) or the path of a rule file (``"donchian.toml"``).
StrategyName = Union[str, "os.PathLike[str]"]
#: Why a trade ended, the categories of ``Backtest.trades["exit_reason"]``.
EXIT_REASONS = _tables.EXIT_REASONS
#: Which way a trade faced, the categories of ``Backtest.trades["side"]``.
SIDES = _tables.SIDES


def synthetic(bars: int = 35_040, seed: int = 42, market: str = "btc") -> pd.DataFrame:
    """ThreadX's deterministic synthetic market as a DataFrame: BTC-like 15-minute bars,
    or with ``market="fx"`` EURUSD-like hourly bars. The same seed gives the same bars on
    every machine (the CLI's ``--data synthetic:bars=N,seed=S``)."""
    if isinstance(bars, bool) or not isinstance(bars, (int, np.integer)) or bars < 1:
        raise ValueError(f"bars must be a positive whole number (got {bars!r})")
    return load(f"synthetic:bars={int(bars)},seed={int(seed)},market={market}")


def load(source: Union[str, "os.PathLike[str]"]) -> pd.DataFrame:
    """A CSV, Parquet or Arrow (Feather) file (or a ``synthetic:...`` spec) read and
    checked as ``threadx --data`` reads it, as a DataFrame indexed by UTC time."""
    bars = _threadx.Bars.load(os.fspath(source))
    arrays = bars.arrays()
    index = _utc_index(arrays.pop("timestamp"))
    return pd.DataFrame(arrays, index=index, copy=False)


def indicators(data: Data, *specs: Union[str, Iterable[str]], device: Optional[str] = None) -> pd.DataFrame:
    """Indicator values (TA-Lib's definitions) as a DataFrame indexed like the data, one
    column per output, e.g. ``indicators(df, "bbands:period=20,std=2", "atr:period=14")``
    (or the specs as one list). ``device``: ``"auto"``, ``"cpu"`` or ``"gpu"`` (default:
    ``THREADX_DEVICE``, else auto)."""
    flat = [s for spec in specs for s in ([spec] if isinstance(spec, str) else list(spec))]
    if not all(isinstance(s, str) for s in flat):
        raise TypeError(f"indicator specs are text such as \"atr:period=14\"; got {[type(s).__name__ for s in flat]}")
    bars, index = _bars(data)
    columns = _threadx.indicators(bars, flat, device)
    return pd.DataFrame(dict(columns), index=index, copy=False)


@dataclass(frozen=True)
class Backtest:
    """One backtest: its parameters, metrics, trades and equity curve (equity starts at 1).

    The metrics are the bytes a sweep reports for the same combo on any device."""

    strategy: str
    params: Dict[str, Any]
    metrics: Dict[str, float]
    trades: pd.DataFrame
    equity: pd.Series
    bars_per_year: float
    _page: Any = field(default=None, repr=False, compare=False)

    def report(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes this backtest's HTML report to ``path`` (``threadx backtest --report``'s
        page: key metrics with the annualised figures, equity over drawdown, trades,
        monthly returns, the distribution of trade returns); one file, no network."""
        _report.write(path, self._page.html())

    def _repr_html_(self) -> str:
        return _report.inline(self._page.html())

    def __repr__(self) -> str:
        m = self.metrics
        params = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return (
            f"Backtest({self.strategy} {params}: return {m['total_return']:.2%}, "
            f"{m['trades']} trades, sharpe {m['sharpe']:.4f}, max drawdown {m['max_drawdown']:.2%})"
        )


def backtest(
    data: Data,
    strategy: StrategyName = "bb_atr",
    fee: float = 0.001,
    *,
    slippage: float = 0.0,
    periods_per_year: Optional[float] = None,
    device: Optional[str] = None,
    portfolio: bool = False,
    size: Optional[float] = None,
    size_type: Optional[str] = None,
    lot: Optional[float] = None,
    min_size: Optional[float] = None,
    init_cash: Optional[float] = None,
    max_positions: Optional[int] = None,
    leverage: Optional[float] = None,
    **params: Any,
) -> Union[Backtest, PortfolioBacktest]:
    """One parameter set of a strategy, e.g. ``backtest(df, "bb_atr", bb_period=20,
    bb_std=2)``: a built-in name (see ``strategies()``) or a rule file
    (``backtest(df, "donchian.toml", n=30)``, docs/writing-strategies.md); parameters not
    given keep their defaults. ``fee`` is the cost per side as a fraction of traded value,
    ``slippage`` the fraction the fill price moves against you on every fill;
    ``periods_per_year`` annualises the Sharpe ratio (default: from the timestamps).

    ``portfolio=True`` trades every symbol of ``data`` (a dict of frames by symbol, a
    folder, a glob, a long frame with a ``symbol`` column; one data set is a portfolio of
    one) against one account of ``init_cash`` (default 1), each entry sized by ``size``,
    ``size_type``, ``lot`` and ``min_size`` as ``simulate(..., cash_sharing=True)`` sizes
    it, at most ``max_positions`` held at once and at most ``leverage`` times its value
    in positions (docs/portfolios.md); it returns a
    ``PortfolioBacktest``. It runs on the CPU."""
    sizing = _sizing(
        portfolio, size=size, size_type=size_type, lot=lot, min_size=min_size, init_cash=init_cash,
        max_positions=max_positions, leverage=leverage,
    )
    if portfolio:
        return _portfolio_backtest(data, os.fspath(strategy), fee, slippage, periods_per_year, sizing, params)
    bars, index = _bars(data)
    pairs = [(name, _text(name, value)) for name, value in params.items()]
    out = _threadx.backtest(
        bars, os.fspath(strategy), pairs, float(fee), float(slippage), _opt_float(periods_per_year), device
    )
    trades = _tables.trades_frame(out["trades"], index)
    equity = pd.Series(out["equity"], index=index, name="equity", copy=False)
    return Backtest(
        strategy=os.fspath(strategy),
        params=out["params"],
        metrics=out["metrics"],
        trades=trades,
        equity=equity,
        bars_per_year=out["bars_per_year"],
        _page=out["page"],
    )


def sweep(
    data: Data,
    strategy: StrategyName = "bb_atr",
    grid: Optional[Mapping[str, Any]] = None,
    fee: float = 0.001,
    device: Optional[str] = None,
    random: Optional[int] = None,
    seed: Optional[int] = None,
    walk_forward: Optional[str] = None,
    progress: Union[bool, ProgressCallback] = True,
    *,
    periods_per_year: Optional[float] = None,
    chunk_size: Optional[int] = None,
    threads: Optional[int] = None,
    by: str = "sharpe",
    minimize: bool = False,
    constraints: Union[str, Iterable[str]] = (),
    overfitting: Union[bool, Mapping[str, Any]] = False,
    portfolio: bool = False,
    size: Optional[float] = None,
    size_type: Optional[str] = None,
    lot: Optional[float] = None,
    min_size: Optional[float] = None,
    init_cash: Optional[float] = None,
    max_positions: Optional[int] = None,
    leverage: Optional[float] = None,
) -> SweepFrame:
    """Every combo of a parameter grid, one row per combo: index ``combo`` (the CLI's
    combo number), the parameters, then the metrics, the values of ``threadx sweep``'s
    CSV. ``strategy``: a built-in name or a rule file (``"donchian.toml"``).

    ``grid`` maps parameters to values: a list, a ``range``, a number, or the CLI's text
    (``"10:50:5"``, ``"1.5,2"``); parameters not named keep their defaults, and no grid
    at all runs the strategy's own grid (its file's ``grid`` values). ``random=N`` runs N distinct combos drawn
    with ``seed`` (the whole grid, each combo once, when N is more than it has). ``walk_forward="train=BARS,test=BARS[,step=BARS]"`` returns one row
    per window instead (best combo by ``by`` in sample, its out-of-sample metrics).
    ``minimize=True`` ranks ``by`` smallest first (``--minimize``), and ``constraints``
    (``"trades >= 30"``, one or a list: ``--constraint``) rank only the combos that keep
    them: each window's winner, the overfitting statistics' top combos and the report's
    best combos (and a universe's ``passing_symbols``); the rows are the same.
    ``progress``: a bar (tqdm when installed, else text on stderr), False for none, or a
    callable ``(done, total)``. ``device``: ``"auto"``, ``"cpu"``, ``"gpu"`` or ``"all"``
    (every GPU and the CPU). ``overfitting=True`` (or a dict of ``blocks``,
    ``pbo_splits``, ``seed``, ``effective_trials``) puts ``threadx sweep
    --overfitting``'s object (PBO, DSR, stability) in the frame's
    ``.attrs["overfitting"]``.

    Many symbols run the same grid on each, one after another on the same devices: a
    dict of frames (or Arrow tables, or paths) by symbol, a long frame or Arrow table
    whose ``symbol`` column holds several symbols, a folder or a glob pattern
    (``"data/*.parquet"``). The frame is then indexed by ``(symbol, combo)``, each
    symbol's rows those of its own sweep, and ``.attrs["by_combo"]`` holds, by combo,
    the ``by`` metric's mean, median and minimum over the symbols and the share of them
    with a positive return (``threadx sweep``'s ``-by-combo`` table).

    ``portfolio=True`` trades the symbols together instead: each combo is one account of
    ``init_cash`` (default 1) over all of them and one row, indexed by ``combo``, whose
    last columns are the account's ``turnover`` and ``mean_positions``
    (``threadx sweep --portfolio``; docs/portfolios.md). ``size`` and ``size_type``
    (``"percent"`` of the cash left, the default 1.0; ``"value"``; ``"targetpercent"``),
    ``lot``, ``min_size`` and ``max_positions`` size each entry as ``simulate(...,
    cash_sharing=True)`` does; ``leverage`` caps the positions' value at that multiple of
    the account's. One data set is a portfolio of one symbol."""
    market = _market(data)
    request = _request(strategy, grid, fee, device, random, seed, walk_forward, periods_per_year, chunk_size, threads)
    rules = [constraints] if isinstance(constraints, str) else [str(c) for c in constraints]
    sizing = _sizing(
        portfolio, size=size, size_type=size_type, lot=lot, min_size=min_size, init_cash=init_cash,
        max_positions=max_positions, leverage=leverage,
    )
    if portfolio:
        return _portfolio_sweep(market, request, sizing, progress, overfitting, (by, minimize, rules))
    if isinstance(market, _threadx.Universe):
        if overfitting is not False:
            raise ValueError("overfitting statistics run on one symbol's data: sweep one symbol's frame")
        callback, finish = _progress(progress, "symbol·combos")
        try:
            # Every symbol's rows and the by-combo statistics are the same whichever way
            # `by` ranks.
            out = _threadx.sweep_universe(market, request, by, callback, rules)
        finally:
            finish()
        # The frame type of every sweep's rows; a universe's draw no report of their own.
        rows = _report.sweep_frame(_tables.frame(out["rows"]).set_index(["symbol", "combo"]), None)
        rows.attrs["by_combo"] = _tables.frame(out["by_combo"]).set_index("combo")
        return rows
    bars, _index = market
    if overfitting is not False:
        fields = {} if overfitting is True else dict(overfitting)
        request = json.dumps({**json.loads(request), "overfitting": fields})
    callback, finish = _progress(progress, "combos")
    try:
        out = _threadx.sweep(bars, request, by, callback, minimize, rules)
    finally:
        finish()
    if "windows" in out:
        return _report.sweep_frame(_tables.frame(out["windows"]).set_index("window"), None)
    rows = _report.sweep_frame(_tables.frame(out["rows"]).set_index("combo"), (bars, request, by, minimize, rules))
    if "overfitting" in out:
        rows.attrs["overfitting"] = json.loads(out["overfitting"])
    return rows


@dataclass(frozen=True)
class SearchResult:
    """What ``search`` found: every trial in evaluation order and the best feasible one.

    ``trials``: one row per evaluated combo, indexed by ``trial`` (0, 1, …), with the
    ``combo`` number, the parameters and the metrics, as ``threadx sweep --search``'s
    CSV. ``best``: the best feasible trial's row (None when no trial was feasible).
    ``stop``: why it ended (``"trials"``, ``"patience"``, ``"target"`` or
    ``"exhausted"``). Unpacks as ``trials, best = threadx.search(...)``."""

    trials: pd.DataFrame
    best: Optional[pd.Series]
    stop: str
    seconds: float
    search_seconds: float
    _page: Any = field(default=None, repr=False, compare=False)

    def report(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the search's HTML report to ``path`` (``threadx sweep --search
        --report``'s page: the best trials, heatmaps, the distribution, the best-so-far
        curve, overfitting when computed, and the backtest of the best trial)."""
        _report.write(path, self._page())

    def __iter__(self) -> Any:
        return iter((self.trials, self.best))


def search(
    data: Data,
    strategy: StrategyName = "bb_atr",
    method: str = "tpe",
    trials: int = 1000,
    *,
    grid: Optional[Mapping[str, Any]] = None,
    by: str = "sharpe",
    minimize: bool = False,
    constraints: Iterable[str] = (),
    batch: Optional[int] = None,
    seed: int = 0,
    patience: Optional[int] = None,
    target: Optional[float] = None,
    fee: float = 0.001,
    device: Optional[str] = None,
    periods_per_year: Optional[float] = None,
    threads: Optional[int] = None,
    progress: Union[bool, ProgressCallback] = True,
    overfitting: Union[bool, Mapping[str, Any]] = False,
    portfolio: bool = False,
    size: Optional[float] = None,
    size_type: Optional[str] = None,
    lot: Optional[float] = None,
    min_size: Optional[float] = None,
    init_cash: Optional[float] = None,
    max_positions: Optional[int] = None,
    leverage: Optional[float] = None,
) -> SearchResult:
    """Search a strategy's grid instead of running all of it, as ``threadx sweep
    --search``: ``method`` is ``"random"``, ``"sobol"``, ``"lhs"`` (designs fixed in
    advance) or ``"tpe"`` (the Tree-structured Parzen Estimator, which learns from each
    batch of ``batch`` combos, default 64). It evaluates at most ``trials`` combos (the
    whole grid, each combo once, when ``trials`` is more than it has),
    optimising the metric ``by`` (maximised unless ``minimize``); a combo that breaks one
    of ``constraints`` (``"trades >= 30"``) never wins. ``patience=K`` stops after K
    trials without improvement; ``target`` stops once the metric reaches it. The same
    arguments and ``seed`` give the same trials and bytes on every device; the rows
    equal ``sweep``'s for the same combos. ``overfitting=True`` (or a dict, as for
    ``sweep``) puts ``threadx sweep --search … --overfitting``'s object (PBO over the
    trials, the best's DSR with N = the trials, stability) in ``trials.attrs["overfitting"]``.
    ``portfolio=True`` searches the symbols of ``data`` traded as one account, sized as
    ``sweep(..., portfolio=True)`` sizes them (``threadx sweep --portfolio --search``)."""
    sizing = _sizing(
        portfolio, size=size, size_type=size_type, lot=lot, min_size=min_size, init_cash=init_cash,
        max_positions=max_positions, leverage=leverage,
    )
    if isinstance(constraints, str):
        constraints = [constraints]
    request = json.loads(
        _request(strategy, grid, fee, device, None, None, None, periods_per_year, None, threads)
    )
    request["search"] = {
        "method": str(method),
        "trials": _opt_int("trials", trials),
        "batch": _opt_int("batch", batch),
        "seed": _opt_int("seed", seed),
        "patience": _opt_int("patience", patience),
        "target": _finite("target", target),
        "by": str(by),
        "minimize": bool(minimize),
        "constraints": [str(c) for c in constraints],
    }
    if overfitting is not False:
        request["overfitting"] = {} if overfitting is True else dict(overfitting)
    callback, finish = _progress(progress, "trials")
    try:
        if portfolio:
            out = _portfolio_search(data, json.dumps(request, allow_nan=True), sizing, callback)
        else:
            bars, _index = _bars(data)
            out = _threadx.search(bars, json.dumps(request, allow_nan=True), callback)
    finally:
        finish()
    frame = _tables.frame(out["trials"]).set_index("trial")
    if "overfitting" in out:
        frame.attrs["overfitting"] = json.loads(out["overfitting"])
    best = None if out["best"] is None else frame.iloc[int(out["best"])]
    if portfolio:
        page = _no_portfolio_page
    else:
        rows = _report.sweep_frame(
            frame.set_index("combo"), (bars, json.dumps(request, allow_nan=True), str(by), bool(minimize), [])
        )
        page = lambda: rows._html(search_json=out["search_json"])  # noqa: E731
    return SearchResult(frame, best, out["stop"], float(out["seconds"]), float(out["search_seconds"]), page)


class Session:
    """A sweep prepared once on ``data`` (indicators computed, the signal book built, the
    devices opened) that evaluates any batch of parameter sets of its grid at the
    sweep's speed: ``evaluate`` gives the very rows ``sweep`` gives for them. Drive an
    optimiser with it (Optuna's ask/tell in batches: examples/python/optuna_search.py).

    ``options`` are ``sweep``'s: ``grid`` (the values each parameter may take; default
    the strategy's own grid), ``fee``, ``device``, ``periods_per_year``, ``threads``,
    ``random``/``seed`` (then only the sample's combos can be evaluated)."""

    def __init__(self, data: Data, strategy: StrategyName = "bb_atr", **options: Any) -> None:
        known = {"grid", "fee", "device", "random", "seed", "periods_per_year", "chunk_size", "threads"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"Session() got unexpected options {unknown} (known: {sorted(known)})")
        bars, _index = _bars(data)
        request = _request(
            strategy,
            options.get("grid"),
            options.get("fee", 0.001),
            options.get("device"),
            options.get("random"),
            options.get("seed"),
            None,
            options.get("periods_per_year"),
            options.get("chunk_size"),
            options.get("threads"),
        )
        self._native = _threadx.Session(bars, request)
        self._parameters = self._native.parameters()
        self._sweep = (bars, request, "sharpe", False, [])

    @property
    def parameters(self) -> Dict[str, List[Any]]:
        """Each parameter's values on the session's grid (names for a choice)."""
        out: Dict[str, List[Any]] = {}
        for name, kind, choices, axis in self._parameters:
            if choices is not None:
                out[name] = [choices[int(v)] for v in axis]
            elif kind == "int":
                out[name] = [int(v) for v in axis]
            else:
                out[name] = [float(v) for v in axis]
        return out

    @property
    def grid_len(self) -> int:
        """Combos in the session's grid."""
        return int(self._native.grid_len)

    @property
    def workers(self) -> List[str]:
        """The devices batches run on."""
        return list(self._native.workers)

    def evaluate(self, params: Union[pd.DataFrame, Iterable[Mapping[str, Any]]]) -> pd.DataFrame:
        """The rows of parameter sets (a list of dicts, or a DataFrame with a column per
        parameter), in the order given, indexed by combo as ``sweep``'s: the same bytes.
        A parameter left out takes its one value when the grid has one. Combos the
        strategy's ``require`` rule refuses have no row, as in a sweep. The GIL is
        released while they run."""
        frame = params if isinstance(params, pd.DataFrame) else pd.DataFrame(list(params))
        matrix = np.empty((len(frame), len(self._parameters)), dtype=np.float64)
        names = [p[0] for p in self._parameters]
        others = [str(c) for c in frame.columns if c not in names]
        for j, (name, kind, choices, axis) in enumerate(self._parameters):
            if name in frame.columns:
                column = frame[name]
                if choices is not None:
                    codes = {c.lower(): i for i, c in enumerate(choices)}
                    try:
                        matrix[:, j] = [codes[str(v).lower()] for v in column]
                    except KeyError as e:
                        raise ValueError(f"{name}={e.args[0]}: expected one of {', '.join(choices)}") from None
                else:
                    matrix[:, j] = _f64(column, "params", name)
            elif len(axis) == 1 or len(frame) == 0:
                # Its one value; or no parameter set at all (an optimiser that asks none).
                matrix[:, j] = axis[0]
            else:
                given = f" (given, and no parameter: {', '.join(others)})" if others else ""
                raise ValueError(
                    f"params: no column `{name}`{given}, and the grid gives it {len(axis)} values; "
                    f"the parameters are {', '.join(names)}"
                )
        return _report.sweep_frame(_tables.frame(self._native.evaluate(matrix)).set_index("combo"), self._sweep)

    def __repr__(self) -> str:
        return repr(self._native)


def devices() -> List[Dict[str, Any]]:
    """The GPU adapters, best first (``threadx devices --json``'s ``adapters``), each
    with ``default``: whether ThreadX uses it. An empty list: everything runs on the CPU."""
    adapters, default = _threadx.devices()
    out: List[Dict[str, Any]] = json.loads(adapters)
    for adapter in out:
        adapter["default"] = adapter.get("rank") == default
    return out


def strategies() -> Dict[str, List[Dict[str, Any]]]:
    """The built-in strategies and their parameters (name, kind, default, range, help)."""
    return dict(_threadx.strategies())


# --- arguments ---------------------------------------------------------------------------


def _axis(name: str, values: Any) -> Union[str, List[Union[int, float, str]]]:
    """A grid axis for the request: the user's text as it is (``"10:50:5"``), else a list."""
    if isinstance(values, str):
        return values
    if isinstance(values, (int, float, np.integer, np.floating)) and not isinstance(values, (bool, np.bool_)):
        return [_axis_value(name, values)]
    if isinstance(values, Iterable):
        return [_axis_value(name, v) for v in values]
    raise ValueError(f"grid[{name!r}]: expected a list, a range, a number or text like '10:50:5'")


def _request(
    strategy: StrategyName,
    grid: Optional[Mapping[str, Any]],
    fee: float,
    device: Optional[str],
    random: Optional[int],
    seed: Optional[int],
    walk_forward: Optional[str],
    periods_per_year: Optional[float],
    chunk_size: Optional[int],
    threads: Optional[int],
) -> str:
    """The sweep request (threadx_sweep::SweepRequest) the arguments describe, as JSON."""
    random = _opt_int("random", random)
    seed = _opt_int("seed", seed)
    if random is None and seed is not None:
        raise ValueError("seed draws the random sample; pass random=N too")
    if grid is not None and not isinstance(grid, Mapping):
        raise TypeError(
            "grid maps parameter names to their values, e.g. grid={'bb_period': range(10, 50, 5), "
            f"'bb_std': [1.5, 2.0]}}; got {type(grid).__name__} {grid!r:.60}"
        )
    request: Dict[str, Any] = {
        "strategy": os.fspath(strategy),
        "grid": None if grid is None else {name: _axis(name, values) for name, values in grid.items()},
        "fee": float(fee),
        "random": None if random is None else {"n": random, "seed": seed or 0},
        "walk_forward": walk_forward,
        "periods_per_year": _opt_float(periods_per_year),
        "chunk_size": _opt_int("chunk_size", chunk_size),
        "threads": _opt_int("threads", threads),
        "device": device if device is None else str(device).strip().lower(),
    }
    return json.dumps(request, allow_nan=True)




# --- progress ----------------------------------------------------------------------------
