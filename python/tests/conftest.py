"""Shared fixtures: a private profile folder (set before the engine reads it), the CLI to
compare with, and whether a GPU adapter must be there (CI sets THREADX_REQUIRE_GPU=1)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import List

import pandas as pd
import pytest

# Dispatchers are made once per process and read these then: set them before any call.
_PROFILES = tempfile.mkdtemp(prefix="threadx-pytest-")
os.environ["THREADX_GPU_THRESHOLD_PATH"] = os.path.join(_PROFILES, "thresholds.json")
os.environ["THREADX_MULTIGPU_PROFILE_PATH"] = os.path.join(_PROFILES, "multigpu.json")

import threadx  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
REQUIRE_GPU = os.environ.get("THREADX_REQUIRE_GPU") == "1"


def _cli_path() -> Path:
    if os.environ.get("THREADX_BIN"):
        return Path(os.environ["THREADX_BIN"])
    built = [REPO / "target" / p / "threadx" for p in ("release", "debug")]
    found = [p for p in built if p.exists()]
    if not found:
        pytest.fail("no threadx binary to compare with: run `cargo build` or set THREADX_BIN")
    return max(found, key=lambda p: p.stat().st_mtime)


class Cli:
    """The `threadx` command, run with the same private profiles."""

    def __init__(self, path: Path, workdir: Path) -> None:
        self.path = path
        self.workdir = workdir

    def run(self, *args: str) -> str:
        return self.run_full(*args).stdout

    def run_full(self, *args: str) -> "subprocess.CompletedProcess[str]":
        """A run that must succeed, with what it printed on both streams."""
        done = subprocess.run(
            [str(self.path), *args], cwd=self.workdir, capture_output=True, text=True, env=os.environ.copy()
        )
        if done.returncode != 0:
            raise AssertionError(f"threadx {' '.join(args)} failed:\n{done.stderr}")
        return done

    def fails(self, *args: str) -> str:
        done = subprocess.run([str(self.path), *args], cwd=self.workdir, capture_output=True, text=True)
        assert done.returncode != 0, f"threadx {' '.join(args)} succeeded"
        return done.stderr

    def csv(self, name: str, **kw: object) -> pd.DataFrame:
        return pd.read_csv(self.workdir / name, **kw)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(_cli_path(), tmp_path)


@pytest.fixture(scope="session")
def data() -> pd.DataFrame:
    return threadx.synthetic(bars=3000, seed=7)


def grid_flags(grid: dict) -> List[str]:
    return [f"--grid={k}={','.join(str(v) for v in vals)}" for k, vals in grid.items()]
