//! Many symbols in one `--data`: a long file (CSV or Parquet, rows interleaved by time)
//! splits into each symbol's own bars, of different lengths and with gaps; a folder and a
//! glob pattern give a symbol per file; bad names, repeated names, empty folders and bad
//! bars are refused by name.

use arrow::array::{ArrayRef, Float64Array, RecordBatch, StringArray, TimestampMillisecondArray};
use std::sync::Arc;
use threadx_indicators::{DataError, MarketData, Ohlcv, SyntheticSpec, Universe};

/// Three symbols: 900 bars, 600 bars from the 200th hour, and 700 bars with every 7th
/// bar left out (gaps), each a seeded market of its own.
fn symbols() -> Vec<(String, Ohlcv)> {
    let market = |seed: u64, n: usize| SyntheticSpec::parse(&format!("bars={n},seed={seed}")).expect("spec").generate();
    let a = market(1, 900);
    let b = market(2, 800).slice(200..800);
    let c = market(3, 800);
    let kept: Vec<usize> = (0..800).filter(|i| i % 7 != 3).take(700).collect();
    let gappy = Ohlcv::new(
        "c",
        kept.iter().map(|&i| c.timestamps()[i]).collect(),
        kept.iter().map(|&i| c.open()[i]).collect(),
        kept.iter().map(|&i| c.high()[i]).collect(),
        kept.iter().map(|&i| c.low()[i]).collect(),
        kept.iter().map(|&i| c.close()[i]).collect(),
        kept.iter().map(|&i| c.volume()[i]).collect(),
    )
    .expect("bars");
    vec![("ETH-USD".into(), b), ("BTC-USD".into(), a), ("SOL-USD".into(), gappy)]
}

/// The long table's rows: every symbol's bars, interleaved by time (then symbol).
fn long_rows(symbols: &[(String, Ohlcv)]) -> Vec<(i64, &str, [f64; 5])> {
    let mut rows = Vec::new();
    for (name, bars) in symbols {
        for i in 0..bars.len() {
            let v = [bars.open()[i], bars.high()[i], bars.low()[i], bars.close()[i], bars.volume()[i]];
            rows.push((bars.timestamps()[i], name.as_str(), v));
        }
    }
    rows.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    rows
}

/// `batch` as a Parquet file at `path`.
fn write_parquet(path: &std::path::Path, batch: &RecordBatch) {
    let file = std::fs::File::create(path).expect("create");
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).expect("a writer");
    writer.write(batch).expect("write");
    writer.close().expect("close");
}

fn same_bars(a: &Ohlcv, b: &Ohlcv) {
    assert_eq!(a.timestamps(), b.timestamps());
    for (x, y) in [(a.open(), b.open()), (a.high(), b.high()), (a.low(), b.low()), (a.close(), b.close())] {
        assert_eq!(x, y);
    }
    assert_eq!(a.volume(), b.volume());
}

fn universe(source: &str) -> Universe {
    match MarketData::load(source).expect("loads") {
        MarketData::Universe(u) => u,
        MarketData::Bars(_) => panic!("{source}: one data set, not a universe"),
    }
}

/// The universe holds each symbol's own bars, sorted by name.
fn check(u: &Universe, symbols: &[(String, Ohlcv)]) {
    let mut sorted: Vec<&(String, Ohlcv)> = symbols.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(u.names().collect::<Vec<_>>(), sorted.iter().map(|s| s.0.as_str()).collect::<Vec<_>>());
    for (i, (_, bars)) in sorted.iter().enumerate() {
        same_bars(&u.load(i).expect("a symbol's bars"), bars);
    }
}

