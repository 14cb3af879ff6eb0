"""How the package behaves around the work: the GIL is released while the engine runs,
Ctrl-C stops a sweep between chunks, progress is reported, failures are Python
exceptions, and the type stubs name what the native module has."""

from __future__ import annotations

import _thread
import ast
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List, Tuple

import numpy as np
import pandas as pd
import pytest

import threadx
from threadx import _threadx


def test_the_gil_is_released_while_a_sweep_runs() -> None:
    data = threadx.synthetic(bars=35_040, seed=4)
    span: List[float] = []

    def work() -> None:
        span.append(time.perf_counter())
        threadx.sweep(data, device="cpu", threads=1, progress=False)
        span.append(time.perf_counter())

    worker = threading.Thread(target=work)
    ticks: List[float] = []
    worker.start()
    while worker.is_alive():
        ticks.append(time.perf_counter())
    worker.join()
    start, end = span
    inside = [t for t in ticks if start <= t <= end]
    gaps = [b - a for a, b in zip([start, *inside], [*inside, end])]
    # Held, the GIL would stop this thread for the whole native run: one gap of about
    # the run's length. Released, this thread keeps ticking.
    assert max(gaps) < 0.5 * (end - start), f"longest pause {max(gaps):.3f}s of a {end - start:.3f}s sweep"
    assert len(inside) > 1000


