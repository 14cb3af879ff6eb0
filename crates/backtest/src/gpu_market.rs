//! The market kernel's host side (market.wgsl): a combo's run as the kernel leaves it,
//! its [`Totals`] (the final equity and drawdown ratio turned into log units here, by the
//! CPU's own function), and the combos whose f64 arithmetic left the range the kernel
//! computes exactly (subnormal or infinite values, a division by zero), which the CPU runs.

use crate::bar_tables::BarTables;
use crate::book::{ComboPlan, SignalBook};
use crate::costs::{Fill, Fills};
use crate::fixed::Totals;
use crate::gpu_sums::RunSums;
use crate::simulate::{BatchTotals, simulate_cpu};
use crate::trade_parts::log_of;
use threadx_dispatch::Kernel;

/// The market kernel: market.wgsl after the integer and f64 arithmetic it stands on.
pub(crate) const MARKET: Kernel = Kernel {
    name: "market",
    source: concat!(
        include_str!("../../../kernels-wgsl/exact.wgsl"),
        include_str!("../../../kernels-wgsl/float64.wgsl"),
        include_str!("../../../kernels-wgsl/backtest_common.wgsl"),
        include_str!("../../../kernels-wgsl/market.wgsl")
    ),
    entry: "market",
};

/// A combo's run on the device (market.wgsl's `MarketRun`).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct MarketRun {
    sums: RunSums,
    equity: [u32; 2],
    peak: [u32; 2],
    trough: [u32; 2],
    worst: [u32; 2],
    /// Cash, the position, where the run stands: the kernel's alone.
    position: [u32; 22],
    state: u32,
    pad: u32,
}

/// market.wgsl's STATE_OUT_OF_RANGE.
const STATE_OUT_OF_RANGE: u32 = 256;
/// market.wgsl's FILL_* bits.
const FILL_NEXT_OPEN: u32 = 1;
const FILL_INTRABAR: u32 = 2;

impl MarketRun {
    pub(crate) const WORDS: usize = std::mem::size_of::<MarketRun>() / 4;

    /// The run's totals, as market.rs forms them from its equity marks.
    pub(crate) fn totals(&self) -> Totals {
        let f64_of = |w: [u32; 2]| f64::from_bits(u64::from(w[0]) | u64::from(w[1]) << 32);
        let (peak, trough, worst) = (f64_of(self.peak), f64_of(self.trough), f64_of(self.worst));
        self.sums.totals(log_of(f64_of(self.equity)), log_of(worst.min(trough / peak)))
    }

    pub(crate) fn out_of_range(&self) -> bool {
        self.state & STATE_OUT_OF_RANGE != 0
    }
}

/// The kernel's Params.fills for a book's fills.
pub(crate) fn fill_bits(fills: Fills) -> u32 {
    u32::from(fills.fill == Fill::NextOpen) * FILL_NEXT_OPEN + u32::from(fills.intrabar) * FILL_INTRABAR
}

/// Replaces the totals (and blocks) of the combos at `indices` of `batch`, of `plans`,
/// by the CPU's: those the kernel flagged out of its range.
pub(crate) fn redo_on_cpu(
    batch: &mut BatchTotals,
    indices: &[usize],
    plans: &[ComboPlan],
    (book, tables): (&SignalBook, &BarTables),
) {
    if indices.is_empty() {
        return;
    }
    let redo: Vec<ComboPlan> = indices.iter().map(|&i| plans[i]).collect();
    let cpu = simulate_cpu(book, tables, &redo);
    let len = tables.blocks().map_or(0, crate::blocks::BlockCuts::stats_len);
    for (k, &i) in indices.iter().enumerate() {
        batch.totals[i] = cpu.totals[k];
        batch.blocks[i * len..][..len].copy_from_slice(&cpu.blocks[k * len..][..len]);
    }
}

#[cfg(test)]
mod layout {
    //! The host's run and constants are the kernel's, byte for byte.
    use super::*;
    use std::mem::{offset_of, size_of};
    use threadx_dispatch::ShaderInfo;

    #[test]
    fn market_run_and_constants_match_market_wgsl() {
        let shader = ShaderInfo::parse(MARKET.source).expect("market.wgsl parses");
        let (size, members) = shader.struct_layout("MarketRun").expect("a MarketRun struct");
        assert_eq!(size as usize, size_of::<MarketRun>());
        let at = |name: &str| members.iter().find(|(n, _)| n == name).map(|&(_, o)| o as usize);
        for (name, offset) in [
            ("sums", offset_of!(MarketRun, sums)),
            ("equity", offset_of!(MarketRun, equity)),
            ("peak", offset_of!(MarketRun, peak)),
            ("trough", offset_of!(MarketRun, trough)),
            ("worst", offset_of!(MarketRun, worst)),
            ("cash", offset_of!(MarketRun, position)),
            ("state", offset_of!(MarketRun, state)),
        ] {
            assert_eq!(at(name), Some(offset), "{name}");
        }
        assert_eq!(shader.constant_u32("STATE_OUT_OF_RANGE"), Some(STATE_OUT_OF_RANGE));
        assert_eq!(shader.constant_u32("FILL_NEXT_OPEN"), Some(FILL_NEXT_OPEN));
        assert_eq!(shader.constant_u32("FILL_INTRABAR"), Some(FILL_INTRABAR));
        assert_eq!(shader.constant_u32("WORKGROUP"), Some(threadx_dispatch::workgroup_size(&MARKET).unwrap()));
    }
}