#[test]
fn a_long_csv_and_a_long_parquet_split_into_each_symbols_bars() {
    let symbols = symbols();
    let dir = tempfile::tempdir().expect("a temp dir");
    let rows = long_rows(&symbols);
    let mut csv = String::from("timestamp,symbol,open,high,low,close,volume\n");
    for (t, s, v) in &rows {
        csv += &format!("{t},{s},{},{},{},{},{}\n", v[0], v[1], v[2], v[3], v[4]);
    }
    let path = dir.path().join("long.csv");
    std::fs::write(&path, &csv).expect("write");
    check(&universe(path.to_str().expect("utf-8")), &symbols);
    // Rows in any order (here reversed and interleaved otherwise): the same symbols' bars.
    let mut shuffled: Vec<&str> = csv.lines().skip(1).collect();
    shuffled.reverse();
    let half = shuffled.len() / 2;
    shuffled.rotate_left(half);
    let shuffled_csv = format!("timestamp,symbol,open,high,low,close,volume\n{}\n", shuffled.join("\n"));
    let path = dir.path().join("shuffled.csv");
    std::fs::write(&path, shuffled_csv).expect("write");
    check(&universe(path.to_str().expect("utf-8")), &symbols);

    let column = |k: usize| Arc::new(Float64Array::from(rows.iter().map(|r| r.2[k]).collect::<Vec<_>>())) as ArrayRef;
    let times = TimestampMillisecondArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>()).with_timezone("UTC");
    let batch = RecordBatch::try_from_iter([
        ("symbol", Arc::new(StringArray::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())) as ArrayRef),
        ("timestamp", Arc::new(times) as ArrayRef),
        ("open", column(0)),
        ("high", column(1)),
        ("low", column(2)),
        ("close", column(3)),
        ("volume", column(4)),
    ])
    .expect("a batch");
    let path = dir.path().join("long.parquet");
    write_parquet(&path, &batch);
    // A NUL in a Parquet `symbol` column (a CSV refuses NUL bytes on its own) is refused.
    let renamed: Vec<&str> = rows.iter().map(|r| if r.1 == "BTC-USD" { "BTC\0USD" } else { r.1 }).collect();
    let mut columns = batch.columns().to_vec();
    columns[0] = Arc::new(StringArray::from(renamed)) as ArrayRef;
    let nul = RecordBatch::try_new(batch.schema(), columns).expect("a batch");
    let nul_path = dir.path().join("nul.parquet");
    write_parquet(&nul_path, &nul);
    let e = MarketData::load(nul_path.to_str().expect("utf-8")).expect_err("a NUL").to_string();
    assert!(e.contains(r#"the symbol name "BTC\0USD""#), "{e}");
    check(&universe(path.to_str().expect("utf-8")), &symbols);
    // Read as one data set, the file is refused with what it holds.
    let e = Ohlcv::load(path.to_str().expect("utf-8")).expect_err("three symbols");
    assert!(e.to_string().contains("holds 3 symbols (`BTC-USD`, `ETH-USD`, `SOL-USD`)"), "{e}");

    // A bad bar of one symbol is named by its line in the long file.
    let mut lines: Vec<String> = csv.lines().map(str::to_owned).collect();
    let bad_line = lines.iter().enumerate().filter(|(_, l)| l.contains(",SOL-USD,")).nth(5).expect("a SOL row").0 + 1;
    let row = lines[bad_line - 1].clone();
    let fields: Vec<&str> = row.split(',').collect();
    let broken = format!("{},{},{},1e-3,{},{},{}", fields[0], fields[1], fields[2], fields[4], fields[5], fields[6]);
    lines[bad_line - 1] = broken;
    std::fs::write(dir.path().join("bad.csv"), lines.join("\n")).expect("write");
    match MarketData::load(dir.path().join("bad.csv").to_str().expect("utf-8")) {
        Err(e @ DataError::Invalid { .. }) => {
            assert!(e.to_string().contains(&format!("[{}], line {bad_line}, column `high`", fields[1])), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_folder_and_a_pattern_give_a_symbol_per_file() {
    let symbols = symbols();
    let dir = tempfile::tempdir().expect("a temp dir");
    for (i, (name, bars)) in symbols.iter().enumerate() {
        let path = dir.path().join(format!("{name}.{}", ["csv", "parquet", "feather"][i]));
        match i {
            0 => std::fs::write(&path, bars.to_csv()),
            _ => std::fs::write(&path, bars.to_columnar(i == 1).expect("columnar")),
        }
        .expect("write");
    }
    std::fs::write(dir.path().join("README.md"), "not data").expect("write");
    std::fs::write(dir.path().join(".hidden.csv"), "not data").expect("write");
    check(&universe(dir.path().to_str().expect("utf-8")), &symbols);
    let pattern = dir.path().join("*-USD.*");
    check(&universe(pattern.to_str().expect("utf-8")), &symbols);
    let pattern = dir.path().join("[BE]*.*");
    assert_eq!(universe(pattern.to_str().expect("utf-8")).names().collect::<Vec<_>>(), ["BTC-USD", "ETH-USD"]);

    // The same name twice, a name the results cannot hold, nothing to read.
    std::fs::write(dir.path().join("BTC-USD.pq"), symbols[1].1.to_columnar(true).expect("parquet")).expect("write");
    let e = MarketData::load(dir.path().to_str().expect("utf-8")).expect_err("a repeated name");
    assert!(e.to_string().contains("two data sets are named `BTC-USD`"), "{e}");
    let odd = tempfile::tempdir().expect("a temp dir");
    std::fs::write(odd.path().join("a,b.csv"), symbols[0].1.to_csv()).expect("write");
    let e = MarketData::load(odd.path().to_str().expect("utf-8")).expect_err("a comma");
    assert!(e.to_string().contains("the symbol name \"a,b\""), "{e}");
    // Control characters in a name (a file's or a long file's `symbol` column) are refused,
    // and shown escaped in the message, never written to a terminal or a CSV as they are.
    for name in ["tab\there", "bell\u{7}", "esc\u{1b}]0;title"] {
        let odd = tempfile::tempdir().expect("a temp dir");
        std::fs::write(odd.path().join(format!("{name}.csv")), symbols[0].1.to_csv()).expect("write");
        let e = MarketData::load(odd.path().to_str().expect("utf-8")).expect_err("a control character").to_string();
        assert!(e.contains(&format!("the symbol name {name:?}")) && e.contains("control character"), "{e}");
        assert!(!e.contains(name), "shown escaped: {e}");
    }
    let empty = tempfile::tempdir().expect("a temp dir");
    let e = MarketData::load(empty.path().to_str().expect("utf-8")).expect_err("nothing");
    assert!(e.to_string().contains("a folder with no data files"), "{e}");
    let e = MarketData::load(empty.path().join("*.parquet").to_str().expect("utf-8")).expect_err("no match");
    assert!(e.to_string().contains("no file matches the pattern"), "{e}");
    // One file is one data set, as before.
    assert!(matches!(
        MarketData::load(dir.path().join("ETH-USD.csv").to_str().expect("utf-8")),
        Ok(MarketData::Bars(_))
    ));
}

/// A long file of several MiB, parsed in stretches on the pool: each symbol keeps its own
/// bars whichever stretch they fall in.
#[test]
fn a_long_csv_of_several_mib_splits_into_the_same_symbols() {
    let market = |seed: u64| SyntheticSpec::parse(&format!("bars=25000,seed={seed}")).expect("spec").generate();
    let symbols = vec![("B".to_owned(), market(1)), ("A".to_owned(), market(2)), ("C".to_owned(), market(3))];
    let mut csv = String::from("timestamp,symbol,open,high,low,close,volume\n");
    for (t, s, v) in long_rows(&symbols) {
        csv += &format!("{t},{s},{},{},{},{},{}\n", v[0], v[1], v[2], v[3], v[4]);
    }
    assert!(csv.len() > 3 << 20, "several stretches: {} bytes", csv.len());
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("long.csv");
    std::fs::write(&path, &csv).expect("write");
    check(&universe(path.to_str().expect("utf-8")), &symbols);
}
