//! Market data: the CSV loader in every accepted form, validation errors that name the
//! line and column, and the synthetic generator.

use threadx_indicators::{DataError, Ohlcv, SyntheticSpec};

const T0: i64 = 1_704_067_200_000; // 2024-01-01T00:00:00Z
const STEP: i64 = 900_000;

fn parse(text: &str) -> Result<Ohlcv, DataError> {
    Ohlcv::parse_csv("test.csv", text)
}

fn invalid(text: &str) -> (usize, String, String) {
    match parse(text) {
        Err(DataError::Invalid { line, column, problem, .. }) => (line, column, problem),
        other => panic!("expected a validation error, got {other:?}"),
    }
}

#[test]
fn headers_are_matched_in_any_case_and_order_with_any_time_form() {
    let csv = "Close,HIGH,low,Open,Volume,Date\n\
               101,102,99,100,5,2024-01-01 00:00:00\n\
               102.5,103,100.5,101,6,2024-01-01T00:15:00Z\n\
               102,103.25,101,102.5,7,1704069000\n\
               103,104,101.5,102,8,1704069900000\n";
    let bars = parse(csv).unwrap();
    assert_eq!(bars.timestamps(), &[T0, T0 + STEP, T0 + 2 * STEP, T0 + 3 * STEP]);
    assert_eq!(bars.open(), &[100.0, 101.0, 102.5, 102.0]);
    assert_eq!(bars.high(), &[102.0, 103.0, 103.25, 104.0]);
    assert_eq!(bars.low(), &[99.0, 100.5, 101.0, 101.5]);
    assert_eq!(bars.close(), &[101.0, 102.5, 102.0, 103.0]);
    assert_eq!(bars.volume(), &[5.0, 6.0, 7.0, 8.0]);
}

#[test]
fn volume_is_optional_and_open_time_names_the_time() {
    let bars = parse("open_time,open,high,low,close\n1704067200000,1,2,0.5,1.5\n").unwrap();
    assert_eq!(bars.timestamps(), &[T0]);
    assert_eq!(bars.volume(), &[0.0]);
}

#[test]
fn headerless_binance_klines_are_read() {
    // open_time, open, high, low, close, volume, close_time, quote volume, trades, taker
    // base, taker quote, ignore; the 2025 spot files give times in microseconds.
    let csv = "1704067200000,42283.58,42554.57,42261.02,42475.23,1271.68108,1704068099999,53957248.97,47134,682.57581,28957416.82,0\n\
               1704068100000000,42475.23,42475.23,42300.00,42379.43,813.23,1704068999999999,1,2,3,4,0\n";
    let bars = parse(csv).unwrap();
    assert_eq!(bars.timestamps(), &[T0, T0 + STEP]);
    assert_eq!(bars.close(), &[42475.23, 42379.43]);
    assert_eq!(bars.volume(), &[1271.68108, 813.23]);
}

#[test]
fn validation_names_line_and_column() {
    let head = "timestamp,open,high,low,close,volume\n";
    let row = |t: i64, close: &str| format!("{t},100,101,99,{close},1\n");
    let cases = [
        (format!("{head}{}{}", row(T0, "100"), row(T0, "100")), 3, "timestamp", "duplicate timestamp"),
        (format!("{head}{}{}", row(T0 + STEP, "100"), row(T0, "100")), 3, "timestamp", "out of order"),
        (format!("{head}{}{}", row(T0, "100"), row(T0 + STEP, "NaN")), 3, "close", "not a finite number"),
        (format!("{head}{}{}", row(T0, "inf"), row(T0 + STEP, "1")), 2, "close", "not a finite number"),
        (format!("{head}{}", row(T0, "-5")), 2, "close", "not positive"),
        (format!("{head}{}", row(T0, "abc")), 2, "close", "`abc` is not a number"),
        (format!("{head}{T0},100,98,99,100,1\n"), 2, "high", "below low"),
        (format!("{head}{T0},100,101,99,100,-1\n"), 2, "volume", "negative"),
        (format!("{head}yesterday,100,101,99,100,1\n"), 2, "timestamp", "`yesterday`"),
        (format!("{head}{T0},100,101\n"), 2, "low", "missing field"),
    ];
    for (csv, line, column, problem) in cases {
        let (got_line, got_column, got_problem) = invalid(&csv);
        assert_eq!((got_line, got_column.as_str()), (line, column), "{csv}");
        assert!(got_problem.contains(problem), "{got_problem:?} should say {problem:?}");
    }
}

