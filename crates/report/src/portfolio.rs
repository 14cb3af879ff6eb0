//! A portfolio backtest's page (`threadx backtest --portfolio --report`): what ran, the
//! account's metrics with its turnover and the positions it held, its equity over its
//! drawdown, each symbol's share of the account over time as a stacked area, each
//! symbol's contribution, and the trades.

use crate::charts::{Axis, Unit, equity_and_drawdown, lines, thin};
use crate::page::{Cell, Report, cards, facts, heat_style, note, num, pct, table};
use threadx_backtest::{Account, Metrics, PortfolioRecord, Strategy};
use threadx_indicators::format_time;

/// Trades the table lists at most (all of them are in `--trades`).
const MAX_TRADES_SHOWN: usize = 2000;

/// Symbols the allocation chart draws on their own (the rest as one band).
const ALLOCATION_BANDS: usize = 10;

/// The bands' colours, in turn; the rest and the cash are grey.
const BAND_COLOURS: [&str; 10] =
    ["#31549B", "#E08214", "#1B7837", "#B2182B", "#8073AC", "#35978F", "#D6604D", "#4393C3", "#A6761D", "#666666"];

/// One portfolio backtest as the page shows it.
#[derive(Debug, Clone, Copy)]
pub struct PortfolioRun<'a> {
    pub strategy: &'a Strategy,
    pub values: &'a [f64],
    /// Where the symbols came from, and their names in symbol order.
    pub origin: &'a str,
    pub symbols: &'a [&'a str],
    /// The clock (epoch ms) and each symbol's last close at each of its bars, row-major.
    pub times: &'a [i64],
    pub prices: &'a [f64],
    pub account: &'a Account,
    pub metrics: &'a Metrics,
    pub record: &'a PortfolioRecord,
    pub bars_per_year: f64,
    /// The account's sizing in words.
    pub sizing: &'a str,
}

