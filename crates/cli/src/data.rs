//! `threadx data synth`: the built-in synthetic market as a CSV, Parquet or Arrow file.

use crate::outputs::check_writable;
use anyhow::{Context, Result};
use clap::Subcommand;
use std::path::PathBuf;
use threadx_indicators::{Market, SyntheticSpec};
use threadx_profile_store::write_file_atomic;
use threadx_sweep::TableFormat;

#[derive(Debug, Subcommand)]
pub enum Action {
    /// Write deterministic synthetic bars: BTC-like 15-minute bars (log-normal returns,
    /// volatility regimes), or with `--market fx` EURUSD-like hourly bars on a 1e-5 tick
    /// grid with weekend gaps and quiet stretches.
    Synth {
        /// Number of bars (35,040 is one year).
        #[arg(long, default_value_t = SyntheticSpec::default().bars)]
        bars: usize,
        /// Seed: the same seed gives the same bars on every machine.
        #[arg(long, default_value_t = SyntheticSpec::default().seed)]
        seed: u64,
        /// Which market: btc or fx.
        #[arg(long, default_value = "btc")]
        market: Market,
        /// Output file (timestamp, open, high, low, close, volume): CSV, or Parquet
        /// (.parquet) or Arrow IPC (.arrow, .feather) by its extension.
        #[arg(long)]
        out: PathBuf,
    },
}

pub fn run(action: Action) -> Result<()> {
    match action {
        Action::Synth { bars, seed, market, out } => {
            let spec = SyntheticSpec { bars, seed, market };
            spec.check().map_err(|e| anyhow::anyhow!("--bars {bars}: {e}"))?;
            crate::outputs::check_names(&[("--out", Some(&out), crate::outputs::Written::Table)])?;
            check_writable(&out)?;
            let data = spec.generate();
            let bytes = match TableFormat::of(&out) {
                TableFormat::Csv => data.to_csv().into_bytes(),
                TableFormat::Parquet => data.to_columnar(true)?,
                TableFormat::Arrow => data.to_columnar(false)?,
            };
            write_file_atomic(&out, &bytes).with_context(|| format!("writing {}", out.display()))?;
            outln!("wrote {} bars ({}) to {}", data.len(), data.origin(), out.display());
            Ok(())
        }
    }
}
