//! What trading costs and how orders fill: [`Costs`] (the fee and the slippage, both
//! fractions against the trader on every fill) and [`Fills`] (at the close or the next
//! open; stops against closes or inside the bar). docs/strategies.md defines them.

use crate::error::BacktestError;

/// A fee and a slippage, each a fraction of the traded value (the slippage moves the fill
/// price against the trader: up when buying, down when selling; the fee is then paid on
/// the value at that price).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Costs {
    pub fee: f64,
    pub slippage: f64,
}

impl Default for Costs {
    /// The CLI's and the configuration's defaults: a 0.1 % fee, no slippage.
    fn default() -> Self {
        Self { fee: 0.001, slippage: 0.0 }
    }
}

impl Costs {
    /// Checked costs: each in [0, 1).
    pub fn new(fee: f64, slippage: f64) -> Result<Self, BacktestError> {
        if !(0.0..1.0).contains(&fee) {
            return Err(BacktestError::Fee(fee));
        }
        if !(0.0..1.0).contains(&slippage) {
            return Err(BacktestError::Slippage(slippage));
        }
        Ok(Self { fee, slippage })
    }

    /// What buying costs beyond the price, as one fraction h: paying p·(1 + slippage) and
    /// the fee on that is p·(1 + h) with h = fee + slippage + fee·slippage. Without
    /// slippage h is the fee's own bits, so fee-only results never change.
    pub fn buy(&self) -> f64 {
        self.fee + self.slippage + self.fee * self.slippage
    }

    /// What selling loses below the price, as one fraction g: receiving p·(1 − slippage)
    /// less the fee on that is p·(1 − g) with g = fee + slippage − fee·slippage.
    pub fn sell(&self) -> f64 {
        self.fee + self.slippage - self.fee * self.slippage
    }
}

/// When a decision fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fill {
    /// At the close of the bar it is decided on.
    #[default]
    Close,
    /// At the open of the next bar (a decision on the last bar never fills).
    NextOpen,
}

impl Fill {
    pub fn name(self) -> &'static str {
        match self {
            Fill::Close => "close",
            Fill::NextOpen => "next_open",
        }
    }
}

/// How a strategy's orders fill: a rule file's `fill` and `intrabar`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fills {
    pub fill: Fill,
    /// Stops and take-profits checked against each bar's low and high (filled at the
    /// level, or at the open when the bar opens beyond it) rather than against closes.
    pub intrabar: bool,
}
