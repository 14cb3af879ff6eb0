//! The sizing flags of `backtest --portfolio` and `sweep --portfolio` ([`SizingFlags`]),
//! resolved over a rule file's `[sizing]` into the account.

use anyhow::{Context, Result};
use threadx_backtest::{Account, Costs, SizeType, SizingRequest, Strategy};

/// How `--portfolio` sizes its entries (each flag needs `--portfolio`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SizingFlags {
    /// What each entry buys: a fraction of the cash left (the default, 1.0: all of it), a
    /// cash amount (--size-type value) or a fraction of the account's value (targetpercent).
    #[arg(long, allow_negative_numbers = true)]
    pub size: Option<f64>,
    /// How --size reads: percent (of the cash left), value (cash), targetpercent (of the
    /// account's value), vectorbt's names; or risk (of the account's value lost at the stop).
    #[arg(long, value_name = "percent|value|targetpercent|risk")]
    pub size_type: Option<String>,
    /// Buy in whole lots of this many units (e.g. 1 for whole shares, 0.01).
    #[arg(long, value_name = "UNITS", allow_negative_numbers = true)]
    pub lot: Option<f64>,
    /// Skip an entry that would buy fewer units than this.
    #[arg(long, value_name = "UNITS", allow_negative_numbers = true)]
    pub min_size: Option<f64>,
    /// The account's starting cash (default 1; equity and trades are in its currency).
    #[arg(long, value_name = "CASH", allow_negative_numbers = true)]
    pub init_cash: Option<f64>,
    /// Hold at most N positions at once: an entry while N are held is skipped.
    #[arg(long, value_name = "N")]
    pub max_positions: Option<usize>,
    /// Hold at most X times the account's value in positions (below 1: part of it; above
    /// 1: cash borrowed at no interest). Default 1: the cash alone pays.
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub leverage: Option<f64>,
}

impl SizingFlags {
    /// The flags given, by name (each needs `--portfolio`).
    pub fn given(&self) -> Vec<&'static str> {
        self.given_values().into_iter().map(|(flag, _)| flag).collect()
    }

    /// The flags given, with their values as given.
    fn given_values(&self) -> Vec<(&'static str, String)> {
        let text = |v: Option<f64>| v.map(|v| v.to_string());
        let flags = [
            ("--size", text(self.size)),
            ("--size-type", self.size_type.clone()),
            ("--lot", text(self.lot)),
            ("--min-size", text(self.min_size)),
            ("--init-cash", text(self.init_cash)),
            ("--max-positions", self.max_positions.map(|n| n.to_string())),
            ("--leverage", text(self.leverage)),
        ];
        flags.into_iter().filter_map(|(flag, value)| Some((flag, value?))).collect()
    }

    /// Where an account's sizing came from, for its errors: the flags given, over the
    /// rule file's `[sizing]`.
    fn source(&self, strategy: &Strategy) -> String {
        let file = format!("the [sizing] of {}", strategy.origin());
        let flags: Vec<String> =
            self.given_values().into_iter().map(|(flag, value)| format!("{flag} {value}")).collect();
        if flags.is_empty() { file } else { format!("{} (over {file})", flags.join(" ")) }
    }

    /// The account `strategy`'s `[sizing]` asks for, each flag given taking the place of
    /// its field, with these costs (checked before any data is read).
    pub fn account(&self, strategy: &Strategy, costs: Costs) -> Result<Account> {
        let size_type = self.size_type.as_deref().map(SizeType::parse).transpose().context("--size-type")?;
        let flags = SizingRequest {
            size: self.size,
            size_type,
            lot: self.lot,
            min_size: self.min_size,
            init_cash: self.init_cash,
            max_positions: self.max_positions,
            leverage: self.leverage,
            size_param: None,
        };
        let request = strategy.sizing().overridden_by(&flags);
        Account::requested(&request, costs).with_context(|| self.source(strategy))
    }
}
