//! The tables of a portfolio's page — the lines under the picture
//! ([`write_lines`]), the statistics, the monthly returns, the last day's
//! money and the positions held — and the number formatting the page and
//! the pictures' hover titles share (`—` for what is missing, no `-0.00`).

use std::fmt::Write as _;

use chrono::NaiveDate;
use projections::Statistics;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::{Decimal, RoundingStrategy};

use super::format::{amount_str, money, money_str};
use super::format::{fixed, NULL};
use super::movers::symbol_pnl;
use crate::http::html::escape_html;
use crate::query::attribution::Attribution;
use crate::query::{History, HistoryQuery, Point, Positions};

/// A number of the lines' table: 6 places, half away from zero.
fn places6(v: Decimal) -> String {
    format!(
        "{:.6}",
        v.round_dp_with_strategy(6, RoundingStrategy::MidpointAwayFromZero)
    )
}

/// A line of the lines' table.
struct LineRow {
    /// `nav` or `bm`: the row's and the swatch's class.
    class: &'static str,
    name: String,
    /// The line's value at the range's end, as drawn.
    end: Option<Decimal>,
    /// Said instead of the change when there is none.
    note: String,
}

/// Under the picture, when it is rebased or has a benchmark: each line's
/// value on the day before the range, at its end, and the change, in exact
/// decimals from W0, the points' `net_value` and their `benchmark_index`.
pub(super) fn write_lines(h: &mut String, hist: &History, rebased: bool, bench: Option<&str>) {
    let (Some(first), Some(last)) = (hist.points.first(), hist.points.last()) else {
        return;
    };
    let Some(base_day) = first.date.pred_opt() else {
        return;
    };
    if !rebased && bench.is_none() {
        return;
    }
    let w0 = hist.w0;
    let start = if rebased { Decimal::ONE } else { w0 };
    let nav_end = last.net_value.parse::<Decimal>().ok().and_then(|v| {
        if rebased {
            v.checked_div(w0)
        } else {
            Some(v)
        }
    });
    let mut rows = vec![LineRow {
        class: "nav",
        name: if rebased { "NAV rebased" } else { "NAV" }.to_string(),
        end: nav_end,
        note: String::new(),
    }];
    if let Some(name) = bench {
        rows.push(benchmark_line(hist, last.date, rebased, name));
    }
    write_lines_table(h, base_day, last.date, start, rows);
    let explain = lines_explained(rebased, bench, base_day, w0);
    let _ = writeln!(h, "<p class=\"sub\">{}</p></div>", escape_html(&explain));
}

/// The benchmark's line: its last level in the range (B / B₀, times W0
/// unless rebased), or why there is none.
fn benchmark_line(hist: &History, last_day: NaiveDate, rebased: bool, name: &str) -> LineRow {
    let w0 = hist.w0;
    let level = hist
        .points
        .iter()
        .rev()
        .find_map(|p| match &p.benchmark_index {
            Some(Some(x)) => x.parse::<Decimal>().ok().map(|x| (p.date, x)),
            _ => None,
        });
    let status = hist
        .statistics
        .benchmark
        .as_ref()
        .map(|b| b.benchmark_status.as_str())
        .filter(|s| *s != "ok");
    let (end, note) = match level {
        Some((day, x)) => (
            if rebased { Some(x) } else { w0.checked_mul(x) },
            if day == last_day {
                String::new()
            } else {
                format!("last level on {day}")
            },
        ),
        None => (
            None,
            status.map_or_else(|| "no level in this range".to_string(), str::to_string),
        ),
    };
    LineRow {
        class: "bm",
        name: if rebased {
            format!("{name} rebased")
        } else {
            name.to_string()
        },
        end,
        note,
    }
}

/// The lines' table: each line from `start` on `base_day` to its end on
/// `last_day`, and the change (or the line's note).
fn write_lines_table(
    h: &mut String,
    base_day: NaiveDate,
    last_day: NaiveDate,
    start: Decimal,
    rows: Vec<LineRow>,
) {
    let _ = writeln!(
        h,
        "<div class=\"lines scroll\"><table>\n<tr><th>Line</th><th>On {base_day}</th><th>On {}</th>\
         <th>Change</th></tr>",
        last_day
    );
    for LineRow {
        class,
        name,
        end,
        note,
    } in rows
    {
        let change = end
            .and_then(|e| e.checked_div(start))
            .and_then(|r| (r - Decimal::ONE).to_f64());
        let sign = match change {
            Some(c) if c > 0.0 => " up",
            Some(c) if c < 0.0 => " down",
            _ => "",
        };
        let _ = writeln!(
            h,
            "<tr class=\"line-{class}\"><th scope=\"row\"><span class=\"sw {class}\"></span>{}</th>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num{sign}\">{}</td></tr>",
            escape_html(&name),
            places6(start),
            end.map_or_else(|| NULL.to_string(), places6),
            match change {
                Some(c) => pct(c),
                None => escape_html(&note),
            }
        );
    }
    h.push_str("</table>\n");
}

