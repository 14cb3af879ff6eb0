"""`threadx report` pages opened in a real headless Chromium: a backtest, the README's main
job with its overfitting statistics, a rule-file search and a walk-forward. Each must load
without a console error, an exception, a failed load or a request beyond the page; show
every section; draw marks in every chart (pixels of the series' own colour); sort its
tables; keep its labels apart on a 100 × 21 heatmap; fit 1280 px and 3 MB. Screenshots go
to artifacts/report/ (CI keeps them). CI installs Chromium and sets
THREADX_REQUIRE_BROWSER=1, so there the tests cannot be skipped."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator, List

import pytest

from browser import Browser, artifacts, chromium
from conftest import REPO, Cli

import threadx

EXECUTABLE = chromium()
if EXECUTABLE is None:
    if os.environ.get("THREADX_REQUIRE_BROWSER") == "1":
        raise RuntimeError("THREADX_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install chromium)")
    pytest.skip("no Chromium on PATH", allow_module_level=True)

BACKTEST_SECTIONS = ["metrics", "price", "equity", "drawdowns", "rolling", "trades", "monthly", "trade-returns"]

# Pixels of each chart's series colour (report.js draws them): lines, bars, fills.
CHART_MARKS = """
Array.from(document.querySelectorAll('div.chart')).map(box => {
  const spec = JSON.parse(document.querySelector(`script[data-chart="${box.id}"]`).textContent);
  const canvas = box.querySelector('canvas');
  if (!canvas) return {id: box.id, title: spec.title, marks: -1};
  const want = spec.series.map(s => [1, 3, 5].map(i => parseInt(s.color.slice(i, i + 2), 16)));
  const px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let marks = 0;
  for (let i = 0; i < px.length; i += 4) {
    if (want.some(c => Math.abs(px[i] - c[0]) < 24 && Math.abs(px[i + 1] - c[1]) < 24 && Math.abs(px[i + 2] - c[2]) < 24)) marks++;
  }
  return {id: box.id, title: spec.title, marks};
})
"""

# Each section's id and height, and whether it holds what it should.
SECTIONS = "Array.from(document.querySelectorAll('section')).map(s => [s.id, s.getBoundingClientRect().height])"

# Pairs of text labels of one SVG figure whose boxes overlap (zero-size ones aside).
OVERLAPS = """
Array.from(document.querySelectorAll('figure.svg svg')).flatMap((svg, k) => {
  const boxes = Array.from(svg.querySelectorAll('text')).map(t => [t.textContent, t.getBoundingClientRect()])
    .filter(([_, r]) => r.width > 0 && r.height > 0);
  const out = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const [a, r] = boxes[i], [b, s] = boxes[j];
    if (r.left < s.right - 0.5 && s.left < r.right - 0.5 && r.top < s.bottom - 0.5 && s.top < r.bottom - 0.5) out.push(`${k}: ${a} / ${b}`);
  }
  return out;
})
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert EXECUTABLE is not None
    b = Browser(EXECUTABLE)
    try:
        yield b
    finally:
        b.close()


