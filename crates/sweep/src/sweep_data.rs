//! The bars a sweep reads beyond its session ([`SweepData`]): one data set, or a
//! universe's symbols traded as one account on the union of their bar times. Either gives
//! a walk-forward the clock its windows are cut from, each train window's sweep and each
//! test window's run, and a sweep's page its best combo's backtest.

use crate::error::SweepError;
use crate::plan::SweepPlan;
use crate::run_data::RunData;
use crate::runner::Sweep;
use crate::spec::SweepSpec;
use crate::summary::{DataSummary, Identity};
use std::ops::Range;
use std::sync::Arc;
use threadx_backtest::{Account, BacktestReport, PortfolioBooks, SignalBook, simulate_detailed};
use threadx_dispatch::Dispatcher;
use threadx_indicators::{Calendar, IndicatorBank, Ohlcv};

/// One data set, or symbols traded as one account.
#[derive(Debug, Clone, Copy)]
pub enum SweepData<'a> {
    One(&'a Ohlcv),
    /// Symbols (name and bars, in symbol order) read from `origin`, traded as `account`
    /// on `clock` (their joint clock, [`SweepData::portfolio`]).
    Portfolio {
        origin: &'a str,
        symbols: &'a [(String, Arc<Ohlcv>)],
        account: &'a Account,
        clock: &'a [i64],
    },
}

impl<'a> SweepData<'a> {
    /// The joint clock of `symbols`, for [`SweepData::Portfolio`].
    pub fn portfolio_clock(symbols: &[(String, Arc<Ohlcv>)]) -> Vec<i64> {
        PortfolioBooks::joint_clock(symbols.iter().map(|(_, d)| d.timestamps()))
    }

    /// The clock: the bar times the windows are cut from.
    pub fn times(&self) -> &'a [i64] {
        match *self {
            Self::One(data) => data.timestamps(),
            Self::Portfolio { clock, .. } => clock,
        }
    }

    /// The bars per year of the whole clock's calendar, which annualise every window and
    /// a page's best combo where the spec gives none.
    pub fn bars_per_year(&self) -> f64 {
        match *self {
            Self::One(data) => data.bars_per_year(),
            Self::Portfolio { clock, .. } => Calendar::of(clock).bars_per_year(clock),
        }
    }

    /// What the summary says of the data.
    pub(crate) fn summary(&self) -> DataSummary {
        match *self {
            Self::One(data) => DataSummary::of(data),
            Self::Portfolio { origin, clock, .. } => DataSummary::of_times(origin, clock),
        }
    }

    /// A portfolio's symbols and account, as its summary names them; None for one data set.
    pub(crate) fn identity(&self, spec: &SweepSpec) -> Option<Identity> {
        let Self::Portfolio { origin, symbols, account, clock } = *self else { return None };
        let named: Vec<(&str, &Ohlcv)> = symbols.iter().map(|(n, d)| (n.as_str(), d.as_ref())).collect();
        let size_param = account.size_param.map(|p| spec.strategy().schema()[p].name.as_str());
        let data = RunData::portfolio(origin, &named, clock, (account, size_param));
        Some(Identity {
            spec: spec.to_json(),
            data: Some(data.identity),
            universe: None,
            portfolio: data.portfolio,
            chunk_size: None,
            shards: 1,
        })
    }

    /// The sweep of `train_spec` over bars `bars` of the clock: a portfolio's symbols cut
    /// to the times of those bars (a symbol without a bar there is left out).
    pub(crate) fn train(
        &self,
        bars: Range<usize>,
        dispatcher: &Dispatcher,
        train_spec: &SweepSpec,
    ) -> Result<Sweep, SweepError> {
        match *self {
            Self::One(data) => {
                let train = data.slice(bars);
                Sweep::prepare(&IndicatorBank::new(&train, dispatcher), train_spec)
            }
            Self::Portfolio { symbols, account, clock, .. } => {
                let cut = cut(symbols, clock, bars);
                let plan = SweepPlan::for_symbols(train_spec, &cut, dispatcher.policy())?;
                let banks: Vec<IndicatorBank<'_>> =
                    cut.iter().map(|(_, d)| IndicatorBank::new(d, dispatcher)).collect();
                plan.prepare_portfolio(&banks, *account)
            }
        }
    }

    /// The run of parameter set `values` of `spec` on every bar up to `test.end` with no
    /// entry before `test.start` (the earlier bars its indicators' history), as the report
    /// of bars `test` alone.
    pub(crate) fn test(
        &self,
        values: &[f64],
        test: Range<usize>,
        dispatcher: &Dispatcher,
        (spec, per_year): (&SweepSpec, f64),
    ) -> Result<BacktestReport, SweepError> {
        let axes: Vec<Vec<f64>> = values.iter().map(|&v| vec![v]).collect();
        match *self {
            Self::One(data) => {
                let history = data.slice(0..test.end);
                let bank = IndicatorBank::new(&history, dispatcher);
                let book = SignalBook::build(&bank, spec.strategy(), &axes)?.with_bars_per_year(per_year);
                let mut plan = book.plan(&vec![0; axes.len()]);
                plan.warmup = plan.warmup.max(test.start as u32);
                Ok(simulate_detailed(&book, &plan, spec.costs()).since(test.start))
            }
            Self::Portfolio { symbols, account, clock, .. } => {
                let history = cut(symbols, clock, 0..test.end);
                let named: Vec<(&str, &Ohlcv)> = history.iter().map(|(n, d)| (n.as_str(), d.as_ref())).collect();
                let first_entry = Some(clock[test.start]);
                let (books, account, run) =
                    PortfolioBooks::run_params(spec.strategy(), values, &named, (account, first_entry), dispatcher)?;
                let record = run.record.unwrap_or_default();
                Ok(books.report(&record, account.init_cash, per_year).since(test.start))
            }
        }
    }
}

/// Each symbol's bars at the times of bars `bars` of `clock`, those with any.
fn cut(symbols: &[(String, Arc<Ohlcv>)], clock: &[i64], bars: Range<usize>) -> Vec<(String, Arc<Ohlcv>)> {
    let (from, to) = (clock[bars.start], clock.get(bars.end).copied().unwrap_or(i64::MAX));
    symbols
        .iter()
        .filter_map(|(name, data)| {
            let times = data.timestamps();
            let own = times.partition_point(|&t| t < from)..times.partition_point(|&t| t < to);
            (!own.is_empty()).then(|| (name.clone(), Arc::new(data.slice(own))))
        })
        .collect()
}
