//! Market data in Parquet and Arrow IPC files: the same bars as the CSV of the same
//! data, every time type, pandas' layout, and refusals that name the problem (a truncated
//! or corrupt file, a null, a column of the wrong type, several symbols).

use arrow::array::{
    ArrayRef, Date32Array, Float32Array, Float64Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
    TimestampNanosecondArray, TimestampSecondArray,
};
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use threadx_indicators::{DataError, Ohlcv, SyntheticSpec};

fn bars(n: usize) -> Ohlcv {
    SyntheticSpec::parse(&format!("bars={n},seed=7")).expect("a spec").generate()
}

/// A batch of `data`'s bars `range` with the time column `time` (named `time_name`).
fn batch(data: &Ohlcv, range: std::ops::Range<usize>, time_name: &str, time: ArrayRef) -> RecordBatch {
    let f = |s: &[f64]| Arc::new(Float64Array::from(s[range.clone()].to_vec())) as ArrayRef;
    let columns = vec![
        (time_name, time),
        ("open", f(data.open())),
        ("high", f(data.high())),
        ("low", f(data.low())),
        ("close", f(data.close())),
        ("volume", f(data.volume())),
    ];
    // Nullable, as pandas writes them.
    RecordBatch::try_from_iter_with_nullable(columns.into_iter().map(|(n, c)| (n, c, true))).expect("a batch")
}

fn millis(data: &Ohlcv, range: std::ops::Range<usize>) -> ArrayRef {
    Arc::new(TimestampMillisecondArray::from(data.timestamps()[range].to_vec()).with_timezone("UTC"))
}

/// Writes `batches` as Parquet (zstd, a row group per batch).
fn write_parquet(path: &Path, batches: &[RecordBatch]) {
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_row_count(Some(1000))
        .build();
    let file = std::fs::File::create(path).expect("create");
    let mut writer = ArrowWriter::try_new(file, batches[0].schema(), Some(props)).expect("a writer");
    for b in batches {
        writer.write(b).expect("write");
    }
    writer.close().expect("close");
}

fn write_ipc_file(path: &Path, batches: &[RecordBatch], lz4: bool) {
    let file = std::fs::File::create(path).expect("create");
    let options = arrow::ipc::writer::IpcWriteOptions::default()
        .try_with_compression(lz4.then_some(arrow::ipc::CompressionType::LZ4_FRAME))
        .expect("options");
    let mut writer =
        arrow::ipc::writer::FileWriter::try_new_with_options(file, &batches[0].schema(), options).expect("a writer");
    for b in batches {
        writer.write(b).expect("write");
    }
    writer.finish().expect("finish");
}

fn write_ipc_stream(path: &Path, batches: &[RecordBatch]) {
    let file = std::fs::File::create(path).expect("create");
    let mut writer = arrow::ipc::writer::StreamWriter::try_new(file, &batches[0].schema()).expect("a writer");
    for b in batches {
        writer.write(b).expect("write");
    }
    writer.finish().expect("finish");
}

/// `data` in batches of 1,000 bars with its times as milliseconds (UTC).
fn batches(data: &Ohlcv) -> Vec<RecordBatch> {
    (0..data.len())
        .step_by(1000)
        .map(|s| {
            let r = s..(s + 1000).min(data.len());
            batch(data, r.clone(), "timestamp", millis(data, r))
        })
        .collect()
}

fn temp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join(name);
    (dir, path)
}

/// The bars of `data`'s CSV, read back: what every columnar form must equal.
fn via_csv(data: &Ohlcv) -> Ohlcv {
    Ohlcv::parse_csv("x", &data.to_csv()).expect("its own CSV")
}

fn same_bars(a: &Ohlcv, b: &Ohlcv) {
    assert_eq!(a.timestamps(), b.timestamps());
    for (x, y) in [(a.open(), b.open()), (a.high(), b.high()), (a.low(), b.low()), (a.close(), b.close())] {
        assert!(x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits()));
    }
    assert_eq!(a.volume(), b.volume());
}

#[test]
fn parquet_and_arrow_files_give_the_csvs_bars() {
    let data = bars(4321);
    let expected = via_csv(&data);
    let (dir, parquet) = temp("bars.parquet");
    write_parquet(&parquet, &batches(&data));
    same_bars(&Ohlcv::load(parquet.to_str().unwrap()).expect("the Parquet file"), &expected);
    for (name, lz4) in [("bars.feather", true), ("bars.arrow", false)] {
        let path = dir.path().join(name);
        write_ipc_file(&path, &batches(&data), lz4);
        same_bars(&Ohlcv::load(path.to_str().unwrap()).expect("the IPC file"), &expected);
    }
    let stream = dir.path().join("bars.arrows");
    write_ipc_stream(&stream, &batches(&data));
    same_bars(&Ohlcv::load(stream.to_str().unwrap()).expect("the IPC stream"), &expected);
    // Known by its bytes, not its name.
    let renamed = dir.path().join("bars.csv");
    std::fs::copy(&parquet, &renamed).unwrap();
    same_bars(&Ohlcv::load(renamed.to_str().unwrap()).expect("Parquet named .csv"), &expected);
    assert_eq!(Ohlcv::load(parquet.to_str().unwrap()).unwrap().origin(), parquet.display().to_string());
}

