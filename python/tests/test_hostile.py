"""One hostile string through every text a user controls (a rule file's description and
choices, the data file's name, a universe's symbols; its name and parameter names, which
refuse it, and a CSV header ThreadX does not read, which is shown nowhere) into every output: the terminal gets no control sequence,
every SVG is well-formed XML, the results CSV reads the choice back as written, and each
HTML page, opened in Chromium, runs no script of the string's and makes no request. A plot
replaced beside a run (script, a remote image) is left out of `threadx report`'s page.
CI sets THREADX_REQUIRE_BROWSER=1, so there the browser half cannot be skipped."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Iterator

import pytest

import threadx
from browser import Browser, chromium
from conftest import Cli

PAYLOAD = "<img src=x onerror=document.title='PWNED'>"
# A description may hold anything, control characters included (TOML escapes them).
DESCRIPTION = r"\u001b]0;PWNED\u0007\u001b[2J" + PAYLOAD + " & <script>document.title='PWNED'</script>"
RULES = f"""name = "hostile"
description = "{DESCRIPTION}"
[params]
n = {{ kind = "int", default = 20, min = 2, max = 200, grid = "10,20" }}
m = {{ kind = "choice", choices = ["{PAYLOAD}", "S&P", "z"], default = "z", grid = ["{PAYLOAD}", "S&P", "z"] }}
[rules]
entry = "close > highest(high, n)[1]"
exit  = "close < lowest(low, n)[1]"
stop  = "close - 2 * atr(14)"
"""
DATA = "<i>&data'.csv"
REPLACED_PLOT = (
    '<svg xmlns="http://www.w3.org/2000/svg"><script>document.title="PWNED"</script>'
    '<image href="http://example.invalid/beacon.png"/></svg>'
)


@pytest.fixture
def hostile(cli: Cli) -> Cli:
    (cli.workdir / "x.toml").write_text(RULES)
    threadx.synthetic(bars=3000, seed=1).to_csv(cli.workdir / DATA, index_label="timestamp")
    return cli


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium()
    if executable is None:
        if os.environ.get("THREADX_REQUIRE_BROWSER") == "1":
            raise RuntimeError("THREADX_REQUIRE_BROWSER=1 but no chromium on PATH")
        pytest.skip("no Chromium on PATH")
    b = Browser(executable)
    yield b
    b.close()


def no_control_sequence(printed: str) -> None:
    assert not any(c in printed for c in "\x1b\x07\x9b\x00\r"), repr(printed)


def test_the_terminal_shows_control_characters_escaped(hostile: Cli) -> None:
    for args in (["strategy", "check", "x.toml"], ["strategy", "show", "x.toml"]):
        printed = hostile.run(*args)
        no_control_sequence(printed)
    assert "\\u{1b}]0;PWNED\\u{7}" in hostile.run("strategy", "check", "x.toml")


def test_every_output_holds_the_string_as_text(hostile: Cli, browser: Browser) -> None:
    w = hostile.workdir
    printed = hostile.run(
        "--device", "cpu", "sweep", "--strategy", "x.toml", "--data", DATA, "--out", "r.csv",
        "--report", "r.html", "--overfitting", "--quiet",
    )
    no_control_sequence(printed)
    for svg in ("r-heatmap.svg", "r-pbo.svg", "r-oos.svg"):
        ElementTree.parse(w / svg)  # well-formed XML, or this raises
    titles = [t.text for t in ElementTree.parse(w / "r-heatmap.svg").iter("{http://www.w3.org/2000/svg}title")]
    assert any(PAYLOAD in (t or "") for t in titles) and any("S&P" in (t or "") for t in titles), titles
    rows = hostile.csv("r.csv")
    assert sorted(set(rows["m"])) == sorted([PAYLOAD, "S&P", "z"])
    hostile.run("--device", "cpu", "backtest", "--strategy", "x.toml", "--data", DATA, "--set", f"m={PAYLOAD}",
                "--report", "b.html")
    for page in ("r.html", "b.html"):
        html = (w / page).read_text()
        assert PAYLOAD not in html and "<script>document.title" not in html, page
        browser.open(w / page)
        assert browser.evaluate("document.title").find("PWNED") < 0, page
        # The page's own scripts are the chart data (inert JSON) and its two scripts after main.
        assert browser.evaluate("document.querySelectorAll('main img, main script:not([type=\"application/json\"])').length") == 0, page
        assert browser.problems() == [], (page, browser.problems())


def test_report_embeds_only_the_plots_its_summary_vouches_for(hostile: Cli, browser: Browser) -> None:
    w = hostile.workdir
    hostile.run("--device", "cpu", "sweep", "--strategy", "x.toml", "--data", DATA, "--out", "r.csv",
                "--overfitting", "--quiet")
    hostile.run("report", "r.json", "--out", "whole.html")
    assert (w / "whole.html").read_text().count("<figure class=\"svg\">") >= 3, "heatmap and both plots"
    (w / "r-pbo.svg").write_text(REPLACED_PLOT)
    done = hostile.run_full("report", "r.json", "--out", "page.html")
    assert "r-pbo.svg: left out of the report" in done.stderr, done.stderr
    html = (w / "page.html").read_text()
    assert "example.invalid" not in html and "<script>document.title" not in html
    browser.open(w / "page.html")
    assert "PWNED" not in browser.evaluate("document.title")
    assert browser.problems() == [], browser.problems()


def test_a_symbol_named_with_markup_is_text_in_every_output(hostile: Cli) -> None:
    w = hostile.workdir
    (w / "u").mkdir()
    for name, seed in ((PAYLOAD, 1), ("S&P 500", 2)):
        threadx.synthetic(bars=3000, seed=seed).to_csv(w / "u" / f"{name}.csv", index_label="timestamp")
    printed = hostile.run("--device", "cpu", "sweep", "--data", "u", "--grid", "bb_period=10,20", "--out", "u.csv")
    no_control_sequence(printed)
    rows = hostile.csv("u.csv")
    assert sorted(set(rows["symbol"])) == sorted([PAYLOAD, "S&P 500"])
    summary = (w / "u.json").read_text()
    assert PAYLOAD in json.loads(summary)["symbols"][0]["symbol"] + json.loads(summary)["symbols"][1]["symbol"]


def test_names_that_cannot_hold_the_string_refuse_it_and_a_csv_header_is_never_shown(hostile: Cli) -> None:
    """A rule file's name and parameter names are identifiers: the string is refused there
    with its place, printed escaped. A data column ThreadX does not read (a CSV header) is
    never written anywhere."""
    w = hostile.workdir
    for what, rules in (
        ("name", RULES.replace('name = "hostile"', f'name = "{DESCRIPTION}"')),
        ("parameter", RULES.replace("n = {", f'"{PAYLOAD}\\u001b[2J" = {{')),
    ):
        (w / "bad.toml").write_text(rules)
        refused = hostile.fails("strategy", "check", "bad.toml")
        no_control_sequence(refused)
        assert "bad.toml:" in refused, (what, refused)
    frame = threadx.synthetic(bars=3000, seed=1)
    frame[PAYLOAD] = 1.0
    frame.to_csv(w / "extra.csv", index_label="timestamp")
    printed = hostile.run("--device", "cpu", "sweep", "--data", "extra.csv", "--grid", "bb_period=10,20",
                          "--grid", "bb_std=2,3", "--out", "e.csv", "--report", "e.html")
    no_control_sequence(printed)
    for name in ("e.csv", "e.json", "e.html", "e-heatmap.svg"):
        assert PAYLOAD not in (w / name).read_text() and "onerror" not in (w / name).read_text(), name