/// What the lines are relative to, under their table.
fn lines_explained(rebased: bool, bench: Option<&str>, base_day: NaiveDate, w0: Decimal) -> String {
    match (rebased, bench) {
        (true, Some(b)) => format!(
            "Rebased: the NAV divided by its value on {base_day}, the day before the range \
             (W0 = {}), and the {b} index B / B\u{2080} over the same day, so both start at 1.",
            places6(w0)
        ),
        (true, None) => format!(
            "Rebased: the NAV divided by its value on {base_day}, the day before the range \
             (W0 = {}), so it starts at 1.",
            places6(w0)
        ),
        (false, Some(b)) => format!(
            "The {b} line starts from the NAV on {base_day}, the day before the range: \
             W0 \u{b7} B / B\u{2080}, what the starting value would have become in {b}."
        ),
        (false, None) => String::new(),
    }
}

/// A row of the statistics' table: name, value, note.
type StatRow<'a> = (&'a str, String, &'a str);

/// The statistics of the range, and against the benchmark when there is
/// one.
pub(super) fn write_stats(h: &mut String, s: &Statistics, q: &HistoryQuery) {
    let rows = return_rows(s)
        .into_iter()
        .chain(ratio_rows(s))
        .chain([calendar_row(q)])
        .chain(
            s.benchmark
                .as_ref()
                .map_or_else(Vec::new, |b| benchmark_rows(b, q)),
        );
    h.push_str("<div class=\"card\"><h2>Statistics of the range</h2><table>\n");
    for (name, value, note) in rows {
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\">{}</th><td class=\"num\">{}</td><td class=\"note\">{}</td></tr>",
            escape_html(name),
            escape_html(&value),
            escape_html(note)
        );
    }
    h.push_str("</table></div>\n");
}

/// The returns and the deepest drawdown.
fn return_rows(s: &Statistics) -> [StatRow<'static>; 6] {
    let not_recovered = s.max_drawdown < 0.0 && s.max_drawdown_recovery.is_none();
    [
        (
            "Total return",
            pct(s.total_return),
            "last NAV / NAV before the range \u{2212} 1",
        ),
        (
            "Annual return",
            opt(s.annual_return, pct),
            "compounded per year; only with at least a year of returns",
        ),
        (
            "Max drawdown",
            pct(s.max_drawdown),
            "deepest fall below a previous peak",
        ),
        ("Drawdown peak", opt_date(s.max_drawdown_peak), ""),
        ("Drawdown trough", opt_date(s.max_drawdown_trough), ""),
        (
            "Drawdown recovery",
            opt_date(s.max_drawdown_recovery),
            if not_recovered {
                "not recovered yet"
            } else {
                "first day back at the peak"
            },
        ),
    ]
}

/// Risk, the ratios, the money-weighted returns and the count of returns.
fn ratio_rows(s: &Statistics) -> [StatRow<'static>; 7] {
    [
        (
            "Volatility",
            opt(s.volatility, pct),
            "annualized standard deviation of returns",
        ),
        ("Sharpe ratio", opt(s.sharpe_ratio, ratio), "annualized"),
        ("Sortino ratio", opt(s.sortino_ratio, ratio), "annualized"),
        (
            "Calmar ratio",
            opt(s.calmar_ratio, ratio),
            "annual return / |max drawdown|",
        ),
        (
            "Money-weighted return",
            opt(s.money_weighted_return, pct),
            "annual rate your deposits and withdrawals earned (XIRR)",
        ),
        (
            "Modified Dietz",
            opt(s.modified_dietz, pct),
            "the range's gain over its time-weighted capital",
        ),
        (
            "Observations",
            s.observations.to_string(),
            "number of returns used",
        ),
    ]
}