#[test]
fn windows_line_ends_read_the_same_and_name_the_same_lines() {
    let rows: Vec<String> = (0..8).map(|i| format!("{},100,101,99,100.5,1", 1_700_000_000 + 900 * i)).collect();
    let lf = format!("timestamp,open,high,low,close,volume\n{}\n", rows.join("\n"));
    let crlf = lf.replace('\n', "\r\n");
    let (a, b) = (parse(&lf).unwrap(), parse(&crlf).unwrap());
    assert_eq!((a.timestamps(), a.close(), a.volume()), (b.timestamps(), b.close(), b.volume()));
    // The bad value is on line 6 either way.
    let bad = |text: &str| invalid(&text.replacen(",101,", ",abc,", 5).replacen(",abc,", ",101,", 4));
    assert_eq!(bad(&lf).0, 6);
    assert_eq!(bad(&crlf), bad(&lf));
}

/// A row longer than the header is refused by its line (a stray comma, a column added
/// mid-file), in one pass and in stretches alike; empty fields past the header (a trailing
/// comma) are read as before.
#[test]
fn a_row_longer_than_the_header_is_refused_by_its_line() {
    let rows: Vec<String> = (0..8).map(|i| format!("{},100,101,99,100.5,1", 1_700_000_000 + 900 * i)).collect();
    let text = format!("timestamp,open,high,low,close,volume\n{}\n", rows.join("\n"));
    let long = text.replacen(",100.5,1\n", ",100.5,1,7\n", 3).replacen(",100.5,1,7\n", ",100.5,1\n", 2);
    let err = parse(&long).unwrap_err().to_string();
    assert!(err.ends_with("line 4 has 7 fields where the header has 6"), "{err}");
    let trailing = text.replace(",100.5,1\n", ",100.5,1,\n");
    assert_eq!(parse(&trailing).unwrap().close(), parse(&text).unwrap().close());
}

#[test]
fn a_pandas_export_with_its_unnamed_index_column_is_read() {
    // `df.to_csv()` of a frame indexed by time, and the same file read back and written
    // again (pandas then names the column `Unnamed: 0`).
    for head in ["", "Unnamed: 0"] {
        let bars = parse(&format!(
            "{head},Open,High,Low,Close,Volume\n2024-01-01 00:00:00,1,2,0.5,1.5,10\n2024-01-01 00:15:00,1.5,2,1,1.25,7\n"
        ))
        .unwrap();
        assert_eq!(bars.timestamps(), &[T0, T0 + STEP]);
        assert_eq!(bars.close(), &[1.5, 1.25]);
        assert_eq!(bars.volume(), &[10.0, 7.0]);
    }
    // The error lists every accepted name of the time column.
    let err = parse("x,open,high,low,close\n1,1,2,0.5,1.5\n").unwrap_err().to_string();
    for name in ["timestamp", "time", "date", "datetime", "open_time", "unnamed first column"] {
        assert!(err.contains(name), "{name} missing from: {err}");
    }
}

