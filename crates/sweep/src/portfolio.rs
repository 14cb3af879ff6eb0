//! A portfolio sweep: each combo one account over a universe's symbols
//! ([`PortfolioSim`]), every symbol's book laid out from one plan, prepared on its own bank.

use crate::error::SweepError;
use crate::plan::SweepPlan;
use crate::runner::{Simulation, Sweep};
use rayon::prelude::*;
use threadx_backtest::{Account, BatchTotals, ComboPlan, PortfolioBooks, SignalBook};
use threadx_indicators::{Calendar, IndicatorBank};

/// A universe traded as one account: every symbol's book on one clock, the account, and
/// what annualises the metrics.
#[derive(Debug)]
pub struct PortfolioSim {
    books: PortfolioBooks,
    account: Account,
    bars_per_year: f64,
}

impl PortfolioSim {
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
        let totals = plans.par_iter().map(|plan| self.books.simulate_plan(plan, &self.account, false).totals).collect();
        BatchTotals { totals, blocks: Vec::new() }
    }
}

impl SweepPlan {
    /// Prepares the plan as one account over symbols: `banks` holds each symbol's bank
    /// (its bars and timestamps within), in symbol order. Each symbol's book is laid out
    /// as the plan says; the bars per year come from the spec or the clock's calendar.
    pub fn prepare_portfolio(self, banks: &[IndicatorBank<'_>], account: Account) -> Result<Sweep, SweepError> {
        if let Some(refused) = portfolio_refusal(&self) {
            return Err(SweepError::Spec(refused));
        }
        let (spec, layout, combos) = self.into_parts();
        let books = banks
            .iter()
            .map(|bank| Ok((SignalBook::from_layout(bank, layout.clone())?, bank.data().timestamps())))
            .collect::<Result<Vec<_>, SweepError>>()?;
        let books = PortfolioBooks::new(books)?;
        let clock = books.times();
        let bars_per_year = spec.periods_per_year().unwrap_or_else(|| Calendar::of(clock).bars_per_year(clock));
        let simulation = Simulation::Portfolio(PortfolioSim { books, account, bars_per_year });
        Ok(Sweep::new(spec, simulation, combos))
    }
}

/// What a portfolio sweep does not run yet, in words (issue #52: searches, walk-forwards
/// and the overfitting statistics of a portfolio).
fn portfolio_refusal(plan: &SweepPlan) -> Option<String> {
    let spec = plan.spec();
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
