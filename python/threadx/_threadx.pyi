"""Type stubs of the native module (python/src/lib.rs)."""

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str
#: The metrics' columns of a results row, in the engine's order.
METRICS: List[str]

class Bars:
    """Validated bars (timestamps in epoch ms UTC, prices, volumes)."""

    @staticmethod
    def load(source: str) -> Bars: ...
    @staticmethod
    def from_arrow(origin: str, stream: bytes) -> Bars: ...
    @staticmethod
    def from_arrays(
        origin: str,
        timestamps: npt.NDArray[np.int64],
        open: npt.NDArray[np.float64],
        high: npt.NDArray[np.float64],
        low: npt.NDArray[np.float64],
        close: npt.NDArray[np.float64],
        volume: Optional[npt.NDArray[np.float64]] = None,
    ) -> Bars: ...
    @staticmethod
    def from_close(
        close: npt.NDArray[np.float64],
        timestamps: Optional[npt.NDArray[np.int64]] = None,
        open: Optional[npt.NDArray[np.float64]] = None,
        high: Optional[npt.NDArray[np.float64]] = None,
        low: Optional[npt.NDArray[np.float64]] = None,
    ) -> Bars: ...
    def __len__(self) -> int: ...
    @property
    def origin(self) -> str: ...
    @property
    def bars_per_year(self) -> float: ...
    def timestamps(self) -> npt.NDArray[np.int64]: ...
    def arrays(self) -> Dict[str, npt.NDArray[Any]]: ...

def columns_of(origin: str, header: Sequence[str]) -> Tuple[List[int], Optional[int]]: ...
def epoch_ms(values: npt.NDArray[np.float64], origin: str, column: str) -> npt.NDArray[np.int64]: ...
def indicators(
    bars: Bars, specs: Sequence[str], device: Optional[str] = None
) -> List[Tuple[str, npt.NDArray[np.float64]]]: ...
def backtest(
    bars: Bars,
    strategy: str,
    params: Sequence[Tuple[str, str]],
    fee: float,
    slippage: float = 0.0,
    periods_per_year: Optional[float] = None,
    device: Optional[str] = None,
) -> Dict[str, Any]: ...
def sweep(
    bars: Bars,
    request_json: str,
    by: str = "sharpe",
    progress: Optional[Callable[[int, int], None]] = None,
    minimize: bool = False,
    constraints: List[str] = ...,
) -> Dict[str, Any]: ...
def search(
    bars: Bars,
    request_json: str,
    progress: Optional[Callable[[int, int], None]] = None,
) -> Dict[str, Any]: ...
def search_portfolio(
    universe: Universe,
    request_json: str,
    progress: Optional[Callable[[int, int], None]] = None,
    size: Optional[float] = None,
    size_type: Optional[str] = None,
    lot: Optional[float] = None,
    min_size: Optional[float] = None,
    init_cash: Optional[float] = None,
    max_positions: Optional[int] = None,
    leverage: Optional[float] = None,
) -> Dict[str, Any]: ...

class Table:
    """A table of the engine's as Arrow (the columns of the CLI's Parquet file of it)."""

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any: ...
    @property
    def categories(self) -> List[Tuple[str, List[str]]]: ...
    def __len__(self) -> int: ...

class BacktestPage:
    """What one backtest ran and gave, kept for its report."""

    def html(self) -> str: ...

class PortfolioPage:
    """What one portfolio backtest ran and gave, kept for its report."""

    def html(self) -> str: ...

def sweep_report(
    bars: Bars,
    request_json: str,
    by: str,
    combos: npt.NDArray[np.int64],
    metrics: npt.NDArray[np.float64],
    overfitting_json: Optional[str] = None,
    search_json: Optional[str] = None,
    minimize: bool = False,
    constraints: List[str] = ...,
) -> str: ...

def write_page(path: str, page: str) -> None: ...

class Universe:
    """Many symbols' bars, sorted by name."""

    @staticmethod
    def from_bars(origin: str, symbols: List[Tuple[str, Bars]]) -> Universe: ...
    @property
    def names(self) -> List[str]: ...
    def __len__(self) -> int: ...