def check_page(browser: Browser, page: Path, sections: List[str], name: str) -> None:
    """Opens `page` and holds it to the rules above; screenshots it as `name`."""
    assert page.stat().st_size <= 3 * 1024 * 1024, f"{page.name}: {page.stat().st_size} bytes"
    html = page.read_text()
    assert "<script src" not in html and "<link" not in html, "everything is inline"
    browser.open(page)
    shots = artifacts() / "report"
    browser.screenshot(shots / f"{name}.png")
    browser.screenshot(shots / f"{name}-full.png", full_page=True)
    assert browser.problems() == []
    shown = dict(browser.evaluate(SECTIONS))
    for section in sections:
        assert shown.get(section, 0) > 60, f"{name}: section {section} missing or empty ({shown})"
    charts = browser.evaluate(CHART_MARKS)
    assert charts, f"{name}: no chart"
    for chart in charts:
        assert chart["marks"] > 40, f"{name}: chart {chart['title']} drew nothing ({chart['marks']} pixels of its colour)"
    assert browser.evaluate("document.documentElement.scrollWidth") <= 1280, "wider than 1280 px"
    # Bar charts keep their first and last bars whole: the x axis reaches past both.
    ends = """Array.from(document.querySelectorAll('script[data-chart]')).map(el => {
      const spec = JSON.parse(el.textContent);
      if (spec.kind !== 'bars') return null;
      const range = JSON.parse(document.getElementById(el.getAttribute('data-chart')).dataset.xRange);
      const xs = spec.data[0];
      return range[0] < xs[0] && range[1] > xs[xs.length - 1];
    }).filter(v => v !== null)"""
    assert all(browser.evaluate(ends)), f"{name}: a histogram's end bars are cut in half"
    # The best list shows every column without scrolling (its ranking column was cut off).
    cut = "Array.from(document.querySelectorAll('#best .table-box')).filter(b => b.scrollWidth > b.clientWidth + 1).length"
    assert browser.evaluate(cut) == 0, f"{name}: the best list's right-hand columns are cut off"
    assert browser.evaluate("document.querySelectorAll('h2').length") == len(shown)
    assert browser.evaluate(OVERLAPS) == []
    assert browser.problems() == []


def sorts(browser: Browser, section: str, column: int) -> List[float]:
    """Clicks header `column` of the table in `section` twice; the column's numbers after."""
    script = f"""(() => {{
      const table = document.querySelector('#{section} table.sortable');
      const head = table.tHead.rows[0].cells[{column}];
      head.click(); head.click();
      return Array.from(table.tBodies[0].rows).map(r => parseFloat(r.cells[{column}].dataset.v));
    }})()"""
    return browser.evaluate(script)


def test_a_portfolio_report_renders_every_section_offline(cli: Cli, browser: Browser) -> None:
    (cli.workdir / "u").mkdir()
    for seed, name in enumerate(["AAA", "BBB", "CCC"], 1):
        cli.run("data", "synth", "--bars", "3000", "--seed", str(seed), "--out", f"u/{name}.parquet")
    said = cli.run("--device", "cpu", "backtest", "--data", "u/*.parquet", "--portfolio", "--size", "0.3",
                   "--init-cash", "10000", "--report", "p.html", "--json")
    out = json.loads(said)
    sections = ["run", "metrics", "equity", "allocation", "contribution", "trades"]
    check_page(browser, cli.workdir / "p.html", sections, "portfolio")
    # Each symbol's profit adds up to the account's.
    profits = browser.evaluate(
        "Array.from(document.querySelectorAll('#contribution tbody tr')).map(r => parseFloat(r.cells[3].dataset.v))"
    )
    assert len(profits) == 3
    assert abs(sum(profits) - (out["portfolio"]["final_equity"] - 10_000)) < 1e-6
    # The stack's top edge (cash included) is the whole equity at every bar drawn.
    top = browser.evaluate(
        "JSON.parse(document.querySelector('#allocation script[data-chart]').textContent).data[1]"
    )
    assert len(top) > 100 and all(abs(t - 1.0) < 1e-9 for t in top)
    assert browser.evaluate("document.querySelector('#trades h2').textContent") == f"Trades ({out['trades']})"
    # Python's page of the same account is the CLI's, byte for byte.
    universe = str(cli.workdir / "u" / "*.parquet")
    bt = threadx.backtest(universe, "bb_atr", portfolio=True, size=0.3, init_cash=10_000)
    bt.report(cli.workdir / "py.html")
    page = (cli.workdir / "p.html").read_text().replace("u/*.parquet", universe)
    assert (cli.workdir / "py.html").read_text() == page


