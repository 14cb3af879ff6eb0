//! A portfolio of a user's own signals (`threadx.simulate(..., cash_sharing=True)`):
//! [`PortfolioSignals`], arrays of bars × symbols, read as a single run reads a column
//! (docs/strategies.md): a flat symbol enters on its entry, a held one exits on its exit,
//! so an entry and an exit on one bar enter when flat and exit when held (vectorbt
//! ignores both; the comparison with it uses signals without such bars).

use crate::error::BacktestError;
use crate::metrics::ExitReason;
use crate::portfolio::schedule::{Exit, Schedule};
use crate::portfolio::{Account, Mark, PortfolioRun, SizeType, Source, run};
use crate::trade_parts::next_bit;
use ndarray::ArrayView2;

/// A portfolio's bars and signals, each bars × symbols: closes (NaN where a symbol has no
/// bar), long entries and exits.
#[derive(Debug, Clone, Copy)]
pub struct PortfolioSignals<'a> {
    pub close: ArrayView2<'a, f64>,
    pub entries: ArrayView2<'a, bool>,
    pub exits: ArrayView2<'a, bool>,
}

/// The signals as the account reads them: each symbol's entries and exits on the bars it
/// has, as bit rows, and the prices filled forward.
struct ArraySource {
    bars: usize,
    symbols: usize,
    prices: Vec<f64>,
    /// Per symbol: bits of the bars with an entry (an exit) and a price.
    entries: Vec<Vec<u64>>,
    exits: Vec<Vec<u64>>,
}

impl ArraySource {
    fn new(signals: &PortfolioSignals<'_>) -> Self {
        let (bars, symbols) = signals.close.dim();
        let words = bars.div_ceil(64);
        let (mut entries, mut exits) = (vec![vec![0u64; words]; symbols], vec![vec![0u64; words]; symbols]);
        let mut prices = vec![0.0; bars * symbols];
        let mut last = vec![0.0; symbols];
        for t in 0..bars {
            for s in 0..symbols {
                let close = signals.close[(t, s)];
                if close.is_nan() {
                    prices[t * symbols + s] = last[s];
                    continue;
                }
                (prices[t * symbols + s], last[s]) = (close, close);
                entries[s][t / 64] |= u64::from(signals.entries[(t, s)]) << (t % 64);
                exits[s][t / 64] |= u64::from(signals.exits[(t, s)]) << (t % 64);
            }
        }
        Self { bars, symbols, prices, entries, exits }
    }
}

impl Source for ArraySource {
    fn bars(&self) -> usize {
        self.bars
    }

    fn symbols(&self) -> usize {
        self.symbols
    }

    fn prices(&self) -> &[f64] {
        &self.prices
    }

    // A symbol's own bars are the rows: those without a price hold no bit.
    fn next_entry(&self, s: usize, own: usize) -> Option<Mark> {
        next_bit(&self.entries[s], own).map(|bar| Mark { bar, own: bar })
    }

    fn exit_after(&self, s: usize, own: usize, _close: f64) -> Option<(Mark, Exit)> {
        next_bit(&self.exits[s], own + 1).map(|bar| (Mark { bar, own: bar }, Exit::at_close(ExitReason::Signal)))
    }

    // A user's signals carry no stop, and their entries go in column order.
    fn stop_level(&self, _s: usize, _own: usize, _close: f64) -> Option<f64> {
        None
    }

    fn ranked(&self) -> bool {
        false
    }

    fn rank(&self, _s: usize, _own: usize) -> f64 {
        f64::NAN
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
    if account.sizing.kind == SizeType::Risk {
        return Err(BacktestError::Portfolio(
            "risk sizing sizes each entry from its distance to its stop, and signals carry no stop: run a \
             strategy with a `stop` rule"
                .into(),
        ));
    }
    let source = ArraySource::new(signals);
    let mut schedule = Schedule::new(source.bars, source.symbols);
    Ok(run(&source, account, (detailed, None), &mut schedule))
}
