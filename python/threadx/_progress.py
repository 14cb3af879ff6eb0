"""What a long run reports to: a tqdm bar where tqdm is installed, else text on stderr,
or the caller's own ``(done, total)`` callback."""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, List, Optional, Tuple, Union

#: ``(done, total)`` combos, called after each chunk.
ProgressCallback = Callable[[int, int], None]


def _progress(progress: Union[bool, ProgressCallback], unit: str) -> Tuple[Optional[ProgressCallback], Callable[[], None]]:
    """The callback a sweep reports to, and what closes it."""
    if callable(progress):
        return progress, lambda: None
    if not progress:
        return None, lambda: None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _text_progress(unit)
    bars: List[Any] = []

    def update(done: int, total: int) -> None:
        # Made at the first report, so that input refused before any work shows no bar.
        if not bars:
            bars.append(tqdm(total=total, unit=unit, unit_scale=total >= 100_000, desc="threadx sweep"))
        bar = bars[0]
        bar.total = total
        bar.update(done - bar.n)

    def finish() -> None:
        for bar in bars:
            bar.close()

    return update, finish


def _text_progress(unit: str) -> Tuple[ProgressCallback, Callable[[], None]]:
    """Text on stderr: one line redrawn in place on a terminal (twice a second); in a
    log (stderr not a terminal), whole lines, at most one every 10 seconds and the last."""
    live = sys.stderr.isatty()
    every = 0.5 if live else 10.0
    state = {"last": time.monotonic() if not live else 0.0, "shown": False}

    def update(done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - state["last"] < every:
            return
        state["last"], state["shown"] = now, True
        share = done / total if total else 1.0
        line = f"threadx sweep: {done:,}/{total:,} {unit} ({share:.0%})"
        sys.stderr.write(f"\r{line}" if live else f"{line}\n")
        sys.stderr.flush()

    def finish() -> None:
        if state["shown"] and live:
            sys.stderr.write("\n")
            sys.stderr.flush()

    return update, finish