def test_a_backtest_report_renders_every_section_offline(cli: Cli, browser: Browser) -> None:
    cli.run("--device", "cpu", "backtest", "--set", "bb_period=30", "--report", "bt.html", "--json")
    check_page(browser, cli.workdir / "bt.html", ["run", *BACKTEST_SECTIONS], "backtest")
    # The charts follow the window's width.
    browser.call("Emulation.setDeviceMetricsOverride", width=900, height=800, deviceScaleFactor=1, mobile=False)
    browser.evaluate("new Promise(r => setTimeout(r, 400))")
    widths = browser.evaluate("Array.from(document.querySelectorAll('div.chart canvas')).map(c => c.getBoundingClientRect().width)")
    assert widths and all(w <= 900 for w in widths), widths
    assert browser.evaluate("document.documentElement.scrollWidth") <= 900
    browser.call("Emulation.setDeviceMetricsOverride", width=1280, height=800, deviceScaleFactor=1, mobile=False)
    returns = sorts(browser, "trades", 6)
    assert len(returns) > 10 and returns == sorted(returns, reverse=True), "descending after two clicks"
    cards = browser.evaluate("Array.from(document.querySelectorAll('.card .name')).map(e => e.textContent)")
    for name in ["Total return", "Annual return", "Annual volatility", "Sharpe (annual)", "Max drawdown"]:
        assert name in cards
    # quantstats' comparisons: buy and hold beside the strategy, and the worst drawdowns,
    # the deepest of which is the max drawdown card's; the deepest first.
    assert "Buy and hold" in cards and "Buy and hold max drawdown" in cards
    card = browser.evaluate("Object.fromEntries(Array.from(document.querySelectorAll('.card')).map(c => [c.querySelector('.name').textContent, c.querySelector('.value').textContent]))")
    depths = browser.evaluate("Array.from(document.querySelectorAll('#drawdowns tbody tr')).map(r => [r.cells[4].textContent, parseFloat(r.cells[4].dataset.v)])")
    assert 1 <= len(depths) <= 5 and depths[0][0] == card["Max drawdown"], (depths, card)
    assert [d for _, d in depths] == sorted(d for _, d in depths), depths
    # The price with every trade's entry and exit marked at its fill (an open trade: no exit),
    # and the levels the rules compare the close with drawn over it (the bands; not the ATR).
    price = browser.evaluate("""(() => {
      const box = document.querySelector('#price div.chart');
      const spec = JSON.parse(document.querySelector(`script[data-chart="${box.id}"]`).textContent);
      return [spec.series.map(s => !!s.marker),
              spec.series.map((s, i) => s.marker ? spec.data[i + 1].filter(v => v !== null).length : null)
                         .filter(v => v !== null),
              spec.series.map(s => s.label)];
    })()""")
    assert price[2] == ["close", "bbands_30_2 lower", "bbands_30 middle", "entry", "exit"], price[2]
    trades_said = browser.evaluate("document.querySelector('#trades h2').textContent")
    total = int(trades_said.split("(")[1].rstrip(")"))
    closed = int(card["Trades"].split("(")[1].split()[0])
    assert price[0] == [False, False, False, True, True] and price[1] == [total, closed], (price, total, closed)
    data = threadx.synthetic(bars=35_040, seed=42)
    hold = data["close"].iloc[-1] / data["close"].iloc[0] - 1
    assert card["Buy and hold"] == f"{hold * 100:.2f} %", (card["Buy and hold"], hold)
    # The same page from the backtest's JSON: the same numbers.
    (cli.workdir / "bt.json").write_text(cli.run("--device", "cpu", "backtest", "--set", "bb_period=30", "--json"))
    cli.run("--device", "cpu", "report", "bt.json", "--out", "again.html")
    values = "Array.from(document.querySelectorAll('.card .value')).map(e => e.textContent)"
    first = browser.evaluate(values)
    browser.open(cli.workdir / "again.html")
    assert browser.evaluate(values) == first


