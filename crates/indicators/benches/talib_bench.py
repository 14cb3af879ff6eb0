"""TA-Lib's speed on this machine, for the README's comparison with
`cargo bench -p threadx-indicators --bench indicators -- single_thread`.

    python3 -m venv /tmp/talib && /tmp/talib/bin/pip install ta-lib numpy
    /tmp/talib/bin/python crates/indicators/benches/talib_bench.py

Each line: the best of 5 repeats of 5 calls on 1,000,000 bars (a log-normal walk
around 60,000), in milliseconds per call, one thread (TA-Lib has no threads).
"""

import timeit

import numpy as np
import talib

rng = np.random.default_rng(1)
n = 1_000_000
close = 60000 * np.exp(np.cumsum(rng.normal(0, 1e-3, n)))
high, low = close * 1.001, close * 0.999
calls = {
    "BBANDS(20, 2)": lambda: talib.BBANDS(close, 20, 2, 2),
    "ATR(14)": lambda: talib.ATR(high, low, close, 14),
    "MACD(12, 26, 9)": lambda: talib.MACD(close, 12, 26, 9),
    "RSI(14)": lambda: talib.RSI(close, 14),
    "EMA(20)": lambda: talib.EMA(close, 20),
    "SMA(20)": lambda: talib.SMA(close, 20),
    "STDDEV(20)": lambda: talib.STDDEV(close, 20),
    "TRANGE": lambda: talib.TRANGE(high, low, close),
}
print(f"ta-lib {talib.__version__}, numpy {np.__version__}")
for name, call in calls.items():
    best = min(timeit.repeat(call, number=5, repeat=5)) / 5
    print(f"{name:16} {best * 1e3:.2f} ms")
