//! A sweep's plan: what preparing a spec on data of a given length computes and holds,
//! laid out and sized before any work ([`SweepPlan`]), then prepared into a [`Sweep`].

use crate::combos::ComboSet;
use crate::error::SweepError;
use crate::portfolio::PortfolioSim;
use crate::runner::{Simulation, Sweep};
use crate::search::SearchMethod;
use crate::spec::SweepSpec;
use std::sync::Mutex;
use threadx_backtest::{Account, BarTables, BlockCuts, BookLayout, PortfolioBooks, SignalBook, rank_params};
use threadx_dispatch::{DeviceMode, DevicePolicy, format_bytes, thousands};
use threadx_indicators::{Calendar, IndicatorBank};

impl Sweep {
    /// Checks the spec, computes the indicators and decision rows its combos need
    /// (through `bank`, each once; a sample's only) and lays out the combos, refusing
    /// before any work what would not fit in the memory available ([`SweepPlan`]).
    pub fn prepare(bank: &IndicatorBank<'_>, spec: &SweepSpec) -> Result<Self, SweepError> {
        SweepPlan::new(spec, bank.data().len(), bank.dispatcher().policy())?.prepare(bank)
    }
}

/// Bytes a sample takes per drawn combo while it is drawn (the list, the set that keeps
/// it distinct) and held.
const BYTES_PER_SAMPLED_COMBO: u64 = 48;

/// What preparing a spec on data of a given length computes and holds, laid out before
/// any work: the combos (a sample drawn), the signal book's rows, stops and indicator
/// series, and about how much memory they take. A plan that cannot fit is refused here,
/// with the estimate and what would help.
#[derive(Debug, Clone)]
pub struct SweepPlan {
    spec: SweepSpec,
    layout: BookLayout,
    combos: ComboSet,
    /// The longest symbol's bars (the only symbol's, but in a portfolio).
    bars: usize,
    /// A portfolio's bars of each symbol (each gets a book) and of their joint clock;
    /// empty and 0 for one data set.
    symbol_bars: Vec<usize>,
    clock_bars: usize,
    /// Whether a GPU may run it (its upload copies count).
    gpu: bool,
    /// What the process held when the plan was made (the data read included).
    process: u64,
}

/// What the process holds besides the plan's own data where the system does not say (the
/// binary, the allocator, the data read: 12 MiB in a release build, 33 MiB in a debug one,
/// measured), and the transient part of preparing as a share of that data (bb_atr,
/// rule-file grids, TPE and Sobol searches of 10–184 MiB peaked up to 7.5 % above it).
const PROCESS_BYTES: u64 = 16 << 20;
const TRANSIENT_SHARE: u64 = 8;

/// What starting a GPU costs the host before any upload: the driver, wgpu and the
/// compiled kernels (measured with lavapipe: a 10,000-combo sweep peaks about 100 MB
/// higher on it than on the CPU).
const GPU_STACK_BYTES: u64 = 96 << 20;

impl SweepPlan {
    /// Draws the sample of `spec` and lays out its book for `bars` bars, refusing when
    /// that needs more than the spec's memory limit (else the memory available now). In
    /// the spec's device mode a GPU may take part (every mode but `cpu`; `auto` only for
    /// sweeps `policy` finds large enough to balance): then the copies made to upload the
    /// book count too.
    pub fn new(spec: &SweepSpec, bars: usize, policy: &DevicePolicy) -> Result<Self, SweepError> {
        Self::laid_out(spec, bars, (Vec::new(), 0), policy)
    }

    /// The plan of `symbols` (name and bars) as one account on their joint clock.
    pub fn for_symbols(
        spec: &SweepSpec,
        symbols: &[(String, std::sync::Arc<threadx_indicators::Ohlcv>)],
        policy: &DevicePolicy,
    ) -> Result<Self, SweepError> {
        let lengths: Vec<usize> = symbols.iter().map(|(_, d)| d.len()).collect();
        let clock = PortfolioBooks::joint_clock(symbols.iter().map(|(_, d)| d.timestamps()));
        Self::portfolio(spec, &lengths, clock.len(), policy)
    }

    /// The plan of one account over symbols of `symbol_bars` bars each: a book each, laid
    /// out alike, and every symbol's price on their joint clock of `clock_bars` bars; on
    /// the CPU. Refused as [`SweepPlan::new`] is, for all of it together.
    pub fn portfolio(
        spec: &SweepSpec,
        symbol_bars: &[usize],
        clock_bars: usize,
        policy: &DevicePolicy,
    ) -> Result<Self, SweepError> {
        let longest = symbol_bars.iter().copied().max().unwrap_or(0);
        Self::laid_out(spec, longest, (symbol_bars.to_vec(), clock_bars), policy)
    }