def test_the_main_jobs_sweep_report_with_overfitting(cli: Cli, browser: Browser) -> None:
    cli.run("--device", "cpu", "sweep", "--out", "s.csv", "--report", "s.html", "--overfitting", "--quiet")
    sections = ["run", "best", "heatmaps", "distribution", "overfitting", *BACKTEST_SECTIONS]
    check_page(browser, cli.workdir / "s.html", sections, "sweep")
    shapes = browser.evaluate("Array.from(document.querySelectorAll('#overfitting tbody tr')).map(r => r.cells[8].textContent)")
    assert shapes and set(shapes) <= {"a plateau", "a spike", "no comparison"}, shapes
    # One verdict heads the section (docs/overfitting.md's rule; the main job reads so).
    first = browser.evaluate("[document.querySelector('#overfitting dt').textContent, document.querySelector('#overfitting dd').textContent]")
    assert first[0] == "Verdict" and first[1].startswith("not proven: a better in-sample Sharpe"), first
    for section in ("heatmaps", "overfitting", "equity"):
        browser.screenshot_of(f"#{section}", artifacts() / "report" / f"sweep-{section}.png")
    cells = browser.evaluate("document.querySelectorAll('#heatmaps svg rect > title').length")
    assert cells >= 6 * 25, cells
    # The pairs that matter most are open, the others one click away, widest spread first.
    opened = browser.evaluate("Array.from(document.querySelectorAll('#heatmaps > div > figure.svg, #heatmaps figure.svg')).filter(f => !f.closest('details')).length")
    spreads = browser.evaluate("Array.from(document.querySelectorAll('#heatmaps details summary')).map(s => parseFloat(s.textContent.split(' spreads ')[1]))")
    assert opened == 2 and len(spreads) == 4 and spreads == sorted(spreads, reverse=True), (opened, spreads)
    browser.evaluate("document.querySelector('#heatmaps details summary').click()")
    assert browser.evaluate("document.querySelector('#heatmaps details').open") is True
    # The colours say which way is good: each heatmap's best cell is blue, its worst red
    # (or white, where every value is positive).
    extremes = browser.evaluate("""Array.from(document.querySelectorAll('#heatmaps svg')).map(svg => {
      const cells = Array.from(svg.querySelectorAll('rect')).filter(r => r.querySelector('title'))
        .map(r => [parseFloat(r.querySelector('title').textContent.split(': ')[1].split(' ')[1]), r.getAttribute('fill')])
        .filter(([v]) => !isNaN(v)).sort((a, b) => a[0] - b[0]);
      return [cells[0][1], cells[cells.length - 1][1]];
    })""")
    for worst, best in extremes:
        rgb = lambda c: [int(c[i:i + 2], 16) for i in (1, 3, 5)]  # noqa: E731
        assert rgb(best)[2] > rgb(best)[0] and rgb(worst)[0] >= rgb(worst)[2], (worst, best)
    ranks = sorts(browser, "best", 0)
    assert ranks == sorted(ranks, reverse=True)
    # `threadx report` on the summary draws the same sweep.
    cli.run("--device", "cpu", "report", "s.json", "--out", "again.html")
    browser.open(cli.workdir / "again.html")
    assert browser.evaluate("document.querySelectorAll('#heatmaps svg rect > title').length") == cells


