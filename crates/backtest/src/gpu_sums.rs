//! A combo's sums and counts as both backtest kernels keep and return them
//! (backtest_common.wgsl's `RunSums`, one definition for backtest.wgsl's `Run` and
//! market.wgsl's `MarketRun`): the [`Totals`] but for the log equity and drawdown, which
//! each kernel keeps its own way.

use crate::fixed::Totals;
use crate::gpu_tables::u128_of;

/// backtest_common.wgsl's `RunSums`, laid out alike (its tests hold the two together).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct RunSums {
    sum: [u32; 4],
    sum_sq: [u32; 4],
    down_sq: [u32; 4],
    trade_sum: [u32; 4],
    trade_sq: [u32; 4],
    trade_gain: [u32; 4],
    trades: u32,
    closed: u32,
    wins: u32,
    held: u32,
}

impl RunSums {
    /// The run's totals, with its log equity and drawdown (2^-52 units).
    pub(crate) fn totals(&self, log_equity: i64, drawdown: i64) -> Totals {
        Totals {
            log_equity,
            drawdown,
            sum: u128_of(&self.sum),
            sum_sq: u128_of(&self.sum_sq),
            down_sq: u128_of(&self.down_sq),
            trade_sum: u128_of(&self.trade_sum),
            trade_sq: u128_of(&self.trade_sq),
            trade_gain: u128_of(&self.trade_gain),
            trades: self.trades,
            closed: self.closed,
            wins: self.wins,
            held: self.held,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::BACKTEST;
    use crate::gpu_market::MARKET;
    use std::mem::{offset_of, size_of};
    use threadx_dispatch::ShaderInfo;

    #[test]
    fn run_sums_match_both_kernels() {
        let host: Vec<(String, u32)> = [
            ("sum", offset_of!(RunSums, sum)),
            ("sum_sq", offset_of!(RunSums, sum_sq)),
            ("down_sq", offset_of!(RunSums, down_sq)),
            ("trade_sum", offset_of!(RunSums, trade_sum)),
            ("trade_sq", offset_of!(RunSums, trade_sq)),
            ("trade_gain", offset_of!(RunSums, trade_gain)),
            ("trades", offset_of!(RunSums, trades)),
            ("closed", offset_of!(RunSums, closed)),
            ("wins", offset_of!(RunSums, wins)),
            ("held", offset_of!(RunSums, held)),
        ]
        .into_iter()
        .map(|(name, offset)| (name.to_owned(), offset as u32))
        .collect();
        for kernel in [BACKTEST, MARKET] {
            let shader = ShaderInfo::parse(kernel.source).expect("the kernel parses");
            let layout = shader.struct_layout("RunSums").expect("a RunSums struct");
            assert_eq!(layout, (size_of::<RunSums>() as u32, host.clone()), "{}", kernel.name);
        }
    }
}
