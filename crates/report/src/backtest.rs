//! A backtest's sections: what ran, the key metrics with the annualised figures and the
//! buy-and-hold benchmark, the equity curve (with buy and hold) over its drawdown, the
//! worst drawdowns, a rolling Sharpe ratio, the trades, the monthly returns and the
//! distribution of trade returns.

use crate::charts::{Axis, Unit, bars, bins_for, equity_and_drawdown, histogram, line_with_markers, lines, thin};
use crate::page::{Cell, Report, cards, facts, heat_style, note, num, pct, table};
use crate::risk::{buy_and_hold, rolling_sharpe, rolling_window, worst_drawdowns};
use chrono::{DateTime, Datelike};
use std::time::Instant;
use threadx_backtest::{BacktestError, BacktestReport, Costs, ExitReason, Strategy, backtest, price_series};
use threadx_dispatch::{DeviceMode, Dispatcher};

/// The overlaid levels' colours, in turn (the closes are grey, entries blue, exits red).
const OVERLAY_COLOURS: [&str; 4] = ["#E08214", "#1B7837", "#8073AC", "#D6604D"];
use threadx_indicators::{IndicatorBank, Ohlcv, format_time};

/// Trades the table lists at most (all of them are in `--trades`).
const MAX_TRADES_SHOWN: usize = 2000;

/// Drawdown periods the worst-drawdowns table lists.
const WORST_DRAWDOWNS: usize = 5;

/// One backtest as the report shows it.
#[derive(Debug, Clone, Copy)]
pub struct BacktestRun<'a> {
    pub data: &'a Ohlcv,
    pub strategy: &'a Strategy,
    /// The parameters, schema order.
    pub values: &'a [f64],
    pub costs: Costs,
    pub report: &'a BacktestReport,
    /// Where it ran (`cpu`, an adapter's name).
    pub device: &'a str,
    /// Wall time of the backtest, when it was timed.
    pub seconds: Option<f64>,
}

impl<'a> BacktestRun<'a> {
    /// The backtest of `values` on `data` at `costs` that gave `report`.
    pub fn new(
        data: &'a Ohlcv,
        strategy: &'a Strategy,
        values: &'a [f64],
        costs: Costs,
        report: &'a BacktestReport,
    ) -> Self {
        Self { data, strategy, values, costs, report, device: "", seconds: None }
    }

    /// Where it ran, and how long it took.
    pub fn ran_on(self, device: &'a str, seconds: f64) -> Self {
        Self { device, seconds: Some(seconds), ..self }
    }
}

/// The backtest of `values` on `data`, its indicators through a bank on `dispatcher`, and
/// the seconds it took: what a page shows as the run and its time.
pub fn timed_backtest(
    data: &Ohlcv,
    dispatcher: &Dispatcher,
    strategy: &Strategy,
    values: &[f64],
    costs: Costs,
    bars_per_year: Option<f64>,
) -> Result<(BacktestReport, f64), BacktestError> {
    let started = Instant::now();
    let bank = IndicatorBank::new(data, dispatcher);
    let report = backtest(&bank, strategy, values, costs, bars_per_year)?;
    Ok((report, started.elapsed().as_secs_f64()))
}

/// Figures derived from the trades and the data, beside the engine's metrics (which hold
/// every ratio a sweep can rank by: one definition, the engine's).
#[derive(Debug, Clone, Copy)]
struct Derived {
    mean_trade: f64,
    best_trade: f64,
    worst_trade: f64,
    mean_bars_held: f64,
    /// Holding the asset over the same bars, without fees.
    hold_return: f64,
    hold_drawdown: f64,
}

