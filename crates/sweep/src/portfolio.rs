//! A portfolio sweep: each combo one account over a universe's symbols ([`PortfolioSim`],
//! prepared by `SweepPlan::prepare_portfolio`: every symbol's book laid out from one plan).

use threadx_backtest::{Account, BacktestError, BatchTotals, BlockCuts, PortfolioBooks, SignalBook};

/// A universe traded as one account: every symbol's book on one clock, the account, what
/// annualises the metrics, and the blocks of the clock each combo's returns are kept in
/// (for the overfitting statistics).
#[derive(Debug)]
pub struct PortfolioSim {
    books: PortfolioBooks,
    account: Account,
    bars_per_year: f64,
    blocks: Option<BlockCuts>,
    sizes: Option<SizeAxis>,
}

/// A swept size: the values of the account's size parameter, and how many combos each
/// of its values spans (the axes after it vary faster).
#[derive(Debug)]
struct SizeAxis {
    values: Vec<f64>,
    stride: u64,
}

impl PortfolioSim {
    /// The simulation of `books` as `account` on the grid `axes`: its size parameter's
    /// every value checked as a size, before any work.
    pub(crate) fn new(
        books: PortfolioBooks,
        (account, axes, names): (Account, &[Vec<f64>], &[&str]),
        bars_per_year: f64,
        blocks: Option<BlockCuts>,
    ) -> Result<Self, BacktestError> {
        let sizes = match account.size_param {
            Some(p) => {
                for &v in &axes[p] {
                    account.with_size(v, names[p])?;
                }
                let stride = axes[p + 1..].iter().map(|a| a.len() as u64).product();
                Some(SizeAxis { values: axes[p].clone(), stride })
            }
            None => None,
        };
        Ok(Self { books, account, bars_per_year, blocks, sizes })
    }

    /// Each combo's size, where the grid sweeps it.
    fn sizes_of(&self, combos: &[u64]) -> Option<Vec<f64>> {
        let axis = self.sizes.as_ref()?;
        let len = axis.values.len() as u64;
        Some(combos.iter().map(|&c| axis.values[(c / axis.stride % len) as usize]).collect())
    }

    /// Combo `combo`'s account.
    fn account_of(&self, combo: u64) -> Account {
        match self.sizes_of(&[combo]) {
            Some(size) => self.account.sized(size[0]),
            None => self.account,
        }
    }

    pub(crate) fn blocks(&self) -> Option<&BlockCuts> {
        self.blocks.as_ref()
    }

    /// Combo `combo`'s account, in detail: the return of each bar of the clock (its
    /// equity over the bar before's, the first over the starting cash), those its Sharpe
    /// ratio and blocks are made of.
    pub(crate) fn returns(&self, combo: u64) -> Vec<f64> {
        let account = self.account_of(combo);
        let run = self.books.simulate(combo, &account, (true, None));
        let mut before = self.account.init_cash;
        let equity = run.record.map(|r| r.equity).unwrap_or_default();
        equity
            .into_iter()
            .map(|e| {
                let r = e / before - 1.0;
                before = e;
                r
            })
            .collect()
    }

    /// Whether combo `combo` cannot trade on any symbol (every symbol too short for it).
    pub(crate) fn cannot_trade(&self, combo: u64) -> bool {
        self.books.books().iter().all(|b| b.cannot_trade(&b.combo_plan(combo)))
    }

    pub fn books(&self) -> &PortfolioBooks {
        &self.books
    }

    pub fn account(&self) -> &Account {
        &self.account
    }

    pub(crate) fn first_book(&self) -> &SignalBook {
        &self.books.books()[0]
    }

    /// The book of the symbol with the most bars (the first of them).
    pub(crate) fn longest_book(&self) -> &SignalBook {
        let books = self.books.books();
        books.iter().rev().max_by_key(|b| b.bars()).unwrap_or(&books[0])
    }

    /// The clock's bars and the bars per year.
    pub(crate) fn bars(&self) -> (usize, f64) {
        (self.books.times().len(), self.bars_per_year)
    }

    /// The totals of `combos`, each one account, on the CPU's pool.
    pub(crate) fn totals(&self, combos: &[u64]) -> BatchTotals {
        let sizes = self.sizes_of(combos);
        self.books.totals(combos, (&self.account, sizes.as_deref()), self.blocks.as_ref())
    }
}
