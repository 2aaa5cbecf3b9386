//! The tear sheet on a page (docs/valuation.md, "The tear sheet"): the range's deepest drawdowns
//! (peak, trough, recovery, depth, length), the trailing returns up to its
//! last record (1M … inception, as the API gives them), the distribution
//! of its returns (value at risk, skew, best and worst day, …), and the
//! card of the rolling chart ([`super::rolling`]). The figures are the
//! read's `statistics`, never recomputed here.

use std::fmt::Write as _;

use projections::{Statistics, Trailing};

use super::format::{fixed, signed_pct, NULL};
use super::rolling::render_rolling;
use super::svg::NARROW;
use super::tables::write_stats;
use crate::http::html::escape_html;
use crate::query::{HistoryQuery, Point};

/// The rolling chart's size on a screen and on a phone.
const ROLLING_WIDE: (u32, u32) = (960, 340);
const ROLLING_NARROW: (u32, u32) = (NARROW.0, 400);

fn pct(v: Option<f64>) -> (String, &'static str) {
    // Through the decimal formatter, so the signs and classes are the
    // dashboard's; a figure that is not finite has none.
    signed_pct(v.and_then(rust_decimal::Decimal::from_f64_retain))
}

/// The card of the rolling chart (wide and compact, CSS picks), under the
/// NAV and drawdown panels; `window` is the read's `rolling` (none: no
/// card).
pub(super) fn write_rolling(h: &mut String, points: &[Point], window: Option<usize>) {
    let Some(window) = window else {
        return;
    };
    let label = format!("rolling volatility and Sharpe ratio over {window} returns");
    let _ = writeln!(
        h,
        "<div class=\"card chart rolling\">\n\
         <div class=\"wide\" role=\"img\" aria-label=\"{label}\">{}</div>\n\
         <div class=\"narrow\" role=\"img\" aria-label=\"{label}\">{}</div>\n\
         <p class=\"sub\">Each day's figure is of the last {window} sampled returns (about a \
         quarter of trading days by default; <code>rolling=N</code> in the address picks \
         another window), annualised like the statistics.</p></div>",
        render_rolling(points, window, ROLLING_WIDE.0, ROLLING_WIDE.1),
        render_rolling(points, window, ROLLING_NARROW.0, ROLLING_NARROW.1),
    );
}

/// The statistics' card, then the tear sheet's.
pub(super) fn write_statistics(h: &mut String, s: &Statistics, q: &HistoryQuery) {
    write_stats(h, s, q);
    write_tear_sheet(h, s);
}

/// The tear sheet's cards: the trailing returns, the drawdowns, and the
/// distribution of the returns.
fn write_tear_sheet(h: &mut String, s: &Statistics) {
    write_trailing(h, &s.tear_sheet.trailing);
    write_drawdowns(h, s);
    write_distribution(h, s);
}

fn write_trailing(h: &mut String, t: &Trailing) {
    let cells = [
        ("1M", t.m1),
        ("3M", t.m3),
        ("6M", t.m6),
        ("YTD", t.ytd),
        ("1Y", t.y1),
        ("3Y", t.y3),
        ("5Y", t.y5),
        ("Inception", t.inception),
    ];
    h.push_str(
        "<div class=\"card\"><h2>Trailing returns</h2><div class=\"scroll\">\
         <table class=\"trailing\"><tr>",
    );
    for (name, _) in cells {
        let _ = write!(h, "<th class=\"r\">{name}</th>");
    }
    h.push_str("</tr><tr>");
    for (name, v) in cells {
        let (text, sign) = pct(v);
        let _ = write!(
            h,
            "<td class=\"num {sign}\" data-period=\"{name}\">{}</td>",
            escape_html(&text)
        );
    }
    h.push_str(
        "</tr></table></div><p class=\"sub\">Up to the range's last record, from the same day \
         that many months before (YTD: from the last day of the year before); 3Y, 5Y and \
         since inception per year. \u{2014}: the history does not reach back that far.</p></div>\n",
    );
}