impl PortfolioRun<'_> {
    /// The page of this run.
    pub fn report(&self) -> Report {
        let title = format!("{} portfolio backtest", self.strategy);
        let subtitle =
            format!("{} on {} symbols of {}", self.strategy.describe(self.values), self.symbols.len(), self.origin);
        let mut report = Report::new(&title, &subtitle);
        report.section("run", "What ran", &facts(&self.facts()));
        self.add_sections(&mut report, "");
        report
    }

    /// The account's sections; `prefix` starts their headings (a sweep's best combo).
    pub(crate) fn add_sections(&self, report: &mut Report, prefix: &str) {
        self.add_metrics(report, prefix);
        self.add_equity(report, prefix);
        self.add_allocation(report, prefix);
        self.add_contribution(report, prefix);
        self.add_trades(report, prefix);
    }

    fn facts(&self) -> Vec<(&'static str, String)> {
        let costs = &self.account.costs;
        vec![
            (
                "Data",
                format!(
                    "{} symbols of {}, {} bars on their joint clock",
                    self.symbols.len(),
                    self.origin,
                    self.times.len()
                ),
            ),
            ("Strategy", self.strategy.to_string()),
            ("Parameters", self.strategy.describe(self.values)),
            ("Account", self.sizing.to_owned()),
            ("Costs", format!("fee {} per fill, slippage {}", costs.fee, costs.slippage)),
        ]
    }

    fn add_metrics(&self, report: &mut Report, prefix: &str) {
        let m = self.metrics;
        let last = self.record.equity.last().copied().unwrap_or(self.account.init_cash);
        let figures = [
            ("Total return", pct(m.total_return), "equity at the end over the starting cash, minus 1"),
            ("Final equity", num(last, 2), "cash plus every position at its last close"),
            ("Annual return", pct(m.cagr), "compounded (CAGR)"),
            ("Sharpe (annual)", num(m.sharpe_annual, 2), "mean over deviation of bar returns"),
            ("Max drawdown", pct(m.max_drawdown), "deepest fall from a running peak"),
            ("Trades", format!("{} ({} closed)", m.trades, m.closed_trades), "entries, open ones included"),
            ("Win rate", pct(m.win_rate), "closed trades that gained"),
            ("Exposure", pct(m.exposure), "bars that end holding a position"),
            ("Mean positions held", num(m.mean_positions, 2), "symbols held at a bar's close, on average"),
            ("Turnover", num(m.turnover, 2), "value bought and sold over the mean equity"),
        ];
        let mut html = String::new();
        if !prefix.is_empty() {
            // A sweep's page: which combo this is, and that it was run again in full.
            html.push_str(&note(&format!(
                "{} {} ({}): the sweep's best combo, run again as one account bar by bar on the CPU.",
                self.strategy,
                self.strategy.describe(self.values),
                self.sizing
            )));
        }
        html.push_str(&cards(&figures));
        report.section("metrics", &format!("{prefix}Key metrics"), &html);
    }

    /// The x axis of the bars `keep`: their times.
    fn x_axis(&self, keep: &[usize]) -> (Axis, Vec<f64>) {
        (Axis::time("time (UTC)"), keep.iter().map(|&i| self.times[i] as f64 / 1000.0).collect())
    }

    fn add_equity(&self, report: &mut Report, prefix: &str) {
        let equity = (&self.record.equity[..], "equity", &[][..]);
        let html = equity_and_drawdown(report, equity, &|keep| self.x_axis(keep), "portfolio");
        report.section("equity", &format!("{prefix}Equity and drawdown"), &html);
    }

    /// Each symbol's share of the equity at each bar (its units at its last close, a
    /// short's the value it owes), the largest holders on their own, the rest as one band,
    /// and the cash where no short was held: a stacked area.
    fn add_allocation(&self, report: &mut Report, prefix: &str) {
        let n = self.symbols.len();
        let bars = self.record.equity.len();
        let shorts = self.record.positions.iter().any(|&units| units < 0.0);
        let share = |t: usize, s: usize| {
            let e = self.record.equity[t];
            if e > 0.0 { (self.record.positions[t * n + s] * self.prices[t * n + s]).abs() / e } else { 0.0 }
        };
        let mut mean: Vec<(f64, usize)> = (0..n).map(|s| ((0..bars).map(|t| share(t, s)).sum::<f64>(), s)).collect();
        mean.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let own: Vec<usize> = mean.iter().take(ALLOCATION_BANDS).filter(|(m, _)| *m > 0.0).map(|&(_, s)| s).collect();
        if own.is_empty() {
            report.section("allocation", &format!("{prefix}Allocation over time"), &note("No position was ever held."));
            return;
        }
        // Each band's top edge: its share plus the shares of the bands under it.
        let mut edges: Vec<(String, &str, Vec<f64>)> = Vec::new();
        let mut below = vec![0.0; bars];
        for (k, &s) in own.iter().enumerate() {
            below.iter_mut().enumerate().for_each(|(t, b)| *b += share(t, s));
            edges.push((self.symbols[s].to_owned(), BAND_COLOURS[k % BAND_COLOURS.len()], below.clone()));
        }
        if n > own.len() {
            let rest: Vec<f64> =
                (0..bars).map(|t| (0..n).filter(|s| !own.contains(s)).map(|s| share(t, s)).sum::<f64>()).collect();
            below.iter_mut().zip(&rest).for_each(|(b, r)| *b += r);
            edges.push((format!("{} others", n - own.len()), "#BBBBBB", below.clone()));
        }
        // With shorts the cash holds their sales' proceeds: the bands add up to the gross
        // exposure, and a cash band on top would say nothing.
        if !shorts {
            let cash: Vec<f64> =
                below.iter().enumerate().map(|(t, b)| b + self.record.cash[t] / self.record.equity[t]).collect();
            edges.push(("cash".into(), "#E6E6E6", cash));
        }
        let keep = thin(&edges[0].2, &below);
        let (x, xs) = self.x_axis(&keep);
        // Drawn from the top edge down, each filled to zero over the one before: a stack.
        let series: Vec<(&str, &str, Vec<f64>)> = edges
            .iter()
            .rev()
            .map(|(label, colour, values)| (label.as_str(), *colour, keep.iter().map(|&i| values[i]).collect()))
            .collect();
        let mut chart = lines(
            "Share of the equity",
            &x,
            &Axis::new("share (%)", Unit::Percent),
            &xs,
            &series,
            Some("portfolio"),
            320,
        );
        if let Some(drawn) = chart["series"].as_array_mut() {
            for s in drawn {
                s["fill"] = serde_json::Value::Bool(true);
            }
        }
        let mut html = report.chart(&chart);
        let gross = if shorts {
            " A short's band is the value it owes (its units at the last close), so the bands add up to the gross \
             exposure, and the cash (which holds the shorts' proceeds) is left out."
        } else {
            ""
        };
        html.push_str(&note(&format!(
            "Each band is a symbol's units at its last close over the equity, stacked; the {} largest holders on \
             average are drawn on their own.{gross}",
            own.len()
        )));
        report.section("allocation", &format!("{prefix}Allocation over time"), &html);
    }

    /// Each symbol's trades and profit: closed trades' profit, an open one's at the last
    /// close less what it cost.
    fn add_contribution(&self, report: &mut Report, prefix: &str) {
        let n = self.symbols.len();
        let mut rows = vec![(0usize, 0usize, 0.0f64); n];
        for t in &self.record.trades {
            let row = &mut rows[t.symbol];
            row.0 += 1;
            let last = self.record.equity.len() - 1;
            let pnl = t.profit(self.prices[last * n + t.symbol]);
            row.1 += usize::from(pnl > 0.0);
            row.2 += pnl;
        }
        let total: f64 = rows.iter().map(|r| r.2).sum();
        let span = rows.iter().fold(0.0f64, |m, r| m.max(r.2.abs()));
        let headers: Vec<String> =
            ["symbol", "trades", "won", "profit", "share of the profit"].map(String::from).to_vec();
        let table_rows: Vec<Vec<Cell>> = rows
            .iter()
            .enumerate()
            .map(|(s, &(trades, won, pnl))| {
                vec![
                    Cell::text(self.symbols[s].to_owned()),
                    Cell::number(trades.to_string(), trades as f64),
                    Cell::number(won.to_string(), won as f64),
                    Cell::number(num(pnl, 2), pnl).styled(heat_style(pnl, span)),
                    Cell::number(pct(pnl / total), pnl / total),
                ]
            })
            .collect();
        let mut html = table(&headers, &table_rows, true);
        html.push_str(&note(&format!(
            "The profits add up to {} (the equity at the end less the starting cash).",
            num(total, 2)
        )));
        report.section("contribution", &format!("{prefix}Contribution by symbol"), &html);
    }

    fn add_trades(&self, report: &mut Report, prefix: &str) {
        let trades = &self.record.trades;
        let headers: Vec<String> = [
            "#",
            "symbol",
            "side",
            "entry time",
            "entry price",
            "size",
            "exit time",
            "exit price",
            "profit",
            "return",
            "exit reason",
        ]
        .map(String::from)
        .to_vec();
        let time = |bar: Option<usize>| match bar {
            Some(b) => Cell::number(format_time(self.times[b]), self.times[b] as f64),
            None => Cell::text("open"),
        };
        let rows: Vec<Vec<Cell>> = trades
            .iter()
            .take(MAX_TRADES_SHOWN)
            .enumerate()
            .map(|(i, t)| {
                let ret = t.ret().unwrap_or(f64::NAN);
                vec![
                    Cell::number(i.to_string(), i as f64),
                    Cell::text(self.symbols[t.symbol].to_owned()),
                    Cell::text(t.side.name()),
                    time(Some(t.entry_bar)),
                    Cell::number(num(t.entry.price, 4), t.entry.price),
                    Cell::number(num(t.entry.size, 4), t.entry.size),
                    time(t.exit_bar),
                    t.exit.map_or_else(|| Cell::text(""), |x| Cell::number(num(x.price, 4), x.price)),
                    t.pnl().map_or_else(|| Cell::text(""), |p| Cell::number(num(p, 2), p)),
                    Cell::number(pct(ret), ret).styled(heat_style(ret, 0.05)),
                    Cell::text(t.reason.to_string()),
                ]
            })
            .collect();
        let mut html = if trades.is_empty() { note("No trades.") } else { table(&headers, &rows, true) };
        if trades.len() > MAX_TRADES_SHOWN {
            html.push_str(&note(&format!(
                "The first {MAX_TRADES_SHOWN} of {} trades; `threadx backtest --portfolio --trades FILE` writes them all.",
                trades.len()
            )));
        }
        report.section("trades", &format!("{prefix}Trades ({})", trades.len()), &html);
    }
}