#[test]
fn every_time_type_gives_the_same_milliseconds() {
    let data = bars(300);
    let expected = via_csv(&data);
    let ms: Vec<i64> = data.timestamps().to_vec();
    let n = ms.len();
    let days: Vec<i32> = (0..n as i32).map(|d| 19_723 + d).collect(); // 2024-01-01 onwards
    let text: Vec<String> = ms.iter().map(|&t| threadx_indicators::format_time(t)).collect();
    let cases: Vec<(&str, ArrayRef, Vec<i64>)> = vec![
        (
            "date",
            Arc::new(
                TimestampNanosecondArray::from(ms.iter().map(|t| t * 1_000_000).collect::<Vec<_>>())
                    .with_timezone("America/New_York"),
            ),
            ms.clone(),
        ),
        ("time", Arc::new(TimestampSecondArray::from(ms.iter().map(|t| t / 1000).collect::<Vec<_>>())), ms.clone()),
        ("timestamp", Arc::new(Int64Array::from(ms.iter().map(|t| t / 1000).collect::<Vec<_>>())), ms.clone()),
        ("open_time", Arc::new(Int64Array::from(ms.clone())), ms.clone()),
        ("datetime", Arc::new(StringArray::from(text)), ms.clone()),
        ("date", Arc::new(Date32Array::from(days.clone())), days.iter().map(|&d| i64::from(d) * 86_400_000).collect()),
    ];
    let (dir, _) = temp("x");
    for (k, (name, time, want)) in cases.into_iter().enumerate() {
        let path = dir.path().join(format!("t{k}.parquet"));
        write_parquet(&path, &[batch(&data, 0..n, name, time)]);
        let got = Ohlcv::load(path.to_str().unwrap()).unwrap_or_else(|e| panic!("case {k} ({name}): {e}"));
        assert_eq!(got.timestamps(), want.as_slice(), "case {k} ({name})");
        assert_eq!(got.close(), expected.close());
    }
}

#[test]
fn pandas_layout_reads_unnamed_index_float32_prices_and_no_volume() {
    let data = bars(50);
    let n = data.len();
    let f32s = |s: &[f64]| Arc::new(Float32Array::from(s.iter().map(|&v| v as f32).collect::<Vec<_>>())) as ArrayRef;
    let batch = RecordBatch::try_from_iter(vec![
        ("Open", f32s(data.open())),
        ("High", f32s(data.high())),
        ("Low", f32s(data.low())),
        ("Close", f32s(data.close())),
        ("__index_level_0__", millis(&data, 0..n)),
    ])
    .unwrap();
    let (_dir, path) = temp("pandas.parquet");
    write_parquet(&path, &[batch]);
    let got = Ohlcv::load(path.to_str().unwrap()).expect("pandas' layout");
    assert_eq!(got.timestamps(), data.timestamps());
    assert_eq!(got.close()[7], f64::from(data.close()[7] as f32));
    assert!(got.volume().iter().all(|&v| v == 0.0));
}

#[test]
fn a_named_pandas_index_is_the_time_and_a_price_named_twice_is_refused() {
    let data = bars(50);
    let n = data.len();
    let f64s = |s: &[f64]| Arc::new(Float64Array::from(s.to_vec())) as ArrayRef;
    let columns = vec![
        ("open", f64s(data.open())),
        ("high", f64s(data.high())),
        ("low", f64s(data.low())),
        ("close", f64s(data.close())),
        ("ts_x", millis(&data, 0..n)),
    ];
    // pandas names its index in the `pandas` metadata (`df.index.name = "ts_x"`).
    let batch = RecordBatch::try_from_iter(columns.clone()).unwrap();
    let meta = r#"{"index_columns": ["ts_x"], "columns": []}"#;
    let metadata = std::collections::HashMap::from([("pandas".to_owned(), meta.to_owned())]);
    let schema = Arc::new(batch.schema().as_ref().clone().with_metadata(metadata));
    let (_dir, path) = temp("named.parquet");
    write_parquet(&path, &[batch.with_schema(schema).unwrap()]);
    let got = Ohlcv::load(path.to_str().unwrap()).expect("the named index is the time");
    assert_eq!(got.timestamps(), data.timestamps());
    // Without that metadata the column is no time column of ours.
    let (_dir, bare) = temp("bare.parquet");
    write_parquet(&bare, &[RecordBatch::try_from_iter(columns.clone()).unwrap()]);
    assert!(Ohlcv::load(bare.to_str().unwrap()).is_err());
    // `close` and `Close`, or `close` twice: which one is meant is refused, both named.
    for second in ["Close", "close"] {
        let mut twice = columns.clone();
        twice[4].0 = "timestamp";
        twice.push((second, f64s(data.open())));
        let schema =
            Schema::new(twice.iter().map(|(n, a)| Field::new(*n, a.data_type().clone(), false)).collect::<Vec<_>>());
        let batch = RecordBatch::try_new(Arc::new(schema), twice.into_iter().map(|(_, a)| a).collect()).unwrap();
        let (_dir, path) = temp("twice.parquet");
        write_parquet(&path, &[batch]);
        let problem = format_error(&path);
        assert!(problem.contains(&format!("the columns `close` and `{second}` all name the close")), "{problem}");
    }
}

