//! A portfolio of a user's own signals (`threadx.simulate(..., cash_sharing=True)`):
//! [`PortfolioSignals`], arrays of bars × symbols, read as a single run reads a column
//! (docs/strategies.md): a flat symbol enters on its entry, a held one exits on its exit,
//! so an entry and an exit on one bar enter when flat and exit when held (vectorbt
//! ignores both; the comparison with it uses signals without such bars).

use crate::error::BacktestError;
use crate::metrics::ExitReason;
use crate::portfolio::{Account, PortfolioRun, Source, run};
use ndarray::ArrayView2;

/// A portfolio's bars and signals, each bars × symbols: closes (NaN where a symbol has no
/// bar), long entries and exits.
#[derive(Debug, Clone, Copy)]
pub struct PortfolioSignals<'a> {
    pub close: ArrayView2<'a, f64>,
    pub entries: ArrayView2<'a, bool>,
    pub exits: ArrayView2<'a, bool>,
}

impl Source for PortfolioSignals<'_> {
    type Held = ();

    fn bars(&self) -> usize {
        self.close.nrows()
    }

    fn symbols(&self) -> usize {
        self.close.ncols()
    }

    fn close(&self, t: usize, s: usize) -> f64 {
        self.close[(t, s)]
    }

    fn entry(&self, t: usize, s: usize) -> Option<()> {
        self.entries[(t, s)].then_some(())
    }

    fn exit(&self, t: usize, s: usize, (): &()) -> Option<ExitReason> {
        self.exits[(t, s)].then_some(ExitReason::Signal)
    }
}

impl PortfolioSignals<'_> {
    /// Checks the shapes and prices: the same bars × symbols each, at least one symbol,
    /// every close positive and finite or NaN (no bar).
    fn check(&self) -> Result<(), BacktestError> {
        let shape = self.close.dim();
        for (name, dim) in [("entries", self.entries.dim()), ("exits", self.exits.dim())] {
            if dim != shape {
                return Err(BacktestError::Signals(format!(
                    "{name} has shape {dim:?}; the closes have {shape:?} (bars × symbols)"
                )));
            }
        }
        if shape.1 == 0 {
            return Err(BacktestError::Signals("a portfolio needs at least one symbol".into()));
        }
        let bad = self.close.indexed_iter().find(|(_, p)| !(p.is_nan() || (p.is_finite() && **p > 0.0)));
        if let Some(((t, s), p)) = bad {
            return Err(BacktestError::Signals(format!(
                "close at bar {t}, symbol {s} is {p}: a price is positive and finite (NaN: no bar)"
            )));
        }
        Ok(())
    }
}

/// Runs the account over the signals ([`crate::portfolio`]'s rules): its totals, and its
/// record when `detailed`.
pub fn simulate_portfolio(
    signals: &PortfolioSignals<'_>,
    account: &Account,
    detailed: bool,
) -> Result<PortfolioRun, BacktestError> {
    signals.check()?;
    Ok(run(signals, account, detailed))
}