/// The calendar and risk-free rate the statistics were computed with.
fn calendar_row(q: &HistoryQuery) -> StatRow<'static> {
    (
        "Calendar / risk-free",
        format!(
            "{} / {}",
            match q.stats.calendar {
                projections::Calendar::Trading => "trading",
                projections::Calendar::All => "all",
            },
            pct(q.stats.risk_free)
        ),
        match q.stats.calendar {
            projections::Calendar::Trading => "Mon\u{2013}Fri records, 252 periods a year",
            projections::Calendar::All => "every record, 365 periods a year",
        },
    )
}

/// The statistics against the benchmark.
fn benchmark_rows<'a>(b: &'a projections::BenchmarkStats, q: &HistoryQuery) -> Vec<StatRow<'a>> {
    vec![
        (
            "Benchmark",
            q.benchmark
                .as_ref()
                .map_or_else(String::new, |s| s.to_string()),
            if b.benchmark_status == "ok" {
                ""
            } else {
                b.benchmark_status.as_str()
            },
        ),
        (
            "Benchmark return",
            opt(b.benchmark_total_return, pct),
            "over the same days",
        ),
        ("Beta", opt(b.beta, ratio), "sensitivity to the benchmark"),
        (
            "Alpha",
            opt(b.alpha, pct),
            "annualized, beyond what beta explains",
        ),
        (
            "Tracking error",
            opt(b.tracking_error, pct),
            "annualized stdev of the difference",
        ),
        (
            "Information ratio",
            opt(b.information_ratio, ratio),
            "annualized",
        ),
        ("Correlation", opt(b.correlation, ratio), ""),
        (
            "Up capture",
            opt(b.up_capture, ratio),
            "on the benchmark's up days",
        ),
        (
            "Down capture",
            opt(b.down_capture, ratio),
            "on its down days",
        ),
    ]
}

/// Monthly returns, a row per year with its months and the year's own
/// return, coloured by sign; a period the range covers only in part is
/// marked with an asterisk.
pub(super) fn write_periods(h: &mut String, p: &projections::Periods) {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    if p.monthly.is_empty() {
        return;
    }
    // `data-m` names the cell's column where a narrow screen lays a year
    // out as a grid of cells rather than a row.
    let cell = |r: &projections::PeriodReturn, m: &str, extra: &str| {
        let class = if r.value > 0.0 {
            "num up"
        } else if r.value < 0.0 {
            "num down"
        } else {
            "num"
        };
        format!(
            "<td class=\"{class}{extra}\" data-m=\"{m}\">{}{}</td>",
            escape_html(&pct(r.value)),
            if r.partial { "*" } else { "" }
        )
    };
    h.push_str(
        "<div class=\"card\"><h2>Returns by month and year</h2><table class=\"months\">\
         <tr class=\"head\"><th>Year</th>",
    );
    for m in MONTHS {
        let _ = write!(h, "<th>{m}</th>");
    }
    h.push_str("<th>Year</th></tr>\n");
    for y in &p.yearly {
        let _ = write!(h, "<tr><th scope=\"row\">{}</th>", escape_html(&y.period));
        for (i, m) in MONTHS.iter().enumerate() {
            let name = format!("{}-{:02}", y.period, i + 1);
            match p.monthly.iter().find(|x| x.period == name) {
                Some(r) => h.push_str(&cell(r, m, "")),
                None => {
                    let _ = write!(h, "<td data-m=\"{m}\"></td>");
                }
            }
        }
        h.push_str(&cell(y, "Year", " yr"));
        h.push_str("</tr>\n");
    }
    h.push_str("</table><p class=\"sub\">* the range covers only part of the period</p></div>\n");
}