    fn laid_out(
        spec: &SweepSpec,
        bars: usize,
        (symbol_bars, clock_bars): (Vec<usize>, usize),
        policy: &DevicePolicy,
    ) -> Result<Self, SweepError> {
        if symbol_bars.is_empty() {
            spec.strategy().require_all_in()?;
        }
        let memory_limit = spec.max_memory().or_else(threadx_telemetry::available_memory);
        let mode = spec.device();
        let grid = spec.grid().clone();
        let limit = memory_limit.unwrap_or(u64::MAX);
        let help = if symbol_bars.is_empty() {
            "sweep a sample of the grid with --random N or --search sobol|lhs|random (only the drawn combos' \
             series and rows are prepared), or use fewer values or fewer bars"
        } else {
            "use fewer values, fewer bars or fewer symbols"
        };
        let refuse = |needs: u64, what: String| {
            SweepError::Spec(format!(
                "this sweep needs about {} to prepare ({what}), more than the {} of memory available; {help}{}",
                format_bytes(needs),
                format_bytes(limit),
                if memory_limit.is_some() { "; --max-memory sets the limit" } else { "" }
            ))
        };
        // A --random sample or a design's trials: drawn first, and only their series and
        // rows prepared. An adaptive search may go anywhere: it prepares the whole grid.
        let drawn = match (spec.sample(), spec.search()) {
            (Some(sample), _) => Some((SearchMethod::Random, sample.seed, sample.n)),
            (None, Some(search)) if !search.method.is_adaptive() => Some((search.method, search.seed, search.trials)),
            _ => None,
        };
        let sample_bytes = drawn.map_or(0, |(_, _, n)| n.saturating_mul(BYTES_PER_SAMPLED_COMBO));
        if sample_bytes > limit {
            let n = drawn.map_or(0, |(_, _, n)| n);
            return Err(refuse(sample_bytes, format!("{n} sampled combos")));
        }
        let sample = match drawn {
            Some((method, seed, n)) => {
                let combos = method.design_combos(&grid, seed, n).unwrap_or_default();
                if spec.sample().is_some() && (combos.len() as u64) < n {
                    return Err(SweepError::Spec(format!(
                        "--random {n}: only {} distinct combos of the grid pass the strategy's rules; ask for \
                         fewer or widen the grid",
                        combos.len()
                    )));
                }
                Some(combos)
            }
            None => None,
        };
        let combos = ComboSet::new(grid.len(), sample, spec.chunk_size(), bars);
        let layout = BookLayout::new(grid, combos.sample())?;
        let gpu = match mode {
            _ if !symbol_bars.is_empty() => false,
            DeviceMode::Cpu => false,
            DeviceMode::Auto => !policy.is_small_sweep(combos.len(), bars as u64),
            DeviceMode::Gpu | DeviceMode::All => true,
        };
        let process = threadx_telemetry::resident_bytes().unwrap_or(PROCESS_BYTES);
        let plan = Self { spec: spec.clone(), layout, combos, bars, symbol_bars, clock_bars, gpu, process };
        if plan.bytes() > limit {
            return Err(refuse(plan.bytes(), plan.describe()));
        }
        Ok(plan)
    }

    /// About how many bytes the process holds at its peak: what it held when the plan was
    /// made, and [`SweepPlan::data_bytes`].
    pub fn bytes(&self) -> u64 {
        self.data_bytes().saturating_add(self.process)
    }

    /// About how many bytes preparing adds at its peak: the book, the sample, the GPU's
    /// upload copies and what the overfitting statistics keep.
    pub fn data_bytes(&self) -> u64 {
        let sample = self.combos.sample().map_or(0, |s| s.len() as u64 * BYTES_PER_SAMPLED_COMBO);
        // Where a stop's exit pays no slippage and the exit rule's does, the kernel takes
        // that exit's per-bar terms too (32 bytes a bar, made on the host and uploaded).
        let stop_terms =
            if self.spec.costs().slippage > 0.0 && self.layout.stops() > 0 { 2 * 32 * self.bars as u64 } else { 0 };
        let upload = if self.gpu { GPU_STACK_BYTES + self.layout.gpu_upload_bytes(self.bars) + stop_terms } else { 0 };
        // The overfitting statistics keep each combo's blocks and Sharpe ratio.
        let kept = self.spec.overfitting().map_or(0, |o| self.combos.len() * (2 * u64::from(o.blocks) + 1) * 8);
        let book = if self.symbol_bars.is_empty() {
            self.layout.bytes(self.bars)
        } else {
            // Every symbol's book; on the clock, its time and each symbol's last close; per
            // symbol bar, its time merged into the clock and its bar there.
            // The `rank` rule's series: each of its variants', 8 bytes a symbol bar.
            let per_bar = 12 + 8 * self.rank_series();
            let own: u64 = self.symbol_bars.iter().map(|&b| (b as u64).saturating_mul(per_bar)).sum();
            let clock = (self.clock_bars as u64).saturating_mul(self.symbol_bars.len() as u64 * 8 + 8);
            self.symbol_bars.iter().map(|&b| self.layout.bytes(b)).fold(own.saturating_add(clock), u64::saturating_add)
        }
        .saturating_add(sample);
        book.saturating_add(book / TRANSIENT_SHARE).saturating_add(upload).saturating_add(kept)
    }