def test_a_rule_file_search_and_a_walk_forward(cli: Cli, browser: Browser) -> None:
    donchian = str(REPO / "examples" / "strategies" / "donchian.toml")
    cli.run("--device", "cpu", "sweep", "--strategy", donchian, "--grid", "n=5:100:5", "--grid", "m=1:4:0.5",
            "--search", "tpe", "--trials", "48", "--seed", "3",
            "--out", "tpe.csv", "--report", "tpe.html", "--quiet")
    check_page(browser, cli.workdir / "tpe.html", ["run", "best", "heatmaps", "search", *BACKTEST_SECTIONS], "rule-file-search")
    cli.run("--device", "cpu", "sweep", "--data", "synthetic:bars=8000,seed=5", "--grid", "bb_period=10,20,30",
            "--walk-forward", "train=3000,test=1000", "--out", "wf.csv", "--report", "wf.html", "--quiet")
    check_page(browser, cli.workdir / "wf.html", ["run", "out-of-sample", "walk-forward"], "walk-forward")
    # The test windows back to back: their totals are the summary's, their equity is drawn,
    # and every window's row fits the page up to its DSR.
    summary = json.loads((cli.workdir / "wf.json").read_text())
    overall = summary["out_of_sample_overall"]
    facts = browser.evaluate("Object.fromEntries(Array.from(document.querySelectorAll('#out-of-sample dt')).map(d => [d.textContent, d.nextElementSibling.textContent]))")
    assert facts["Total return"] == f"{overall['total_return'] * 100:.2f} %", (facts, overall)
    assert browser.evaluate("document.querySelectorAll('#out-of-sample canvas').length") >= 1
    cut = "Array.from(document.querySelectorAll('#walk-forward .table-box')).filter(b => b.scrollWidth > b.clientWidth + 1).length"
    assert browser.evaluate(cut) == 0, "the windows' right-hand columns are cut off"
    dsr = browser.evaluate("Array.from(document.querySelectorAll('#walk-forward table.sortable tbody tr')).map(r => parseFloat(r.cells[r.cells.length - 1].dataset.v))")
    want = [w["out_of_sample_dsr"]["dsr"] for w in summary["windows"]]
    assert len(dsr) == len(want) == 5 and all(abs(a - b) < 1e-12 for a, b in zip(dsr, want)), (dsr, want)
    # Named for what ran, its dates shown, its metrics formatted as every other table's.
    page = (cli.workdir / "wf.html").read_text()
    assert "<h1>bb_atr walk-forward</h1>" in page and " - to -" not in page
    assert "8000 bars, 2024-01-01T00:00:00Z to 2024-03-24T07:45:00Z" in page
    cells = browser.evaluate("Array.from(document.querySelectorAll('#walk-forward td')).map(c => c.textContent)")
    assert any(c.endswith(" %") for c in cells), "returns as percentages"
    assert not [c for c in cells if "." in c and len(c.split(".")[1].rstrip(" %")) > 4], "no raw floats"


def test_a_100_by_21_heatmap_keeps_its_labels_apart(cli: Cli, browser: Browser) -> None:
    cli.run("--device", "cpu", "sweep", "--data", "synthetic:bars=3000,seed=1", "--grid", "bb_period=5:104:1",
            "--grid", "bb_std=1:3:0.1", "--out", "big.csv", "--report", "big.html", "--quiet")
    check_page(browser, cli.workdir / "big.html", ["run", "best", "heatmaps", "distribution"], "heatmap-100x21")
    assert browser.evaluate("document.querySelectorAll('#heatmaps svg rect > title').length") == 2100


def test_bad_input_is_refused_by_name(cli: Cli) -> None:
    (cli.workdir / "x.json").write_text("{\"a\": 1,\n oops}")
    assert "x.json, line 2, column 2: not JSON" in cli.fails("report", "x.json")
    (cli.workdir / "y.json").write_text("{\"a\": 1}")
    assert "neither a sweep's summary" in cli.fails("report", "y.json")
    assert "--out must be a regular file" in cli.fails("sweep", "--out", "/dev/null", "--report", "r.html")
    assert "--report draws a whole sweep" in cli.fails("sweep", "--shard", "0/2", "--out", "p.csv", "--report", "r.html")
    # A report is never written over an input.
    (cli.workdir / "bars.csv").write_text("timestamp,open,high,low,close\n")
    assert "bars.csv" in cli.fails("backtest", "--data", "bars.csv", "--report", "bars.csv")
    assert "x.json" in cli.fails("report", "x.json", "--out", "x.json")
    assert (cli.workdir / "x.json").read_text().startswith("{")