/// The positions at the range's end: prices in their own currency with
/// the rate that converted them, values in the portfolio's; with the
/// range's attribution, each position's P&L over the range (its
/// `symbol:S` component: value change plus what it paid out, less what
/// was put in).
pub(super) fn write_positions(
    h: &mut String,
    p: &Positions,
    currency: &str,
    attribution: Option<&Attribution>,
) {
    let pnl_head = attribution.map_or_else(String::new, |a| {
        format!("<th>{}</th>", escape_html(&format!("P&L since {}", a.from)))
    });
    let _ = writeln!(
        h,
        "<div class=\"card scroll\"><h2>{}</h2><table><tr><th>Symbol</th><th>Quantity</th>\
         <th>Price</th><th>Rate</th><th>Value</th><th>Weight</th><th>Cost</th><th>Unrealized</th>\
         {pnl_head}</tr>",
        escape_html(&format!("Held on {}", p.date))
    );
    let m = |text: &str| escape_html(&money_str(text, currency));
    for x in &p.positions {
        let pnl = attribution.map_or_else(String::new, |a| {
            let v = symbol_pnl(a, &x.symbol);
            format!(
                "<td class=\"num\">{}</td>",
                escape_html(&v.map_or_else(|| NULL.to_string(), |v| money(v, currency)))
            )
        });
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\">{}</th><td class=\"num\">{}</td><td class=\"num\">{} {}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td>{pnl}</tr>",
            contract_note(&x.symbol, x, currency),
            escape_html(&amount_str(&x.quantity, 0)),
            escape_html(&amount_str(&x.price, 2)),
            escape_html(&x.currency),
            escape_html(&amount_str(&x.fx_rate, 0)),
            m(&x.value),
            x.weight.map_or_else(|| NULL.to_string(), pct),
            m(&x.cost),
            m(&x.unrealized_pnl),
        );
    }
    let blank = if attribution.is_some() {
        "<td></td>"
    } else {
        ""
    };
    for c in &p.cash {
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\">Cash {}</th><td class=\"num\">{}</td><td></td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td></td><td></td><td></td>{blank}</tr>",
            escape_html(&c.currency),
            escape_html(&money_str(&c.amount, &c.currency)),
            escape_html(&amount_str(&c.fx_rate, 0)),
            m(&c.value)
        );
    }
    if p.positions.is_empty() && p.cash.is_empty() {
        h.push_str("<tr><td colspan=\"9\">nothing held</td></tr>\n");
    }
    h.push_str("</table></div>\n");
}

/// A position's symbol cell, escaped: with, for an option, a future or a
/// bond, what it is (its multiplier beside it when not 1), its expiry or
/// maturity, and a future's notional (its value is 0: its gains are
/// settled in cash every day).
fn contract_note(symbol: &str, x: &crate::query::PositionView, currency: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    if x.kind != "equity" {
        parts.push(x.kind.clone());
    }
    if x.multiplier != "1" {
        parts.push(format!("×{}", x.multiplier));
    }
    if let Some(e) = x.expiry {
        let word = if x.kind == "bond" {
            "matures"
        } else {
            "expires"
        };
        parts.push(format!("{word} {e}"));
    }
    if let Some(n) = &x.notional {
        parts.push(format!("notional {}", money_str(n, currency)));
    }
    if let Some(a) = &x.accrued_interest {
        parts.push(format!("accrued {}", money_str(a, currency)));
    }
    if let Some(c) = x.next_coupon {
        parts.push(format!("next coupon {c}"));
    }
    if parts.is_empty() {
        return escape_html(symbol);
    }
    format!(
        "{}<br><span class=\"sub\">{}</span>",
        escape_html(symbol),
        escape_html(&parts.join(" · "))
    )
}

/// The money of the range's last day: what the value is made of, and what
/// the portfolio earned so far besides price moves.
pub(super) fn write_last_day(h: &mut String, p: &Point, currency: &str) {
    let rows: [(&str, &str, &str); 8] = [
        (
            "Market value",
            &p.market_value,
            "holdings + cash + receivable",
        ),
        ("Holdings", &p.holdings_value, "quantity \u{d7} price"),
        ("Cash", &p.cash, "0 unless the portfolio tracks cash"),
        (
            "Receivable",
            &p.receivable,
            "dividends past their ex-date, not yet paid",
        ),
        ("Cost", &p.cost, "moving-average cost of the open positions"),
        ("Profit", &p.profit, "value + money out \u{2212} money in"),
        ("Income", &p.income, "net dividends and interest so far"),
        (
            "Realized P&L",
            &p.realized_pnl,
            "sells' proceeds less the cost they released",
        ),
    ];
    let _ = writeln!(
        h,
        "<div class=\"card\"><h2>{}</h2><table>",
        escape_html(&format!("On {}", p.date))
    );
    for (name, value, note) in rows {
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\">{}</th><td class=\"num\">{}</td><td class=\"note\">{}</td></tr>",
            escape_html(name),
            escape_html(&money_str(value, currency)),
            escape_html(note)
        );
    }
    let leverage = p
        .leverage
        .as_deref()
        .map_or_else(|| NULL.to_string(), times);
    let _ = writeln!(
        h,
        "<tr><th scope=\"row\">Leverage</th><td class=\"num\">{}</td>\
         <td class=\"note\">gross exposure \u{f7} market value</td></tr>",
        escape_html(&leverage)
    );
    h.push_str("</table></div>\n");
}

