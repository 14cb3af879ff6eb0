"""Golden vectors for ThreadX's indicators, computed by TA-Lib's C library.

Run once (the output is committed; the Rust tests read it):

    python3 -m venv /tmp/talib && /tmp/talib/bin/pip install ta-lib==0.8.2 numpy
    /tmp/talib/bin/python crates/indicators/tests/golden/make_talib_golden.py

The input is a deterministic BTC-like OHLC series around 60,000 with volatility regimes
and small moves (the case where naive rolling sums lose precision); it is written into
the file with the outputs, so the tests need no generator of their own. NaN is null.
"""

import json
import math
import pathlib

import numpy as np
import talib

BARS = 400


def series():
    state = 0x2545F4914F6CDD1D
    def uniform():
        nonlocal state
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return (state >> 11) / float(1 << 53)
    close, o, h, l = [], [], [], []
    price = 60_000.0
    for i in range(BARS):
        vol = 2e-4 if (i // 100) % 2 == 0 else 2e-3  # calm and busy regimes
        ret = (uniform() - 0.5) * 2 * vol * math.sqrt(3)
        prev = price
        price = round(price * math.exp(ret), 2)
        hi = round(max(prev, price) * (1 + uniform() * vol), 2)
        lo = round(min(prev, price) * (1 - uniform() * vol), 2)
        o.append(prev); h.append(hi); l.append(lo); close.append(price)
    return [np.array(x, dtype=np.float64) for x in (o, h, l, close)]


def volumes():
    """A volume per bar from its own generator (the prices' stream is left as it was)."""
    state = 0x9E3779B97F4A7C15
    out = []
    for _ in range(BARS):
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append(float(100 + (state >> 40) % 900))
    return np.array(out, dtype=np.float64)


def clean(arr):
    return [None if math.isnan(v) else float(v) for v in arr]


def main():
    o, h, l, c = series()
    out = {
        "SMA_20": talib.SMA(c, 20),
        "SMA_1": talib.SMA(c, 1),
        "EMA_20": talib.EMA(c, 20),
        "EMA_5": talib.EMA(c, 5),
        "STDDEV_20": talib.STDDEV(c, 20, 1.0),
        "TRANGE": talib.TRANGE(h, l, c),
        "ATR_14": talib.ATR(h, l, c, 14),
        "ATR_1": talib.ATR(h, l, c, 1),
        "RSI_14": talib.RSI(c, 14),
        "RSI_2": talib.RSI(c, 2),
    }
    upper, middle, lower = talib.BBANDS(c, 20, 2.0, 2.0, 0)
    out.update({"BBANDS_20_2_upper": upper, "BBANDS_20_2_middle": middle, "BBANDS_20_2_lower": lower})
    macd, signal, hist = talib.MACD(c, 12, 26, 9)
    out.update({"MACD_12_26_9_macd": macd, "MACD_12_26_9_signal": signal, "MACD_12_26_9_hist": hist})
    v = volumes()
    out.update({
        "CCI_14": talib.CCI(h, l, c, 14),
        "CCI_20": talib.CCI(h, l, c, 20),
        "OBV": talib.OBV(c, v),
        "WILLR_14": talib.WILLR(h, l, c, 14),
        "ADX_14": talib.ADX(h, l, c, 14),
        "ADX_5": talib.ADX(h, l, c, 5),
        "PLUS_DI_14": talib.PLUS_DI(h, l, c, 14),
        "MINUS_DI_14": talib.MINUS_DI(h, l, c, 14),
        "MINUS_DI_2": talib.MINUS_DI(h, l, c, 2),
        # Indicators of other series (the wrapper starts after a leading NaN warm-up).
        "SMA_20_of_volume": talib.SMA(v, 20),
        "EMA_5_of_RSI_14": talib.EMA(talib.RSI(c, 14), 5),
        "RSI_14_of_SMA_5": talib.RSI(talib.SMA(c, 5), 14),
        "STDDEV_10_of_volume": talib.STDDEV(v, 10, 1.0),
    })
    for fastk, slowk, slowd in [(5, 3, 3), (14, 3, 3)]:
        k, d = talib.STOCH(h, l, c, fastk, slowk, 0, slowd, 0)
        out.update({f"STOCH_{fastk}_{slowk}_{slowd}_slowk": k, f"STOCH_{fastk}_{slowk}_{slowd}_slowd": d})
    doc = {
        "talib": talib.__ta_version__.decode() if isinstance(talib.__ta_version__, bytes) else str(talib.__ta_version__),
        "python_wrapper": talib.__version__,
        "input": {"open": clean(o), "high": clean(h), "low": clean(l), "close": clean(c), "volume": clean(v)},
        "output": {k: clean(v) for k, v in out.items()},
    }
    path = pathlib.Path(__file__).with_name("talib.json")
    path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"wrote {path} ({path.stat().st_size} bytes, {len(out)} series of {BARS} bars)")


if __name__ == "__main__":
    main()
