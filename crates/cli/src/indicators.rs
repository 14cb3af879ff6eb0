//! `threadx indicators`: indicator values of a data set as a table (CSV, Parquet or Arrow).

use crate::outputs::check_writable;
use anyhow::{Context, Result};
use std::fmt::Write;
use std::path::Path;
use threadx_dispatch::{DeviceMode, Dispatcher};
use threadx_indicators::{Indicator, IndicatorBank, Ohlcv, format_time};
use threadx_profile_store::refuse_output_over_input;
use threadx_sweep::{ColumnType, write_table};

pub fn run(data: &str, indicators: &[Indicator], out: &Path, mode: DeviceMode) -> Result<()> {
    if indicators.is_empty() {
        anyhow::bail!("no indicator asked for: add --ind, e.g. --ind bbands:period=20,std=2");
    }
    crate::outputs::check_names(&[("--out", Some(out), crate::outputs::Written::Table)])?;
    check_writable(out)?;
    refuse_output_over_input(&[out], &[Path::new(data)]).map_err(anyhow::Error::msg)?;
    let data = Ohlcv::load(data).with_context(|| format!("loading --data {data}"))?;
    let dispatcher = Dispatcher::from_env(Some(mode)).map_err(anyhow::Error::msg)?;
    let bank = IndicatorBank::new(&data, &dispatcher);
    let table = bank.table(indicators)?;
    let columns: Vec<(&str, &[f64])> = table.iter().map(|(name, v, i)| (name.as_str(), v.output(*i))).collect();
    let mut csv = String::with_capacity(data.len() * (24 + 20 * columns.len()));
    csv.push_str("timestamp");
    for (name, _) in &columns {
        csv.push(',');
        csv.push_str(name);
    }
    csv.push('\n');
    for (t, &ms) in data.timestamps().iter().enumerate() {
        csv.push_str(&format_time(ms));
        for (_, series) in &columns {
            csv.push(',');
            if !series[t].is_nan() {
                let _ = write!(csv, "{}", series[t]);
            }
        }
        csv.push('\n');
    }
    let types: Vec<ColumnType> =
        std::iter::once(ColumnType::Time).chain(columns.iter().map(|_| ColumnType::Float)).collect();
    write_table(out, &csv, &types).with_context(|| format!("writing {}", out.display()))?;
    if let Err(e) = dispatcher.flush() {
        tracing::warn!("could not save the timing profile: {e}");
    }
    // Each family batch as "sma on cpu" (its profile key minus the parameters).
    let devices: Vec<String> = bank
        .runs()
        .iter()
        .map(|r| {
            let family = r.key.split(':').next().unwrap_or(&r.key);
            let sets = if r.sets > 1 { format!(" ×{}", r.sets) } else { String::new() };
            format!("{family}{sets} on {}", r.device)
        })
        .collect();
    outln!("wrote {} bars × {} columns to {} ({})", data.len(), columns.len(), out.display(), devices.join("; "));
    Ok(())
}