    /// A portfolio's `rank` series per symbol: one per set of values the grid gives the
    /// parameters the rule reads (0 without the rule, or for one data set).
    fn rank_series(&self) -> u64 {
        let reads = rank_params(self.spec.strategy()).filter(|_| !self.symbol_bars.is_empty());
        let axes = self.spec.axes();
        reads.map_or(0, |reads| reads.iter().map(|&p| axes[p].len() as u64).product())
    }

    /// Indicator series to compute.
    pub fn series(&self) -> usize {
        self.layout.indicators().len()
    }

    /// `N indicator series of B bars, R decision rows, S stops`, and `for each of K symbols`
    /// in a portfolio.
    pub fn describe(&self) -> String {
        let each = match (self.symbol_bars.len(), self.rank_series()) {
            (0, _) => String::new(),
            (n, 0) => format!(" for each of {} symbols", thousands(n as u64)),
            (n, r) => format!(", {} rank series for each of {} symbols", thousands(r), thousands(n as u64)),
        };
        format!(
            "{} indicator series of {} bars, {} decision rows, {} stops{each}",
            thousands(self.series() as u64),
            thousands(self.bars as u64),
            thousands(self.layout.decision_rows()),
            thousands(self.layout.stops())
        )
    }

    pub fn combos(&self) -> &ComboSet {
        &self.combos
    }

    pub fn spec(&self) -> &SweepSpec {
        &self.spec
    }

    /// Computes the indicators (through `bank`, each once) and the book the plan laid out.
    pub fn prepare(self, bank: &IndicatorBank<'_>) -> Result<Sweep, SweepError> {
        if bank.data().len() != self.bars {
            return Err(SweepError::Spec(format!(
                "the sweep was planned for {} bars but the data has {}",
                self.bars,
                bank.data().len()
            )));
        }
        let mut book = SignalBook::from_layout(bank, self.layout)?;
        if let Some(per_year) = self.spec.periods_per_year() {
            book = book.with_bars_per_year(per_year);
        }
        let blocks = match self.spec.overfitting() {
            Some(o) => Some(BlockCuts::new(self.bars, o.blocks).map_err(|e| SweepError::Spec(format!("--{e}")))?),
            None => None,
        };
        let tables = BarTables::new(&book, self.spec.costs()).with_blocks(blocks);
        Ok(Sweep::new(self.spec, Simulation::Book { book, tables, resident: Mutex::new(Vec::new()) }, self.combos))
    }
}

impl SweepPlan {
    /// Prepares the plan as one account over symbols: `banks` holds each symbol's bank
    /// (its bars and timestamps within), in symbol order. Each symbol's book is laid out
    /// as the plan says; the bars per year come from the spec or the clock's calendar.
    pub fn prepare_portfolio(self, banks: &[IndicatorBank<'_>], account: Account) -> Result<Sweep, SweepError> {
        let (spec, layout, combos) = (self.spec, self.layout, self.combos);
        let books =
            PortfolioBooks::new(SignalBook::for_each_symbol(banks, &layout)?)?.ranked_by(spec.strategy(), banks)?;
        let clock = books.times();
        let bars_per_year = spec.periods_per_year().unwrap_or_else(|| Calendar::of(clock).bars_per_year(clock));
        let blocks = match spec.overfitting() {
            Some(o) => Some(BlockCuts::new(clock.len(), o.blocks).map_err(|e| SweepError::Spec(format!("--{e}")))?),
            None => None,
        };
        spec.strategy().check_sizing(&account.sizing)?;
        let names: Vec<&str> = spec.strategy().schema().iter().map(|p| p.name.as_str()).collect();
        let sim = PortfolioSim::new(books, (account, spec.grid().axes(), &names), bars_per_year, blocks)?;
        let simulation = Simulation::Portfolio(sim);
        Ok(Sweep::new(spec, simulation, combos))
    }
}