/// A leverage as the page shows it: two places and a times sign.
fn times(l: &str) -> String {
    match l.parse::<Decimal>() {
        Ok(v) => format!("{:.2}\u{d7}", v.round_dp(2)),
        Err(_) => l.to_string(),
    }
}

/// Under the value chart: how exposed the range's last day was (long and
/// short value, futures notional, gross and net exposure, leverage).
fn write_exposure(h: &mut String, last: &Point, currency: &str) {
    let m = |t: &str| escape_html(&money_str(t, currency));
    let leverage = last
        .leverage
        .as_deref()
        .map_or_else(|| NULL.to_string(), times);
    let _ = write!(
        h,
        "<p class=\"exposure\">Exposure on {}: long {}, short {}, futures {}; gross {}, \
         net {}, leverage {}.</p>",
        last.date,
        m(&last.long_value),
        m(&last.short_value),
        m(&last.futures_notional),
        m(&last.gross_exposure),
        m(&last.net_exposure),
        escape_html(&leverage)
    );
}

/// Under the value chart: the value on the range's first and last day,
/// the net flows after the first, and what the value changed by beside
/// them (end − start − flows: what the market did).
pub(super) fn write_value_summary(h: &mut String, points: &[Point], currency: &str) {
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return;
    };
    let dec = |t: &str| t.parse::<Decimal>().unwrap_or_default();
    // The first day's own flow is in its value already.
    let flows: Decimal = points.iter().skip(1).map(|p| dec(&p.net_flow)).sum();
    let start = dec(&first.market_value);
    let end = dec(&last.market_value);
    let rows = [
        (format!("Value on {}", first.date), start),
        (format!("Net flows after {}", first.date), flows),
        (format!("Value on {}", last.date), end),
        ("Change beside the flows".to_string(), end - start - flows),
    ];
    h.push_str("<div class=\"lines\"><table>");
    for (name, v) in rows {
        let _ = write!(
            h,
            "<tr><th scope=\"row\">{}</th><td class=\"num\">{}</td></tr>",
            escape_html(&name),
            escape_html(&money(v, currency))
        );
    }
    let _ = write!(
        h,
        "</table><p>The solid line is the market value in {cur}; the dashed one is the money \
         put in less the money taken out so far, so the gap between them is the profit. \
         \u{25b2} marks a day money came in, \u{25bc} a day it went out (the amount shows on \
         hover).</p>",
        cur = escape_html(currency)
    );
    write_exposure(h, last, currency);
    h.push_str("</div>");
}

fn pct(v: f64) -> String {
    if v.is_finite() {
        format!("{}%", fixed(v * 100.0, 2))
    } else {
        NULL.to_string()
    }
}

fn ratio(v: f64) -> String {
    fixed(v, 2)
}

fn opt(v: Option<f64>, f: fn(f64) -> String) -> String {
    v.map_or_else(|| NULL.to_string(), f)
}

