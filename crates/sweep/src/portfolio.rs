//! A portfolio sweep: each combo one account over a universe's symbols ([`PortfolioSim`],
//! prepared by `SweepPlan::prepare_portfolio`: every symbol's book laid out from one plan),
//! and what it does not run yet.

use crate::spec::SweepSpec;
use threadx_backtest::{Account, BatchTotals, ComboPlan, PortfolioBooks, SignalBook};

/// A universe traded as one account: every symbol's book on one clock, the account, and
/// what annualises the metrics.
#[derive(Debug)]
pub struct PortfolioSim {
    books: PortfolioBooks,
    account: Account,
    bars_per_year: f64,
}

impl PortfolioSim {
    pub(crate) fn new(books: PortfolioBooks, account: Account, bars_per_year: f64) -> Self {
        Self { books, account, bars_per_year }
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

    /// The clock's bars and the bars per year.
    pub(crate) fn bars(&self) -> (usize, f64) {
        (self.books.times().len(), self.bars_per_year)
    }

    /// The totals of `plans`, each one account, on the CPU's pool.
    pub(crate) fn totals(&self, plans: &[ComboPlan]) -> BatchTotals {
        BatchTotals { totals: self.books.totals(plans, &self.account), blocks: Vec::new() }
    }
}

/// What a portfolio sweep does not run yet, in words (issue #52: searches, walk-forwards
/// and the overfitting statistics of a portfolio).
pub(crate) fn portfolio_refusal(spec: &SweepSpec) -> Option<String> {
    let what = if spec.search().is_some() {
        "a search"
    } else if spec.walk_forward().is_some() {
        "a walk-forward"
    } else if spec.overfitting().is_some() {
        "the overfitting statistics"
    } else {
        return None;
    };
    Some(format!("{what} of a portfolio is not built yet: run the portfolio's grid, or leave --portfolio out"))
}
