"""HTML reports from Python: a sweep's rows as a DataFrame that can draw its report
(``SweepFrame.report``), and the page written to a file or shown inline in a notebook."""

from __future__ import annotations

import html
import json
import os
from typing import Any, List, Optional, Tuple, Union

import numpy as np
import pandas as pd

from . import _threadx

#: The metrics' columns, in the engine's order (Metrics::NAMES).
METRICS: List[str] = list(_threadx.METRICS)


class SweepFrame(pd.DataFrame):
    """A sweep's rows (a pandas DataFrame, indexed by combo) that can draw its report:
    ``rows.report("r.html")``. A filtered frame reports the rows it keeps."""

    _metadata = ["_threadx_sweep"]
    _threadx_sweep: Optional[Tuple[Any, str, str, bool, List[str]]] = None

    @property
    def _constructor(self) -> Any:
        return SweepFrame

    def report(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the HTML report of these rows to ``path``: the best combos, the
        heatmaps and the distribution of the ranking metric, the overfitting statistics
        when the sweep computed them, and the backtest of the best combo (``threadx sweep
        --report``'s page); one file, no network."""
        write(path, self._html())

    def _html(self, search_json: Optional[str] = None) -> str:
        if self._threadx_sweep is None:
            raise ValueError(
                "these rows draw no report: a universe's rows (report one symbol's sweep), a portfolio's rows or a "
                "walk-forward's windows (`threadx sweep --portfolio|--walk-forward ... --report FILE.html` draws "
                "them), or a frame made by hand"
            )
        bars, request, by, minimize, constraints = self._threadx_sweep
        missing = [m for m in METRICS if m not in self.columns]
        if missing:
            raise ValueError(f"the rows need every metric column to draw a report; missing {missing}")
        combos = np.ascontiguousarray(self.index.to_numpy(dtype=np.int64))
        metrics = np.ascontiguousarray(self[METRICS].to_numpy(dtype=np.float64, na_value=np.nan))
        overfitting = self.attrs.get("overfitting")
        text = None if overfitting is None else json.dumps(overfitting, allow_nan=True)
        return _threadx.sweep_report(bars, request, by, combos, metrics, text, search_json, minimize, constraints)


def sweep_frame(frame: pd.DataFrame, sweep: Optional[Tuple[Any, str, str, bool, List[str]]]) -> SweepFrame:
    """`frame` as a SweepFrame of `sweep` (bars, request JSON, ranking metric, whether it
    ranks smallest first, the constraints it ranks by; None: rows that draw no report, a
    universe's or a walk-forward's windows)."""
    out = SweepFrame(frame)
    out._threadx_sweep = sweep
    return out


def write(path: Union[str, "os.PathLike[str]"], page: str) -> None:
    """Writes `page` to `path` as the CLI writes its reports: whole or not at all, or in
    place for a special file such as /dev/stdout."""
    _threadx.write_page(os.fspath(path), page)


def inline(page: str) -> str:
    """`page` for a notebook's output cell: in a frame of its own, so that its style and
    script touch nothing else."""
    return (
        '<iframe style="width:100%;height:760px;border:1px solid #d8dde3" '
        f'srcdoc="{html.escape(page, quote=True)}"></iframe>'
    )