def test_pythons_reports_are_the_clis(cli: Cli, browser: Browser) -> None:
    import threadx

    data = "synthetic:bars=6000,seed=3"
    bt = threadx.backtest(data, bb_period=30, device="cpu")
    bt.report(cli.workdir / "py-bt.html")
    cli.run("--device", "cpu", "backtest", "--data", data, "--set", "bb_period=30", "--report", "bt.html")
    check_page(browser, cli.workdir / "py-bt.html", ["run", *BACKTEST_SECTIONS], "python-backtest")
    cards = "Array.from(document.querySelectorAll('.card .value')).map(e => e.textContent)"
    mine = browser.evaluate(cards)
    browser.open(cli.workdir / "bt.html")
    assert browser.evaluate(cards) == mine
    assert bt._repr_html_().startswith("<iframe") and "srcdoc=" in bt._repr_html_()
    with pytest.raises(FileNotFoundError, match="folder .*no-such-folder does not exist"):
        bt.report(cli.workdir / "no-such-folder" / "r.html")

    grid = {"bb_period": list(range(10, 60, 5)), "bb_std": [1.5, 2, 2.5], "atr_mult": [1, 2]}
    rows = threadx.sweep(data, grid=grid, device="cpu", progress=False, overfitting=True)
    rows.report(cli.workdir / "py-sweep.html")
    cli.run("--device", "cpu", "sweep", "--data", data, "--grid", "bb_period=10:55:5", "--grid", "bb_std=1.5,2,2.5",
            "--grid", "atr_mult=1,2", "--overfitting", "--out", "s.csv", "--report", "s.html", "--quiet")
    sections = ["run", "best", "heatmaps", "distribution", "overfitting", *BACKTEST_SECTIONS]
    check_page(browser, cli.workdir / "py-sweep.html", sections, "python-sweep")
    same = """[Array.from(document.querySelectorAll('#heatmaps svg rect > title')).map(t => t.textContent),
              Array.from(document.querySelectorAll('#best td')).map(t => t.textContent),
              Array.from(document.querySelectorAll('#overfitting dd')).map(t => t.textContent)]"""
    mine = browser.evaluate(same)
    browser.open(cli.workdir / "s.html")
    assert browser.evaluate(same) == mine
    assert len(mine[0]) == 10 * 3 + 10 * 2 + 3 * 2
    # A walk-forward's windows and a universe's rows say where their report comes from.
    windows = threadx.sweep(data, grid={"bb_period": [20, 30]}, walk_forward="train=3000,test=1000", progress=False)
    with pytest.raises(ValueError, match="walk-forward"):
        windows.report(cli.workdir / "w.html")
    assert not (cli.workdir / "w.html").exists()
    # A filtered frame reports the rows it keeps.
    few = rows[rows["bb_std"] == 2.0]
    few.report(cli.workdir / "few.html")
    browser.open(cli.workdir / "few.html")
    assert browser.problems() == []
    assert "of 20 combos" in browser.evaluate("document.querySelector('#distribution').textContent")


def test_pythons_search_report_is_the_clis(cli: Cli, browser: Browser) -> None:
    import threadx

    data = "synthetic:bars=6000,seed=3"
    donchian = str(REPO / "examples" / "strategies" / "donchian.toml")
    grid = {"n": list(range(5, 105, 5)), "m": [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]}
    found = threadx.search(data, donchian, "tpe", 40, grid=grid, seed=3, device="cpu", progress=False)
    found.report(cli.workdir / "py-search.html")
    cli.run("--device", "cpu", "sweep", "--data", data, "--strategy", donchian, "--grid", "n=5:100:5",
            "--grid", "m=1:4:0.5", "--search", "tpe", "--trials", "40", "--seed", "3",
            "--out", "tpe.csv", "--report", "tpe.html", "--quiet")
    check_page(browser, cli.workdir / "py-search.html", ["run", "best", "heatmaps", "search", *BACKTEST_SECTIONS],
               "python-search")
    same = """[Array.from(document.querySelectorAll('#heatmaps svg rect > title')).map(t => t.textContent),
              Array.from(document.querySelectorAll('#best td')).map(t => t.textContent),
              document.querySelector('#search dl').textContent,
              document.querySelector('#search script').textContent]"""
    mine = browser.evaluate(same)
    browser.open(cli.workdir / "tpe.html")
    assert browser.evaluate(same) == mine