fn format_error(path: &Path) -> String {
    match Ohlcv::load(path.to_str().unwrap()) {
        Err(DataError::Format { origin, problem }) => {
            assert_eq!(origin, path.display().to_string());
            problem
        }
        other => panic!("expected a format error for {}, got {other:?}", path.display()),
    }
}

#[test]
fn truncated_or_corrupt_files_are_refused_by_name_never_a_panic() {
    let data = bars(3000);
    let (dir, path) = temp("bars.parquet");
    write_parquet(&path, &batches(&data));
    let bytes = std::fs::read(&path).unwrap();
    let cut = dir.path().join("cut.parquet");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    assert!(format_error(&cut).contains("not a readable Parquet file"), "{}", format_error(&cut));
    // Every length and a flipped byte at many places: an error or the same bars, never a
    // panic or other bars with no complaint about their values.
    let expected = via_csv(&data);
    for len in (0..bytes.len()).step_by(bytes.len() / 97) {
        std::fs::write(&cut, &bytes[..len]).unwrap();
        assert!(Ohlcv::load(cut.to_str().unwrap()).is_err(), "a file cut at {len} bytes was read");
    }
    for at in (4..bytes.len() - 4).step_by(bytes.len() / 211) {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x5a;
        std::fs::write(&cut, &damaged).unwrap();
        if let Ok(got) = Ohlcv::load(cut.to_str().unwrap()) {
            // A flip in a value page can leave a valid file; zstd's checksum-free frames
            // decode to other numbers only where validation still accepts them.
            assert_eq!(got.len(), expected.len(), "a flip at {at} changed the bar count");
        }
    }
    let (_d2, feather) = temp("bars.feather");
    write_ipc_file(&feather, &batches(&data), true);
    let bytes = std::fs::read(&feather).unwrap();
    std::fs::write(&feather, &bytes[..bytes.len() - 100]).unwrap();
    assert!(format_error(&feather).contains("not a readable Arrow IPC (Feather) file"));
}