impl BacktestRun<'_> {
    /// A page of this backtest alone.
    pub fn report(&self) -> Report {
        let title = format!("{} backtest", self.strategy);
        let mut report = Report::new(&title, &format!("{} on {}", self.parameters(), self.data.origin()));
        self.add_header(&mut report);
        self.add_sections(&mut report, "");
        report
    }

    /// `name=value` of each parameter.
    pub(crate) fn parameters(&self) -> String {
        self.strategy.describe(self.values)
    }

    fn add_header(&self, report: &mut Report) {
        let mut lines = vec![
            ("Data", data_line(self.data)),
            ("Strategy", self.strategy.to_string()),
            ("Parameters", self.parameters()),
            ("Costs", format!("fee {} per side, slippage {}", self.costs.fee, self.costs.slippage)),
            ("Device", self.device.to_owned()),
        ];
        if let Some(s) = self.seconds {
            lines.push(("Time", format!("{s:.3} s")));
        }
        report.section("run", "What ran", &facts(&lines));
    }

    /// The backtest's sections; `prefix` starts their headings (a sweep's best combo).
    pub(crate) fn add_sections(&self, report: &mut Report, prefix: &str) {
        let r = self.report;
        let m = &r.metrics;
        // Holding the asset: the cards' benchmark and the equity chart's second line.
        let hold = buy_and_hold(self.data.close());
        let d = self.derived(&hold);
        let per_year = r.bars_per_year;
        let annual = |what: &str| {
            if per_year.is_finite() {
                format!("{what}, over {per_year:.0} bars a year")
            } else {
                format!("{what}: the data has no time")
            }
        };
        let figures = [
            ("Total return", pct(m.total_return), "equity at the end over the start, minus 1"),
            ("Annual return", pct(m.cagr), &*annual("compounded (CAGR)")),
            ("Annual volatility", pct(m.volatility), &*annual("standard deviation of bar returns")),
            ("Sharpe (annual)", num(m.sharpe_annual, 2), &*annual("mean over deviation of bar returns")),
            ("Sortino (annual)", num(m.sortino, 2), "mean over downside deviation of bar returns"),
            ("Max drawdown", pct(m.max_drawdown), "deepest fall from a running peak"),
            ("Buy and hold", pct(d.hold_return), "the last close over the first, minus 1 (no fees)"),
            ("Buy and hold max drawdown", pct(d.hold_drawdown), "its deepest fall from a running peak"),
            ("Calmar", num(m.calmar, 2), "annual return over the max drawdown"),
            ("Win rate", pct(m.win_rate), "closed trades that gained"),
            ("Trades", format!("{} ({} closed)", m.trades, m.closed_trades), "entries, an open one included"),
            ("Exposure", pct(m.exposure), "bars that end in a position"),
            ("Mean trade", pct(d.mean_trade), "return per trade, fees included"),
            ("Best / worst trade", format!("{} / {}", pct(d.best_trade), pct(d.worst_trade)), "one trade's return"),
            ("Profit factor", num(m.profit_factor, 2), "gains over losses, summed over closed trades"),
            ("Expectancy", pct(m.expectancy), "mean return of a closed trade"),
            ("SQN", num(m.sqn, 2), "√(closed trades) × mean over std of their returns"),
            ("Mean bars held", num(d.mean_bars_held, 1), "bars from entry to exit"),
        ];
        let figures: Vec<(&str, String, &str)> = figures.into_iter().collect();
        let mut html = String::new();
        if !prefix.is_empty() {
            // A sweep's page: which combo this is, and that it was run again in full.
            html.push_str(&note(&format!(
                "{} {}: the sweep's best combo, backtested again trade by trade ({}).",
                self.strategy,
                self.parameters(),
                self.device
            )));
        }
        html.push_str(&cards(&figures));
        report.section("metrics", &format!("{prefix}Key metrics"), &html);
        self.add_price(report, prefix);
        self.add_equity(report, prefix, &hold);
        self.add_drawdowns(report, prefix);
        self.add_rolling(report, prefix);
        self.add_trades(report, prefix);
        self.add_monthly(report, prefix);
        let returns = r.trades.iter().map(|t| t.return_ * 100.0);
        let (centres, counts) = histogram(returns, bins_for(r.trades.len()));
        let html = if counts.is_empty() {
            note("No trades.")
        } else {
            report.chart(&bars(
                "Trade returns",
                &Axis::new("trade return (%)", Unit::Number),
                &Axis::new("trades", Unit::Count),
                &centres,
                &counts,
                "#31549B",
            ))
        };
        report.section("trade-returns", &format!("{prefix}Distribution of trade returns"), &html);
    }

    fn derived(&self, hold: &[f64]) -> Derived {
        let r = self.report;
        let trade_returns = r.trades.iter().map(|t| t.return_);
        let count = r.trades.len() as f64;
        Derived {
            hold_return: hold.last().map_or(f64::NAN, |h| h - 1.0),
            hold_drawdown: worst_drawdowns(hold, 1).first().map_or(0.0, |p| p.depth),
            mean_trade: trade_returns.clone().sum::<f64>() / count,
            best_trade: trade_returns.clone().fold(f64::NAN, f64::max),
            worst_trade: trade_returns.fold(f64::NAN, f64::min),
            mean_bars_held: r.trades.iter().map(|t| (t.exit_bar - t.entry_bar) as f64).sum::<f64>() / count,
        }
    }

    fn add_equity(&self, report: &mut Report, prefix: &str, hold: &[f64]) {
        let equity = (&self.report.equity[..], "equity (start = 1)", &[("buy and hold", "#999999", hold)][..]);
        let html = equity_and_drawdown(report, equity, &|keep| self.x_axis(keep), "equity");
        report.section("equity", &format!("{prefix}Equity and drawdown"), &html);
    }

    /// The closes with each trade's entry and exit as dots at its fill price, on the equity
    /// charts' time axis (they zoom together). Every marked bar is drawn, however the
    /// closes are thinned.
    fn add_price(&self, report: &mut Report, prefix: &str) {
        let close = self.data.close();
        let trades = &self.report.trades[..self.report.trades.len().min(MAX_TRADES_SHOWN)];
        let mut keep = thin(close, close);
        keep.extend(trades.iter().flat_map(|t| [t.entry_bar, t.exit_bar]).filter(|&b| b < close.len()));
        keep.sort_unstable();
        keep.dedup();
        let (mut entries, mut exits) = (vec![f64::NAN; close.len()], vec![f64::NAN; close.len()]);
        for t in trades.iter().filter(|t| t.exit_bar < close.len()) {
            entries[t.entry_bar] = t.entry_price;
            // An open trade has no exit: its last bar is only where it was marked.
            if t.reason != ExitReason::OpenAtEnd {
                exits[t.exit_bar] = t.exit_price;
            }
        }
        let (x, xs) = self.x_axis(&keep);
        let pick = |values: &[f64]| keep.iter().map(|&i| values[i]).collect::<Vec<f64>>();
        // The levels the rules compare prices with, over the closes.
        let overlays = self.overlays();
        let drawn = std::iter::once(("close", "#555555", pick(close)))
            .chain(overlays.iter().zip(OVERLAY_COLOURS.iter().cycle()).map(|((l, v), &c)| (l.as_str(), c, pick(v))))
            .collect();
        let chart = line_with_markers(
            "Price and trades",
            &x,
            &Axis::new("price", Unit::Number),
            &xs,
            drawn,
            vec![("entry", "#31549B", pick(&entries)), ("exit", "#B2182B", pick(&exits))],
            Some("equity"),
        );
        let mut html = report.chart(&chart);
        if trades.len() < self.report.trades.len() {
            html.push_str(&note(&format!("The first {MAX_TRADES_SHOWN} trades are marked.")));
        }
        report.section("price", &format!("{prefix}Price and trades"), &html);
    }

    /// The price levels the entry and exit rules compare with (`price_series`), computed
    /// again on the CPU for the page; none when they cannot be (the page is drawn without).
    fn overlays(&self) -> Vec<(String, Vec<f64>)> {
        let Ok(dispatcher) = Dispatcher::from_env(Some(DeviceMode::Cpu)) else { return Vec::new() };
        price_series(&IndicatorBank::new(self.data, &dispatcher), self.strategy, self.values).unwrap_or_default()
    }

    /// The x axis of the bars `keep`: their times when the data has time, else bars.
    fn x_axis(&self, keep: &[usize]) -> (Axis, Vec<f64>) {
        if self.report.bars_per_year.is_finite() {
            let times = self.data.timestamps();
            (Axis::time("time (UTC)"), keep.iter().map(|&i| times[i] as f64 / 1000.0).collect())
        } else {
            (Axis::new("bar", Unit::Count), keep.iter().map(|&i| i as f64).collect())
        }
    }

    /// The deepest drawdown periods: peak, valley, recovery, depth and length.
    fn add_drawdowns(&self, report: &mut Report, prefix: &str) {
        let equity = &self.report.equity;
        let times = self.data.timestamps();
        let timed = self.report.bars_per_year.is_finite();
        let at = |bar: usize| match timed {
            true => Cell::number(format_time(times[bar]), times[bar] as f64),
            false => Cell::number(bar.to_string(), bar as f64),
        };
        let headers: Vec<String> = ["#", "peak", "valley", "recovered", "depth", "bars to valley", "bars under water"]
            .map(String::from)
            .to_vec();
        let rows: Vec<Vec<Cell>> = worst_drawdowns(equity, WORST_DRAWDOWNS)
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let under = p.recovery.unwrap_or(equity.len()) - p.peak;
                vec![
                    Cell::number((i + 1).to_string(), (i + 1) as f64),
                    at(p.peak),
                    at(p.valley),
                    p.recovery.map_or_else(|| Cell::text("not yet"), at),
                    Cell::number(pct(p.depth), p.depth).styled(heat_style(p.depth, 0.2)),
                    Cell::number((p.valley - p.peak).to_string(), (p.valley - p.peak) as f64),
                    Cell::number(under.to_string(), under as f64),
                ]
            })
            .collect();
        let html = if rows.is_empty() { note("Equity never fell below a peak.") } else { table(&headers, &rows, true) };
        report.section("drawdowns", &format!("{prefix}Worst drawdowns"), &html);
    }

    /// The Sharpe ratio over a sliding window of bars, annualised.
    fn add_rolling(&self, report: &mut Report, prefix: &str) {
        let r = self.report;
        let window = rolling_window(r.equity.len(), r.bars_per_year);
        let heading = format!("{prefix}Rolling Sharpe");
        if r.equity.len() < window {
            report.section("rolling", &heading, &note(&format!("Fewer bars than one window of {window}.")));
            return;
        }
        let sharpe = rolling_sharpe(&r.equity, window, r.bars_per_year);
        let keep = thin(&sharpe, &sharpe);
        let (x, xs) = self.x_axis(&keep);
        let what = if r.bars_per_year.is_finite() { "annualised" } else { "per bar" };
        let chart = lines(
            &format!("Sharpe ratio over the last {window} bars ({what})"),
            &x,
            &Axis::new("Sharpe", Unit::Number),
            &xs,
            &[("rolling Sharpe", "#31549B", keep.iter().map(|&i| sharpe[i]).collect())],
            None,
            220,
        );
        let html = report.chart(&chart);
        report.section("rolling", &heading, &html);
    }

    fn add_trades(&self, report: &mut Report, prefix: &str) {
        let trades = &self.report.trades;
        let headers: Vec<String> =
            ["#", "side", "entry time", "entry price", "exit time", "exit price", "return", "bars held", "exit reason"]
                .map(String::from)
                .to_vec();
        let rows: Vec<Vec<Cell>> = trades
            .iter()
            .enumerate()
            .take(MAX_TRADES_SHOWN)
            .map(|(i, t)| {
                vec![
                    Cell::number(i.to_string(), i as f64),
                    Cell::text(t.side.to_string()),
                    Cell::number(format_time(t.entry_time), t.entry_time as f64),
                    Cell::number(num(t.entry_price, 4), t.entry_price),
                    Cell::number(format_time(t.exit_time), t.exit_time as f64),
                    Cell::number(num(t.exit_price, 4), t.exit_price),
                    Cell::number(pct(t.return_), t.return_).styled(heat_style(t.return_, 0.05)),
                    Cell::number((t.exit_bar - t.entry_bar).to_string(), (t.exit_bar - t.entry_bar) as f64),
                    Cell::text(t.reason.to_string()),
                ]
            })
            .collect();
        let mut html = if trades.is_empty() { note("No trades.") } else { table(&headers, &rows, true) };
        if trades.len() > MAX_TRADES_SHOWN {
            html.push_str(&note(&format!(
                "The first {MAX_TRADES_SHOWN} of {} trades; `threadx backtest --trades FILE` writes them all.",
                trades.len()
            )));
        }
        report.section("trades", &format!("{prefix}Trades ({})", trades.len()), &html);
    }

    fn add_monthly(&self, report: &mut Report, prefix: &str) {
        let heading = format!("{prefix}Monthly returns");
        if !self.report.bars_per_year.is_finite() {
            report.section("monthly", &heading, &note("The data has no time: no months."));
            return;
        }
        let months = monthly_returns(self.data.timestamps(), &self.report.equity);
        let mut headers = vec!["year".to_owned()];
        headers.extend(
            ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec", "year"]
                .map(String::from),
        );
        let span = months.iter().flat_map(|(_, m)| m.iter().flatten()).fold(0.0f64, |s, v| s.max(v.abs()));
        let rows: Vec<Vec<Cell>> = months
            .iter()
            .map(|(year, m)| {
                let mut row = vec![Cell::number(year.to_string(), f64::from(*year))];
                for v in m {
                    row.push(match v {
                        Some(v) => Cell::number(pct(*v), *v).styled(heat_style(*v, span)),
                        None => Cell::text(""),
                    });
                }
                let total = m.iter().flatten().fold(1.0, |acc, v| acc * (1.0 + v)) - 1.0;
                row.push(Cell::number(pct(total), total));
                row
            })
            .collect();
        report.section("monthly", &heading, &table(&headers, &rows, false));
    }
}