def load_market(source: str) -> Union[Bars, Universe]: ...
def market_from_arrow(origin: str, stream: bytes) -> Union[Bars, Universe]: ...
def sweep_universe(
    universe: Universe,
    request_json: str,
    by: str = "sharpe",
    progress: Optional[Callable[[int, int], None]] = None,
    constraints: List[str] = ...,
) -> Dict[str, Any]: ...

class Session:
    """A sweep prepared once that evaluates batches of parameter sets."""

    def __init__(self, bars: Bars, request_json: str) -> None: ...
    def parameters(self) -> List[Tuple[str, str, Optional[List[str]], npt.NDArray[np.float64]]]: ...
    @property
    def grid_len(self) -> int: ...
    @property
    def workers(self) -> List[str]: ...
    def evaluate(self, params: npt.NDArray[np.float64]) -> Table: ...

def simulate(
    bars: Bars,
    entries: npt.NDArray[np.bool_],
    exits: npt.NDArray[np.bool_],
    short_entries: Optional[npt.NDArray[np.bool_]] = None,
    short_exits: Optional[npt.NDArray[np.bool_]] = None,
    stop: Optional[npt.NDArray[np.float64]] = None,
    sl_stop: Optional[npt.NDArray[np.float64]] = None,
    tp_stop: Optional[npt.NDArray[np.float64]] = None,
    sl_trail: Sequence[bool] = (),
    intrabar: bool = False,
    next_open: bool = False,
    fee: float = 0.001,
    slippage: float = 0.0,
    periods_per_year: Optional[float] = None,
    device: Optional[str] = None,
    details: bool = False,
) -> Tuple[Table, str, Optional[Dict[str, Any]]]: ...
def simulate_portfolio(
    close: npt.NDArray[np.float64],
    entries: npt.NDArray[np.bool_],
    exits: npt.NDArray[np.bool_],
    size: Optional[float] = None,
    size_type: Optional[str] = None,
    lot: Optional[float] = None,
    min_size: Optional[float] = None,
    init_cash: Optional[float] = None,
    fee: float = 0.001,
    slippage: float = 0.0,
    periods_per_year: Optional[float] = None,
    times: Optional[npt.NDArray[np.int64]] = None,
    details: bool = False,
    max_positions: Optional[int] = None,
    sl_stop: Optional[npt.NDArray[np.float64]] = None,
    tp_stop: Optional[npt.NDArray[np.float64]] = None,
    sl_trail: bool = False,
    range: Optional[List[npt.NDArray[np.float64]]] = None,
    shorts: Optional[List[npt.NDArray[np.bool_]]] = None,
) -> Tuple[Table, Optional[Dict[str, Any]]]: ...
def sweep_portfolio(
    universe: Universe,
    request_json: str,
    size: Optional[float] = None,
    size_type: Optional[str] = None,
    lot: Optional[float] = None,
    min_size: Optional[float] = None,
    init_cash: Optional[float] = None,
    progress: Optional[Callable[[int, int], None]] = None,
    max_positions: Optional[int] = None,
    by: str = "sharpe",
    minimize: bool = False,
    constraints: List[str] = ...,
    leverage: Optional[float] = None,
) -> Dict[str, Any]: ...
def backtest_portfolio(
    universe: Universe,
    strategy: str,
    params: List[Tuple[str, str]],
    fee: float,
    slippage: float = 0.0,
    size: Optional[float] = None,
    size_type: Optional[str] = None,
    lot: Optional[float] = None,
    min_size: Optional[float] = None,
    init_cash: Optional[float] = None,
    periods_per_year: Optional[float] = None,
    max_positions: Optional[int] = None,
    leverage: Optional[float] = None,
) -> Dict[str, Any]: ...
def devices() -> Tuple[str, Optional[int]]: ...
def strategies() -> Dict[str, List[Dict[str, Any]]]: ...
def pbo(returns: npt.NDArray[np.float64], blocks: int = 16, splits: int = 1000, seed: int = 0) -> Dict[str, Any]: ...
def deflated_sharpe_table(
    returns: npt.NDArray[np.float64], trials: Optional[float] = None, sharpe_std: Optional[float] = None
) -> Dict[str, Any]: ...