#[test]
fn nulls_types_and_symbols_are_named() {
    let data = bars(2500);
    let (dir, _) = temp("x");
    // A null close in the third batch: its row in the file, not in the batch.
    let mut all = batches(&data);
    let mut close: Vec<Option<f64>> = data.close()[2000..2500].iter().map(|&v| Some(v)).collect();
    close[123] = None;
    let third = &all[2];
    let mut columns: Vec<ArrayRef> = third.columns().to_vec();
    columns[4] = Arc::new(Float64Array::from(close));
    all[2] = RecordBatch::try_new(third.schema(), columns).unwrap();
    let path = dir.path().join("null.parquet");
    write_parquet(&path, &all);
    match Ohlcv::load(path.to_str().unwrap()) {
        Err(DataError::InvalidRow { row, column, problem, .. }) => {
            assert_eq!((row, column.as_str(), problem.as_str()), (2123, "close", "no value (null)"));
        }
        other => panic!("{other:?}"),
    }
    // Prices as text.
    let n = data.len();
    let text = Arc::new(StringArray::from(data.close().iter().map(|v| v.to_string()).collect::<Vec<_>>()));
    let mut columns: Vec<ArrayRef> = batch(&data, 0..n, "timestamp", millis(&data, 0..n)).columns().to_vec();
    columns[4] = text;
    let schema = Schema::new(vec![
        Field::new("timestamp", columns[0].data_type().clone(), false),
        Field::new("open", DataType::Float64, false),
        Field::new("high", DataType::Float64, false),
        Field::new("low", DataType::Float64, false),
        Field::new("close", DataType::Utf8, false),
        Field::new("volume", DataType::Float64, false),
    ]);
    let path = dir.path().join("text.parquet");
    write_parquet(&path, &[RecordBatch::try_new(Arc::new(schema), columns).unwrap()]);
    assert_eq!(format_error(&path), "column `close` holds Utf8: expected numbers");
    // A value the validation refuses, at its row.
    let mut high = data.high().to_vec();
    high[1777] = data.low()[1777] - 1.0;
    let mut columns: Vec<ArrayRef> = batch(&data, 0..n, "timestamp", millis(&data, 0..n)).columns().to_vec();
    columns[2] = Arc::new(Float64Array::from(high));
    let path = dir.path().join("bad.feather");
    write_ipc_file(
        &path,
        &[RecordBatch::try_new(batch(&data, 0..1, "timestamp", millis(&data, 0..1)).schema(), columns).unwrap()],
        false,
    );
    match Ohlcv::load(path.to_str().unwrap()) {
        Err(e @ DataError::InvalidRow { row: 1777, .. }) => assert!(e.to_string().contains("row 1777"), "{e}"),
        other => panic!("{other:?}"),
    }
    // Two symbols in one file.
    let symbols: Vec<&str> = (0..n).map(|i| if i < 2000 { "BTCUSDT" } else { "ETHUSDT" }).collect();
    let mut base: Vec<(&str, ArrayRef)> = vec![("symbol", Arc::new(StringArray::from(symbols)) as ArrayRef)];
    let one = batch(&data, 0..n, "timestamp", millis(&data, 0..n));
    let schema = one.schema();
    for (f, c) in schema.fields().iter().zip(one.columns()) {
        base.push((f.name().as_str(), c.clone()));
    }
    let path = dir.path().join("two.parquet");
    write_parquet(&path, &[RecordBatch::try_from_iter(base).unwrap()]);
    let problem = format_error(&path);
    assert!(problem.contains("holds 2 symbols (`BTCUSDT`, `ETHUSDT`)"), "{problem}");
    // No close column.
    let path = dir.path().join("noclose.parquet");
    let one = batch(&data, 0..n, "timestamp", millis(&data, 0..n));
    write_parquet(&path, &[one.project(&[0, 1, 2, 3, 5]).unwrap()]);
    match Ohlcv::load(path.to_str().unwrap()) {
        Err(DataError::MissingColumn { column: "close", .. }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn unusual_files_and_values_are_named_as_what_they_are() {
    let data = bars(40);
    let n = data.len();
    // Feather version 1 is not called a CSV with a NUL byte.
    let (_dir, v1) = temp("old.feather");
    std::fs::write(&v1, b"FEA1\0\0\0\0whatever follows").unwrap();
    assert!(format_error(&v1).contains("a Feather version 1 file: ThreadX reads Feather version 2"));
    let row_error = |path: &Path| match Ohlcv::load(path.to_str().unwrap()) {
        Err(e @ DataError::InvalidRow { .. }) => e.to_string(),
        other => panic!("expected a row's error, got {other:?}"),
    };
    // An integer time is shown as the integer it is, not rounded through f64.
    let mut ints: Vec<i64> = data.timestamps().to_vec();
    ints[3] = i64::MIN;
    let (_dir, path) = temp("ints.parquet");
    write_parquet(&path, &[batch(&data, 0..n, "timestamp", Arc::new(Int64Array::from(ints)))]);
    let e = row_error(&path);
    assert!(e.contains("row 3") && e.contains("`-9223372036854775808` is not a time"), "{e}");
    // Times far past any market's are out of range, not duplicates of one another.
    let mut far: Vec<f64> = data.timestamps().iter().map(|&t| t as f64).collect();
    far[5] = 1e300;
    far[6] = 2e300;
    let (_dir, path) = temp("far.parquet");
    write_parquet(&path, &[batch(&data, 0..n, "timestamp", Arc::new(Float64Array::from(far)))]);
    let e = row_error(&path);
    assert!(e.contains("row 5") && e.contains("out of range for a time (after the year 9999)"), "{e}");
    // A dictionary-encoded close (pandas' categorical) reads as its numbers.
    let keys = arrow::array::Int32Array::from((0..n as i32).collect::<Vec<_>>());
    let dict =
        arrow::array::DictionaryArray::try_new(keys, Arc::new(Float64Array::from(data.close().to_vec()))).unwrap();
    let mut plain = batch(&data, 0..n, "timestamp", millis(&data, 0..n));
    let close = plain.schema().index_of("close").unwrap();
    let mut columns = plain.columns().to_vec();
    columns[close] = Arc::new(dict);
    let fields: Vec<Field> = plain
        .schema()
        .fields()
        .iter()
        .zip(&columns)
        .map(|(f, c)| Field::new(f.name(), c.data_type().clone(), true))
        .collect();
    plain = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
    let (_dir, path) = temp("dict.parquet");
    write_parquet(&path, &[plain]);
    let got = Ohlcv::load(path.to_str().unwrap()).expect("a dictionary of numbers");
    assert_eq!(got.close(), data.close());
}