def test_an_interrupt_stops_a_sweep_between_chunks(data: pd.DataFrame) -> None:
    calls: List[Tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        calls.append((done, total))
        if done > 0:
            _thread.interrupt_main()  # Ctrl-C, as the signal handler sees it

    with pytest.raises(KeyboardInterrupt):
        threadx.sweep(data, chunk_size=10, progress=progress)
    total = calls[0][1]
    assert total == 10_000 and len(calls) == 2, calls
    # The next sweep runs whole: nothing was left half-done.
    assert len(threadx.sweep(data, grid={"bb_period": [10, 20]}, progress=False)) == 2


def test_ctrl_c_stops_a_sweep_in_another_process() -> None:
    script = (
        "import threadx\n"
        "data = threadx.synthetic(bars=35040, seed=1)\n"
        "def progress(done, total):\n"
        "    if done == 0: print('started', flush=True)\n"
        "threadx.sweep(data, progress=progress, chunk_size=5, device='cpu')\n"
        "print('finished', flush=True)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/"
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "started"
    child.send_signal(signal.SIGINT)
    sent = time.monotonic()
    out, err = child.communicate(timeout=60)
    assert child.returncode != 0 and "KeyboardInterrupt" in err, err
    assert "finished" not in out
    assert time.monotonic() - sent < 10


def test_progress_reports_every_chunk_in_order(data: pd.DataFrame, capsys, monkeypatch) -> None:
    calls: List[Tuple[int, int]] = []
    grid = {"bb_period": [10, 20, 30], "atr_mult": [1, 2, 3, 4]}
    threadx.sweep(data, grid=grid, chunk_size=5, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(0, 12), (5, 12), (10, 12), (12, 12)]
    threadx.sweep(data, grid=grid, progress=True)
    assert "threadx sweep" in capsys.readouterr().err, "a tqdm bar"
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # tqdm not installed
    threadx.sweep(data, grid=grid, progress=True)
    # stderr is captured, not a terminal: whole lines for a log, no carriage returns.
    err = capsys.readouterr().err
    assert "threadx sweep: 12/12 combos (100%)\n" in err and "\r" not in err, repr(err)


def test_a_progress_callback_that_raises_stops_the_sweep(data: pd.DataFrame) -> None:
    def progress(done: int, total: int) -> None:
        if done:
            raise RuntimeError("enough")

    with pytest.raises(RuntimeError, match="enough"):
        threadx.sweep(data, chunk_size=10, progress=progress)


def test_failures_are_python_exceptions(data: pd.DataFrame, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown device mode 'tpu'"):
        threadx.sweep(data, device="tpu")
    with pytest.raises(ValueError, match="unknown strategy `bb`"):
        threadx.sweep(data, "bb")
    with pytest.raises(ValueError, match="bb_period=1: out of range"):
        threadx.sweep(data, grid={"bb_period": [1]})
    with pytest.raises(ValueError, match="seed draws the random sample"):
        threadx.sweep(data, seed=3)
    # walk_forward as text or a dict: what is missing or unknown is named.
    with pytest.raises(ValueError, match="walk_forward: train and test are both needed"):
        threadx.sweep(data, walk_forward={"train": 1000})
    with pytest.raises(ValueError, match=r"or a table of train, test\[, step\]"):
        threadx.sweep(data, walk_forward={"train": 1000, "test": 500, "folds": 3})
    with pytest.raises(ValueError, match="unknown key `folds`"):
        threadx.sweep(data, walk_forward="train=1000,test=500,folds=0")
    with pytest.raises(ValueError, match="random must be a whole number"):
        threadx.sweep(data, random=-1)
    with pytest.raises(ValueError, match="fee 2 is outside"):
        threadx.backtest(data, fee=2)
    with pytest.raises(ValueError, match="bb_std=True: expected a number"):
        threadx.backtest(data, bb_std=True)
    # A dict of parameters, or several values of one, named for what it was meant as.
    with pytest.raises(ValueError, match=r"parameters are keywords.*backtest\(data, \*\*params\)"):
        threadx.backtest(data, params={"bb_period": 30})
    with pytest.raises(ValueError, match=r"bb_period=\[10, 20\]: a backtest takes one value per parameter"):
        threadx.backtest(data, bb_period=[10, 20])
    with pytest.raises(ValueError, match=r"sweep\(data, grid=\{'bb_period': \[...\]\}\)"):
        threadx.backtest(data, bb_period=np.array([10, 20]))
    assert threadx.backtest(data, bb_period=np.int64(30), bb_std=2.5).params == threadx.backtest(
        data, bb_period=30, bb_std="2.5"
    ).params
    with pytest.raises(TypeError, match=r"grid maps parameter names to their values.*got int 5"):
        threadx.sweep(data, grid=5)
    with pytest.raises(TypeError, match=r"data is a Series \(one column, 'close'\): pass the DataFrame"):
        threadx.backtest(data["close"])
    text_close = data.assign(close=data["close"].astype(str).where(np.arange(len(data)) != 7, "abc"))
    with pytest.raises(ValueError, match=r"DataFrame, row 7, column `close`: not numbers"):
        threadx.backtest(text_close)
    # The CLI's thread rule: at least one, at most 16 per core.
    with pytest.raises(ValueError, match="threads: at least 1 is needed"):
        threadx.sweep(data, threads=0)
    with pytest.raises(ValueError, match="threads: 100000 is more than the"):
        threadx.sweep(data, threads=100_000)
    # Prices outside the range where indicators cannot overflow, named at their row.
    huge = data * 1e296
    with pytest.raises(ValueError, match="row 0, column `open`: price .* is outside 1e-100 to 1e100"):
        threadx.sweep(huge, progress=False)
    # The engine's state on disk cannot be opened: a RuntimeError, never a crash (a fresh
    # process, since the engine reads where its profiles are once).
    script = (
        "import threadx\n"
        "try:\n"
        "    threadx.sweep(threadx.synthetic(bars=500), grid={'bb_period': [10]}, progress=False)\n"
        "except RuntimeError as e:\n"
        "    print('RuntimeError', e)\n"
    )
    env = {**os.environ, "THREADX_GPU_THRESHOLD_PATH": str(tmp_path / "a-file" / "thresholds.json")}
    (tmp_path / "a-file").write_text("")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd="/")
    assert done.stdout.startswith("RuntimeError profile file"), done.stdout + done.stderr


def test_the_stubs_name_what_the_native_module_has() -> None:
    stub = Path(threadx.__file__).with_name("_threadx.pyi")
    tree = ast.parse(stub.read_text())
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    names |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    names.discard("__version__")
    native = {n for n in dir(_threadx) if not n.startswith("_")}
    assert names == native
    methods = {n.name for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body if isinstance(n, ast.FunctionDef)}
    assert {m for m in dir(_threadx.Bars) if not m.startswith("_")} <= methods
    assert (Path(threadx.__file__).parent / "py.typed").exists()


def test_the_quickstart_example_runs(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "python" / "quickstart.py"
    done = subprocess.run(
        [sys.executable, str(example), "--bars", "3000", "--out", str(tmp_path / "heatmap.png")],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "228 combos; the best five by Sharpe ratio" in done.stdout
    assert "three up, three down" in done.stdout
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "no heatmap" in done.stdout
    else:
        assert (tmp_path / "heatmap.png").stat().st_size > 1000