/// The data's origin, bars and time span.
pub(crate) fn data_line(data: &Ohlcv) -> String {
    let times = data.timestamps();
    match (times.first(), times.last()) {
        (Some(&a), Some(&b)) => {
            format!("{}, {} bars, {} to {}", data.origin(), data.len(), format_time(a), format_time(b))
        }
        _ => format!("{}, {} bars", data.origin(), data.len()),
    }
}

/// Each calendar month's return (UTC): its last equity over the previous month's last
/// (the start, 1, before the first), by year; `None` for months without bars.
fn monthly_returns(times: &[i64], equity: &[f64]) -> Vec<(i32, [Option<f64>; 12])> {
    let mut years: Vec<(i32, [Option<f64>; 12])> = Vec::new();
    let mut before = 1.0;
    let month_of = |ms: i64| DateTime::from_timestamp_millis(ms).map(|t| (t.year(), t.month0() as usize));
    let mut i = 0;
    while i < equity.len().min(times.len()) {
        let Some((year, month)) = month_of(times[i]) else { break };
        let mut last = i;
        while last + 1 < equity.len() && month_of(times[last + 1]) == Some((year, month)) {
            last += 1;
        }
        if years.last().is_none_or(|(y, _)| *y != year) {
            years.push((year, [None; 12]));
        }
        if let Some((_, months)) = years.last_mut() {
            months[month] = Some(equity[last] / before - 1.0);
        }
        before = equity[last];
        i = last + 1;
    }
    years
}

#[cfg(test)]
mod tests {
    use super::monthly_returns;

    #[test]
    fn months_chain_from_the_start_and_compound_to_the_years() {
        let day = 86_400_000i64;
        // 2023-12-30, 2023-12-31, 2024-01-01, 2024-03-01: December, January, March.
        let t0 = 1_703_894_400_000i64;
        let times = [t0, t0 + day, t0 + 2 * day, t0 + 62 * day];
        let equity = [1.1, 1.2, 0.9, 1.8];
        let months = monthly_returns(&times, &equity);
        assert_eq!(months.len(), 2);
        assert_eq!(months[0].0, 2023);
        assert!((months[0].1[11].unwrap() - 0.2).abs() < 1e-12);
        assert_eq!(months[1].0, 2024);
        assert!((months[1].1[0].unwrap() - (0.9 / 1.2 - 1.0)).abs() < 1e-12);
        assert_eq!(months[1].1[1], None);
        assert!((months[1].1[2].unwrap() - 1.0).abs() < 1e-12);
    }
}