fn write_drawdowns(h: &mut String, s: &Statistics) {
    let rows = &s.tear_sheet.drawdowns;
    h.push_str(
        "<div class=\"card scroll drawdowns\"><h2>Deepest drawdowns</h2><table>\
         <tr><th>#</th><th>Peak</th><th>Trough</th><th>Recovery</th><th class=\"r\">Depth</th>\
         <th class=\"r\">Days</th></tr>\n",
    );
    for (i, d) in rows.iter().enumerate() {
        let (depth, sign) = pct(Some(d.depth));
        let recovery = d
            .recovery
            .map_or_else(|| "not recovered".to_string(), |r| r.to_string());
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"nowrap\">{}</td><td class=\"nowrap\">{}</td>\
             <td class=\"nowrap\">{recovery}</td><td class=\"num {sign}\">{depth}</td>\
             <td class=\"num\">{}</td></tr>",
            i + 1,
            d.peak,
            d.trough,
            d.days
        );
    }
    if rows.is_empty() {
        h.push_str("<tr><td colspan=\"6\">no drawdown in this range</td></tr>\n");
    }
    h.push_str(
        "</table><p class=\"sub\">The falls below a previous high, deepest first: the peak is \
         the first day at the high, the recovery the first day back at it; days are calendar \
         days from the peak to the recovery, or to the range's end while under water.</p></div>\n",
    );
}

fn write_distribution(h: &mut String, s: &Statistics) {
    let t = &s.tear_sheet;
    let num = |v: Option<f64>| v.map_or_else(|| NULL.to_string(), |v| fixed(v, 2));
    let rows: [(&str, String, &str); 8] = [
        (
            "Value at risk (95%)",
            pct(t.value_at_risk_95).0,
            "the 5th percentile of the returns",
        ),
        (
            "Conditional VaR (95%)",
            pct(t.conditional_value_at_risk_95).0,
            "the mean of the returns at or below it",
        ),
        ("Best return", pct(t.best_day).0, ""),
        ("Worst return", pct(t.worst_day).0, ""),
        (
            "Win rate",
            pct(t.win_rate).0,
            "share of the non-zero returns above 0",
        ),
        ("Skew", num(t.skew), ""),
        (
            "Kurtosis",
            num(t.kurtosis),
            "in excess of a normal distribution's",
        ),
        (
            "Tail ratio",
            num(t.tail_ratio),
            "|95th percentile| / |5th percentile|",
        ),
    ];
    h.push_str("<div class=\"card\"><h2>Distribution of the returns</h2><table>\n");
    for (name, value, note) in rows {
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\">{name}</th><td class=\"num\">{}</td><td class=\"note\">{note}</td></tr>",
            escape_html(&value)
        );
    }
    h.push_str("</table></div>\n");
}

/// The tear sheet's own rules.
pub(super) const CSS_TEAR: &str = "\
.drawdowns th.r,table.trailing th.r{text-align:right}\
table.trailing th,table.trailing td{white-space:nowrap}\
";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::chart::test_data::day;
    use projections::DrawdownPeriod;

    #[test]
    fn drawdowns_trailing_and_distribution() {
        let mut s = projections::statistics(
            rust_decimal::Decimal::ONE,
            day("2024-01-01"),
            &[],
            &projections::StatsQuery::default(),
        );
        s.tear_sheet.drawdowns = vec![
            DrawdownPeriod {
                peak: day("2024-02-01"),
                trough: day("2024-03-01"),
                recovery: None,
                depth: -0.1234,
                days: 60,
            },
            DrawdownPeriod {
                peak: day("2024-01-05"),
                trough: day("2024-01-10"),
                recovery: Some(day("2024-01-20")),
                depth: -0.02,
                days: 15,
            },
        ];
        s.tear_sheet.trailing.m1 = Some(0.0123);
        s.tear_sheet.trailing.ytd = Some(-0.05);
        s.tear_sheet.value_at_risk_95 = Some(-0.021);
        let mut h = String::new();
        write_tear_sheet(&mut h, &s);
        assert!(h.contains(
            "<tr><td>1</td><td class=\"nowrap\">2024-02-01</td><td class=\"nowrap\">2024-03-01</td>\
             <td class=\"nowrap\">not recovered</td><td class=\"num down\">-12.34%</td>\
             <td class=\"num\">60</td></tr>"
        ), "{h}");
        assert!(
            h.contains("<td class=\"nowrap\">2024-01-20</td><td class=\"num down\">-2.00%</td>")
        );
        assert!(h.contains("<td class=\"num up\" data-period=\"1M\">+1.23%</td>"));
        assert!(h.contains("<td class=\"num down\" data-period=\"YTD\">-5.00%</td>"));
        assert!(h.contains("<td class=\"num \" data-period=\"3Y\">\u{2014}</td>"));
        assert!(h.contains("Value at risk (95%)</th><td class=\"num\">-2.10%</td>"));
    }
}