#[test]
fn missing_columns_and_empty_files_are_refused() {
    match parse("time,open,high,close\n1,2,3,4\n") {
        Err(e @ DataError::MissingColumn { column: "low", .. }) => {
            assert!(e.to_string().contains("found: time, open, high, close"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(parse(""), Err(DataError::Empty { .. })));
    assert!(matches!(parse("timestamp,open,high,low,close\n"), Err(DataError::Empty { .. })));
    let err = Ohlcv::load("/no/such/file.csv").unwrap_err();
    assert!(err.to_string().contains("/no/such/file.csv"), "{err}");
}

#[test]
fn bars_per_year_come_from_the_median_spacing() {
    // 15-minute BTC-like bars: 96 a day, 365 days.
    assert_eq!(Ohlcv::load("synthetic:bars=3000,seed=1").unwrap().bars_per_year(), 35_040.0);
    // Hourly FX bars with weekend gaps: the gaps are not the median.
    assert_eq!(Ohlcv::load("synthetic:bars=3000,seed=1,market=fx").unwrap().bars_per_year(), 8_760.0);
    // Daily bars with one missing day; a single bar has no spacing.
    let daily = parse(
        "date,open,high,low,close\n2024-01-01,1,1,1,1\n2024-01-02,1,1,1,1\n2024-01-04,1,1,1,1\n2024-01-05,1,1,1,1\n",
    )
    .unwrap();
    assert_eq!(daily.bars_per_year(), 365.0);
    assert!(parse("date,open,high,low,close\n2024-01-01,1,1,1,1\n").unwrap().bars_per_year().is_nan());
}

/// Bars at `hours` (UTC) of each day from Monday 2024-01-01 for `days` days, the days that
/// `keep` (0 = Monday) allows.
fn bars_on(days: i64, hours: &[i64], keep: impl Fn(i64) -> bool) -> Ohlcv {
    let mut csv = String::from("timestamp,open,high,low,close\n");
    for day in (0..days).filter(|d| keep(d % 7)) {
        for h in hours {
            csv += &format!("{},100,101,99,100\n", T0 / 1000 + day * 86_400 + h * 3_600);
        }
    }
    parse(&csv).unwrap()
}

#[test]
fn weekday_bars_are_annualised_over_252_trading_days() {
    use threadx_indicators::Calendar;
    let weekdays = |d: i64| d < 5;
    // Daily stock bars, 80 weeks: 252 a year, as quantstats assumes.
    let daily = bars_on(560, &[0], weekdays);
    assert_eq!((daily.calendar(), daily.bars_per_year()), (Calendar::TradingDays, 252.0));
    // Seven hourly bars a session: 7 · 252.
    let hourly = bars_on(28, &[14, 15, 16, 17, 18, 19, 20], weekdays);
    assert_eq!((hourly.calendar(), hourly.bars_per_year()), (Calendar::TradingDays, 1_764.0));
    // One Saturday bar: calendar days again (the median spacing, a year of 365 days).
    let saturday = bars_on(560, &[0], |d| d < 6);
    assert_eq!((saturday.calendar(), saturday.bars_per_year()), (Calendar::Days, 365.0));
    // Under two weeks of weekdays cannot tell a calendar: 365 days.
    let short = bars_on(12, &[0], weekdays);
    assert_eq!((short.calendar(), short.bars_per_year()), (Calendar::Days, 365.0));
    // Hourly FX bars open on Sunday evenings (UTC): calendar days.
    let fx = Ohlcv::load("synthetic:bars=3000,seed=1,market=fx").unwrap();
    assert_eq!(fx.calendar(), Calendar::Days);
    assert!(Calendar::TradingDays.describe().contains("252") && Calendar::Days.describe().contains("365"));
}

#[test]
fn csv_round_trip_keeps_every_value() {
    let bars = SyntheticSpec { bars: 3000, seed: 11, ..SyntheticSpec::default() }.generate();
    let back = Ohlcv::parse_csv(bars.origin(), &bars.to_csv()).unwrap();
    assert_eq!(back, bars);
}

#[test]
fn synthetic_bars_are_deterministic_and_realistic() {
    let a = Ohlcv::load("synthetic:bars=35040,seed=5").unwrap();
    assert_eq!(a, SyntheticSpec { bars: 35_040, seed: 5, ..SyntheticSpec::default() }.generate());
    assert_ne!(a.close(), SyntheticSpec { bars: 35_040, seed: 6, ..SyntheticSpec::default() }.generate().close());
    assert_eq!(a.timestamps()[1] - a.timestamps()[0], STEP);
    for t in 0..a.len() {
        let (o, h, l, c) = (a.open()[t], a.high()[t], a.low()[t], a.close()[t]);
        assert!(l <= o.min(c) && o.max(c) <= h && l > 0.0, "bar {t}: {o} {h} {l} {c}");
        assert_eq!((c * 100.0).round() / 100.0, c, "bar {t}: prices are in cents");
    }
    // Log returns: fat-tailed mixture of regimes, per-bar volatility between 0.1% and 1%.
    let r: Vec<f64> = a.close().windows(2).map(|w| (w[1] / w[0]).ln()).collect();
    let mean = r.iter().sum::<f64>() / r.len() as f64;
    let var = r.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / r.len() as f64;
    let kurtosis = r.iter().map(|x| (x - mean).powi(4)).sum::<f64>() / r.len() as f64 / (var * var);
    assert!((1e-3..1e-2).contains(&var.sqrt()), "volatility {}", var.sqrt());
    assert!(kurtosis > 3.5, "regimes make returns fat-tailed: kurtosis {kurtosis}");
    // Volatility clusters: squared returns are autocorrelated.
    let sq: Vec<f64> = r.iter().map(|x| (x - mean).powi(2)).collect();
    let sq_mean = var;
    let cov = sq.windows(2).map(|w| (w[0] - sq_mean) * (w[1] - sq_mean)).sum::<f64>() / sq.len() as f64;
    let sq_var = sq.iter().map(|x| (x - sq_mean).powi(2)).sum::<f64>() / sq.len() as f64;
    assert!(cov / sq_var > 0.05, "volatility clustering: lag-1 autocorrelation of r² {}", cov / sq_var);
}

#[test]
fn bad_synthetic_specs_are_refused() {
    for (spec, says) in [
        ("synthetic:bars=0", "at least 1"),
        ("synthetic:bars=ten", "not a count"),
        ("synthetic:bars=10,colour=red", "unknown key `colour`"),
        ("synthetic:bars", "not key=value"),
    ] {
        let err = Ohlcv::load(spec).unwrap_err().to_string();
        assert!(err.contains(says), "{spec}: {err}");
    }
    assert_eq!(Ohlcv::load("synthetic").unwrap().len(), 35_040);
}

#[test]
fn arrays_are_checked_and_named_by_row() {
    let ts = vec![T0, T0 + STEP, T0 + 2 * STEP];
    let good = vec![1.0, 2.0, 3.0];
    let bad_close = vec![1.0, 2.0, -3.0];
    let err = Ohlcv::new("DataFrame", ts.clone(), good.clone(), good.clone(), good.clone(), bad_close, vec![0.0; 3]);
    assert_eq!(err.unwrap_err().to_string(), "DataFrame, row 2, column `close`: price -3 is not positive");
    let backwards = vec![T0, T0 + STEP, T0];
    let err = Ohlcv::new("DataFrame", backwards, good.clone(), good.clone(), good.clone(), good.clone(), vec![0.0; 3]);
    assert!(err.unwrap_err().to_string().starts_with("DataFrame, row 2, column `timestamp`: out of order"));
}

#[test]
fn one_header_rule_finds_the_columns_of_files_and_frames() {
    use threadx_indicators::find_columns;
    assert_eq!(find_columns("f", &["Date", "OPEN", "High", "low", "Close"]).unwrap(), ([0, 1, 2, 3, 4], None));
    // A frame's index passed as an unnamed first column.
    assert_eq!(find_columns("f", &["", "close", "low", "high", "open", "Volume"]).unwrap(), ([0, 4, 3, 2, 1], Some(5)));
    let err = find_columns("DataFrame", &["time", "open", "high", "close"]).unwrap_err().to_string();
    assert!(err.starts_with("DataFrame: no `low` column (found: time, open, high, close)"), "{err}");
}

#[test]
fn epoch_numbers_are_told_apart_by_magnitude() {
    use threadx_indicators::epoch_to_ms;
    let seconds = (T0 / 1000) as f64;
    for (number, want) in [(seconds, T0), (T0 as f64, T0), (T0 as f64 * 1e3, T0), (T0 as f64 * 1e6, T0)] {
        assert_eq!(epoch_to_ms(number), Ok(want), "{number}");
    }
    assert!(epoch_to_ms(f64::NAN).is_err());
    assert!(epoch_to_ms(-1.0).is_err());
}

#[test]
fn synthetic_sizes_are_checked_before_anything_is_allocated() {
    let err = |spec: &str| Ohlcv::load(spec).unwrap_err().to_string();
    assert!(
        err("synthetic:bars=18446744073709551615").contains("at most 4294967295"),
        "{}",
        err("synthetic:bars=18446744073709551615")
    );
    assert!(err("synthetic:bars=100000000000").contains("at most 4294967295"));
    let huge = err("synthetic:bars=4294967295");
    assert!(huge.contains("MiB of memory") || huge.contains("at most"), "{huge}");
    assert!(err("synthetic:bars=0").contains("at least 1"));
    assert!(SyntheticSpec { bars: 1_000, ..SyntheticSpec::default() }.check().is_ok());
}

#[test]
fn files_that_are_not_csv_text_are_refused_at_once_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = SyntheticSpec { bars: 300, ..SyntheticSpec::default() }.generate().to_csv();
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let load = |path: &std::path::Path| Ohlcv::read_csv(path).unwrap_err().to_string();
    // A sparse 256 MiB file of NULs: refused on its first line without reading it all.
    let zeros = dir.path().join("zeros.csv");
    std::fs::File::create(&zeros).unwrap().set_len(256 << 20).unwrap();
    let started = std::time::Instant::now();
    assert!(load(&zeros).ends_with("line 1: a NUL byte: this is binary data, not a CSV text file"), "{}", load(&zeros));
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // A valid CSV padded with NULs: refused at the first padded line.
    let mut padded = good.clone().into_bytes();
    padded.extend(std::iter::repeat_n(0u8, 1 << 20));
    assert!(load(&write("padded.csv", &padded)).contains("line 302: a NUL byte"));
    let mut gzip = vec![0x1f, 0x8b, 8, 0];
    gzip.extend(b"rest");
    assert!(load(&write("d.csv.gz", &gzip)).contains("gzip-compressed: decompress it first"));
    let parquet = write("d.parquet", b"PAR1\x15\x04");
    assert!(load(&parquet).contains("a Parquet file, not CSV"));
    let loaded = Ohlcv::load(parquet.to_str().unwrap()).unwrap_err().to_string();
    assert!(loaded.contains("d.parquet: not a readable Parquet file"), "{loaded}");
    let long = format!("timestamp,open,high,low,close\n{}\n", "1".repeat(100_000));
    assert!(load(&write("long.csv", long.as_bytes())).contains("line 2 is longer than 65536 bytes"));
    let latin1 = b"timestamp,open,high,low,close\n2024-01-01,1,2,0.5,1\n2024-01-02,1,2,0.5,\xe9\n";
    assert!(
        load(&write("latin1.csv", latin1)).contains("line 3 is not UTF-8 text"),
        "{}",
        load(&write("l.csv", latin1))
    );
    let semicolons = good.replace(',', ";");
    let err = load(&write("semi.csv", semicolons.as_bytes()));
    assert!(err.contains("the columns seem separated by `;`"), "{err}");
    // A huge field is quoted cut to about 80 characters.
    let wide = format!("timestamp,open,high,low,close\n2024-01-01,{}x,2,1,1\n", "9".repeat(5_000));
    let err = load(&write("wide.csv", wide.as_bytes()));
    assert!(err.contains("… (5001 bytes)` is not a number") && err.len() < 300, "{err}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 3_000, ..Default::default() })]

    /// Bytes near a CSV of bars (pieces of real rows, separators, quotes, NULs, non-UTF-8,
    /// huge and odd numbers): the loader returns bars or an error, never panics.
    #[test]
    fn the_csv_loader_never_panics(parts in proptest::collection::vec(proptest::sample::select(vec![
        "timestamp,open,high,low,close,volume\n", "2024-01-01 00:00:00,", "1704067200000,", "1,", "2,", "0.5,",
        "-1,", "1e308,", "1e-320,", "nan,", "inf,", "\"1,2\",", ",", "\n", "\r\n", "\"", "\0", "\u{feff}", "é",
        "2024-13-45,", "99999999999999999999999,", "9223372036854775807,", ";", "\t", "open", "close\n",
    ]), 0..60), tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..20)) {
        let mut bytes = parts.concat().into_bytes();
        bytes.extend(tail);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fuzz.csv");
        std::fs::write(&path, &bytes).unwrap();
        let _ = Ohlcv::read_csv(&path);
        if let Ok(text) = std::str::from_utf8(&bytes) {
            let _ = Ohlcv::parse_csv("fuzz", text);
        }
    }
}

#[test]
fn prices_outside_the_range_and_bars_that_break_the_ohlc_rule_are_refused_at_their_line() {
    let head = "timestamp,open,high,low,close\n2024-01-01 00:00,10,12,9,11\n";
    let case = |row: &str| Ohlcv::parse_csv("t.csv", &format!("{head}{row}\n")).unwrap_err().to_string();
    assert_eq!(
        case("2024-01-01 01:00,1e296,1.2e296,1e296,1.1e296"),
        "t.csv, line 3, column `open`: price 1e296 is outside 1e-100 to 1e100, the range in which indicators cannot overflow; rescale the prices"
    );
    assert_eq!(case("2024-01-01 01:00,10,12,9,14.4"), "t.csv, line 3, column `close`: close 14.4 is above high 12");
    assert_eq!(case("2024-01-01 01:00,18,12,9,11"), "t.csv, line 3, column `open`: open 18 is above high 12");
    assert_eq!(case("2024-01-01 01:00,8,12,9,11"), "t.csv, line 3, column `open`: open 8 is below low 9");
    assert_eq!(case("2024-01-01 01:00,10,12,13,11").split(": ").last().unwrap(), "high 12 is below low 13");
    // The edges of the range and a bar at its extremes are accepted.
    Ohlcv::parse_csv("t.csv", &format!("{head}2024-01-01 01:00,1e-100,1e100,1e-100,1e100\n")).unwrap();
}

/// A CSV longer than a few MiB is parsed in stretches of lines on the pool: the same bars,
/// line numbers and errors as one pass (a quote anywhere keeps the text in one pass), with
/// LF or CRLF line ends.
#[test]
fn a_long_csv_parsed_in_stretches_reads_as_one_pass_does() {
    let bars = SyntheticSpec::parse("bars=60000,seed=5").expect("spec").generate();
    let text = bars.to_csv();
    assert!(text.len() > 3 << 20, "long enough for several stretches: {} bytes", text.len());
    let one_pass = text.replacen("timestamp", "\"timestamp\"", 1);
    for text in [text.clone(), text.replace('\n', "\r\n")] {
        let read = parse(&text).expect("the bars");
        assert_eq!(read.timestamps(), bars.timestamps());
        assert_eq!((read.open(), read.high(), read.low()), (bars.open(), bars.high(), bars.low()));
        assert_eq!((read.close(), read.volume()), (bars.close(), bars.volume()));
    }
    assert_eq!(parse(&one_pass).expect("the bars").close(), bars.close());
    // An error far into the file names its line (the header is line 1), both ways.
    for text in [&text, &one_pass] {
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines[50_000] = lines[50_000].replacen(",", ",x", 2).replacen(",x", ",", 1);
        let (line, column, problem) = invalid(&(lines.join("\n") + "\n"));
        assert_eq!((line, column.as_str()), (50_001, "high"), "{problem}");
        // A late bar out of time order is named at its line too (validation uses the lines).
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines.swap(40_000, 40_001);
        let (line, column, _) = invalid(&(lines.join("\n") + "\n"));
        assert_eq!((line, column.as_str()), (40_002, "timestamp"));
    }
}