pub(super) fn opt_date(d: Option<NaiveDate>) -> String {
    d.map_or_else(|| NULL.to_string(), |d| d.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::chart::test_data::day;

    #[test]
    fn lines_table_in_exact_decimals() {
        use crate::query::{Point, PortfolioStatus};
        let point = |d: &str, nav: &str, idx: Option<&str>| Point {
            date: day(d),
            net_value: nav.into(),
            return_rate: "0".into(),
            daily_return: "0".into(),
            market_value: "0".into(),
            cost: "0".into(),
            net_flow: "0".into(),
            profit: "0".into(),
            holdings_value: "0".into(),
            cash: "0".into(),
            receivable: "0".into(),
            income: "0".into(),
            realized_pnl: "0".into(),
            inflow: "0".into(),
            outflow: "0".into(),
            long_value: "0".into(),
            short_value: "0".into(),
            futures_notional: "0".into(),
            gross_exposure: "0".into(),
            net_exposure: "0".into(),
            leverage: None,
            accrued_interest: "0".into(),
            benchmark_index: Some(idx.map(str::to_string)),
            rolling_volatility: None,
            rolling_sharpe: None,
        };
        let hist = History {
            portfolio_id: "p".into(),
            from: Some(day("2024-03-01")),
            to: Some(day("2024-03-03")),
            as_of: None,
            status: PortfolioStatus::ok(),
            points: vec![
                point("2024-03-01", "2.100000000000", None),
                point("2024-03-02", "2.200000000000", Some("1.050000000000")),
                point("2024-03-03", "2.500000000000", Some("1.100000000000")),
            ],
            w0: Decimal::new(2, 0),
            statistics: projections::statistics(
                Decimal::ONE,
                day("2024-02-29"),
                &[],
                &projections::StatsQuery::default(),
            ),
            version: 0,
            pending_from: None,
        };
        let mut h = String::new();
        write_lines(&mut h, &hist, true, Some("IDX"));
        assert!(
            h.contains("<th>On 2024-02-29</th><th>On 2024-03-03</th>"),
            "{h}"
        );
        assert!(h.contains("NAV rebased</th><td class=\"num\">1.000000</td><td class=\"num\">1.250000</td><td class=\"num up\">25.00%</td>"), "{h}");
        assert!(h.contains("IDX rebased</th><td class=\"num\">1.000000</td><td class=\"num\">1.100000</td><td class=\"num up\">10.00%</td>"), "{h}");
        assert!(h.contains("(W0 = 2.000000)"));
        let mut h = String::new();
        write_lines(&mut h, &hist, false, Some("IDX"));
        assert!(
            h.contains(">NAV</th><td class=\"num\">2.000000</td><td class=\"num\">2.500000</td>"),
            "{h}"
        );
        assert!(h.contains(">IDX</th><td class=\"num\">2.000000</td><td class=\"num\">2.200000</td><td class=\"num up\">10.00%</td>"), "{h}");
        // Neither rebased nor compared: no table.
        let mut h = String::new();
        write_lines(&mut h, &hist, false, None);
        assert!(h.is_empty());
    }

    #[test]
    fn human_formatting() {
        assert_eq!(pct(-0.123456), "-12.35%");
        assert_eq!(pct(-0.000001), "0.00%");
        assert_eq!(ratio(1.23456), "1.23");
        assert_eq!(opt(None, ratio), "\u{2014}");
        assert_eq!(opt_date(Some(day("2024-03-04"))), "2024-03-04");
        assert_eq!(opt_date(None), "\u{2014}");
    }
}

#[cfg(test)]
mod contract_tests {
    use super::contract_note;
    use crate::query::PositionView;

    fn row(
        kind: &str,
        multiplier: &str,
        expiry: Option<&str>,
        notional: Option<&str>,
    ) -> PositionView {
        PositionView {
            symbol: "ESU4".into(),
            kind: kind.into(),
            multiplier: multiplier.into(),
            quantity: "2".into(),
            cost: "0.00000000".into(),
            average_cost: "0.00000000".into(),
            price: "5440".into(),
            price_date: None,
            currency: "USD".into(),
            fx_rate: "1".into(),
            value: "0.00000000".into(),
            weight: Some(0.0),
            unrealized_pnl: "0.00000000".into(),
            expiry: expiry.map(|d| d.parse().unwrap()),
            notional: notional.map(str::to_string),
            accrued_interest: None,
            next_coupon: None,
            actions: vec![],
        }
    }

    #[test]
    fn a_contracts_row_says_what_it_is_when_it_expires_and_its_notional() {
        let future = row("future", "50", Some("2024-09-20"), Some("544000.00000000"));
        let cell = contract_note("ESU4", &future, "USD");
        assert!(
            cell.starts_with(
                "ESU4<br><span class=\"sub\">future · ×50 · expires 2024-09-20 · notional "
            ),
            "{cell}"
        );
        assert!(cell.contains("544,000.00"), "{cell}");
        let mut bond = row("bond", "1", Some("2030-01-15"), None);
        bond.accrued_interest = Some("68.05555556".into());
        bond.next_coupon = Some("2024-07-15".parse().unwrap());
        let cell = contract_note("BD", &bond, "USD");
        assert!(
            cell.contains("bond · matures 2030-01-15 · accrued 68.06 USD · next coupon 2024-07-15"),
            "{cell}"
        );
        let plain = row("equity", "1", None, None);
        assert_eq!(contract_note("<ACME>", &plain, "USD"), "&lt;ACME&gt;");
    }
}
