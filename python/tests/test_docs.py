"""Every Python block of README.md and docs/*.md runs, and so does every shell block that
calls Python (the Rust suite, crates/cli/tests/docs.rs, runs the other shell blocks).

A page's Python blocks run in order in one namespace, as in a notebook, in a scratch folder
that holds `examples/` and `donchian.toml`. Fragments that stand for the reader's own data
find it defined first: `df` (the README's synthetic bars), and `entries`, `exits`, `se`,
`sx` (a moving-average cross's signals, long and short)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

import threadx
from conftest import REPO, _cli_path

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)


def blocks(page: Path, languages: Tuple[str, ...]) -> List[str]:
    return [m.group(2) for m in FENCE.finditer(page.read_text()) if m.group(1) in languages]


def reader_data() -> Dict[str, object]:
    df = threadx.synthetic(bars=35_040, seed=42)
    fast, slow = df["close"].rolling(10).mean(), df["close"].rolling(50).mean()
    entries = (fast > slow) & (fast.shift() <= slow.shift())
    exits = (fast < slow) & (fast.shift() >= slow.shift())
    return {"threadx": threadx, "df": df, "entries": entries, "exits": exits, "se": exits, "sx": entries}


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "examples").symlink_to(REPO / "examples")
    shutil.copy(REPO / "examples" / "strategies" / "donchian.toml", tmp_path / "donchian.toml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p, ("python",))], ids=lambda p: p.name)
def test_a_pages_python_blocks_run_in_order(page: Path, scratch: Path) -> None:
    namespace = reader_data()
    for i, block in enumerate(blocks(page, ("python",))):
        try:
            exec(compile(block, f"{page.name} block {i + 1}", "exec"), namespace)
        except Exception as e:  # noqa: BLE001 - the page and block say which example broke
            raise AssertionError(f"{page.name}: Python block {i + 1} failed: {e!r}\n{block}") from e


def shell_blocks_with_python() -> List[Tuple[str, str]]:
    found = []
    for page in PAGES:
        for block in blocks(page, ("bash", "sh")):
            lines = [line.strip() for line in block.replace("\\\n", " ").splitlines()]
            if any(line.startswith(("python ", "python3 -c")) for line in lines):
                found.append((page.name, block))
    return found


@pytest.mark.parametrize("page, block", shell_blocks_with_python(), ids=lambda v: v if "\n" not in v else "")
def test_a_shell_block_that_calls_python_runs(page: str, block: str, scratch: Path) -> None:
    # `python` is this interpreter (its threadx package); `threadx` the CLI the suite compares with.
    bin_dir = scratch / "bin"
    bin_dir.mkdir()
    # A wrapper, not a link: a venv's interpreter finds its packages by the path it is run as.
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    (bin_dir / "threadx").symlink_to(_cli_path())
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=scratch, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{page}: the block failed:\n{block}\n{done.stderr}"


def test_the_docs_hold_the_blocks_these_tests_run() -> None:
    assert sum(len(blocks(p, ("python",))) for p in PAGES) >= 5
    assert shell_blocks_with_python(), "the README shows a results file read with pandas"
