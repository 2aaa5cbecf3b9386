//! "What moved it": the portfolio page's table of the range's attribution
//! (docs/valuation.md, "Attribution") — the components that
//! added most and least to the range's money and return, sorted by their
//! contribution, with a totals row that is the range's own P&L and return.
//!
//! With more than `2 × MOVERS` components the middle ones are summed into
//! one "the other N" row, so the rows shown still add up to the totals
//! exactly (the sums are of the exact decimals the API reports, never of
//! the rounded text). The positions table takes each symbol's P&L of the
//! range from the same attribution ([`symbol_pnl`]).
//!
//! The attribution is a convenience of the page, like the positions: a
//! range that cannot be attributed (an inconsistent history, a missing
//! rate, a read that fails) shows no table rather than failing the page.

use std::fmt::Write as _;

use rust_decimal::Decimal;

use super::format::{money, signed_pct};
use crate::http::html::escape_html;
use crate::http::state::AppState;
use crate::query::attribution::{read_attribution, Attribution, ComponentView};
use crate::query::{History, HistoryQuery, State};

/// How many components the table lists at each end (top and bottom).
pub(super) const MOVERS: usize = 5;

/// The attribution of the page's range (its first and last record), as
/// known at the page's `as_known_at`; `None` when there is no record, the
/// history is not consistent, or the read fails.
pub(super) async fn read_movers(
    s: &AppState,
    id: &str,
    h: &History,
    q: &HistoryQuery,
) -> Option<Attribution> {
    let (first, last) = (h.points.first()?, h.points.last()?);
    if h.status.state == State::Inconsistent {
        return None;
    }
    let range = (Some(first.date), Some(last.date));
    match read_attribution(s.engine.db(), id, range, q.known_at, &s.clock).await {
        Ok(a) => Some(a),
        Err(e) => {
            tracing::debug!(portfolio_id = %id, error = %e, "no attribution for the page");
            None
        }
    }
}

/// A component as people read it: the symbol itself, or what the
/// component stands for.
pub(super) fn component_label(name: &str) -> String {
    match name {
        "receivable" => "Dividends receivable".into(),
        "cash" => "Cash account".into(),
        "fees_and_taxes" => "Fees and taxes".into(),
        "interest" => "Interest".into(),
        other => other.strip_prefix("symbol:").unwrap_or(other).to_string(),
    }
}

/// One row of the table: a component, or the middle ones summed.
struct Row {
    label: String,
    pnl: Decimal,
    contribution: Decimal,
    /// The row's class (`mover`, `others`, `total`).
    class: &'static str,
}

fn dec(text: &str) -> Decimal {
    text.parse().unwrap_or_default()
}

/// The rows to show: the components by contribution, largest first (ties
/// by P&L, then by name, so the order is stable), the middle ones summed
/// when there are more than `2 × top`, and the totals.
fn rows(a: &Attribution, top: usize) -> Vec<Row> {
    let mut sorted: Vec<&ComponentView> = a.components.iter().collect();
    sorted.sort_by(|x, y| {
        dec(&y.contribution)
            .cmp(&dec(&x.contribution))
            .then(dec(&y.pnl).cmp(&dec(&x.pnl)))
            .then(x.component.cmp(&y.component))
    });
    let row = |c: &ComponentView| Row {
        label: component_label(&c.component),
        pnl: dec(&c.pnl),
        contribution: dec(&c.contribution),
        class: "mover",
    };
    let mut out: Vec<Row> = Vec::with_capacity(2 * top + 2);
    if sorted.len() <= 2 * top {
        out.extend(sorted.iter().map(|c| row(c)));
    } else {
        let middle = &sorted[top..sorted.len() - top];
        out.extend(sorted[..top].iter().map(|c| row(c)));
        out.push(Row {
            label: format!("The other {} components", middle.len()),
            pnl: middle.iter().map(|c| dec(&c.pnl)).sum(),
            contribution: middle.iter().map(|c| dec(&c.contribution)).sum(),
            class: "others",
        });
        out.extend(sorted[sorted.len() - top..].iter().map(|c| row(c)));
    }
    out.push(Row {
        label: "Total".into(),
        pnl: dec(&a.total.pnl),
        contribution: dec(&a.total.total_return),
        class: "total",
    });
    out
}

/// The "what moved it" card: the range, then a row per mover (its P&L in
/// money and its contribution to the return) and the totals; nothing
/// without an attribution.
pub(super) fn write_movers(h: &mut String, a: Option<&Attribution>, currency: &str) {
    let Some(a) = a else {
        return;
    };
    let _ = writeln!(
        h,
        "<div class=\"card scroll movers\"><h2>What moved it, {} to {}</h2>\
         <table><tr><th>Component</th><th class=\"r\">P&amp;L</th>\
         <th class=\"r\">Contribution</th></tr>",
        a.from, a.to
    );
    for r in rows(a, MOVERS) {
        let (pct, sign) = signed_pct(Some(r.contribution));
        let class = if sign.is_empty() {
            "num".to_string()
        } else {
            format!("num {sign}")
        };
        let _ = writeln!(
            h,
            "<tr class=\"{}\"><th scope=\"row\">{}</th><td class=\"{class}\">{}</td>\
             <td class=\"{class}\">{pct}</td></tr>",
            r.class,
            escape_html(&r.label),
            escape_html(&money(r.pnl, currency)),
        );
    }
    let _ = writeln!(
        h,
        "</table><p class=\"sub\">Each holding's, the cash account's and the costs' part of \
         the range's money gained and of its return, largest contribution first \
         (top and bottom {MOVERS}); the rows add up to the total. P&amp;L: the change in \
         value plus what the part paid out, less what was put into it.</p></div>"
    );
}

/// A symbol's P&L over the attributed range (the positions table's
/// column); `None` when the symbol had no value or flow in it.
pub(super) fn symbol_pnl(a: &Attribution, symbol: &str) -> Option<Decimal> {
    let name = format!("symbol:{symbol}");
    a.components
        .iter()
        .find(|c| c.component == name)
        .map(|c| dec(&c.pnl))
}

/// The table's own rules: right-aligned headers over the numbers, the
/// summed and the total rows set apart.
pub(super) const CSS_MOVERS: &str = "\
.movers th.r{text-align:right}\
.movers tr.others th{font-weight:400;color:#666;font-style:italic}\
.movers tr.total th,.movers tr.total td{font-weight:600;border-top:2px solid #c8ccd2}\
";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::chart::test_data::day;
    use crate::query::attribution::AttributionTotal;

    fn attribution(parts: &[(&str, &str, &str)], total: (&str, &str)) -> Attribution {
        Attribution {
            portfolio_id: "p".into(),
            from: day("2024-03-04"),
            to: day("2024-03-15"),
            total: AttributionTotal {
                pnl: total.0.into(),
                total_return: total.1.into(),
            },
            components: parts
                .iter()
                .map(|(c, p, x)| ComponentView {
                    component: (*c).into(),
                    pnl: (*p).into(),
                    contribution: (*x).into(),
                })
                .collect(),
        }
    }

    #[test]
    fn sorted_by_contribution_with_the_total() {
        let a = attribution(
            &[
                ("fees_and_taxes", "-5.00000000", "-0.004975124378"),
                ("symbol:AAA", "33.00000000", "0.028865288940"),
            ],
            ("28.00000000", "0.023890164562"),
        );
        let mut h = String::new();
        write_movers(&mut h, Some(&a), "USD");
        let aaa = h.find(">AAA</th>").unwrap();
        let fees = h.find(">Fees and taxes</th>").unwrap();
        let total = h.find(">Total</th>").unwrap();
        assert!(aaa < fees && fees < total, "{h}");
        assert!(h.contains("<td class=\"num up\">33.00 USD</td><td class=\"num up\">+2.89%</td>"));
        assert!(
            h.contains("<td class=\"num down\">-5.00 USD</td><td class=\"num down\">-0.50%</td>")
        );
        assert!(h.contains("<td class=\"num up\">28.00 USD</td><td class=\"num up\">+2.39%</td>"));
        assert!(h.contains("What moved it, 2024-03-04 to 2024-03-15"));
        assert_eq!(symbol_pnl(&a, "AAA"), Some(Decimal::new(33, 0)));
        assert_eq!(symbol_pnl(&a, "BBB"), None);
    }

    #[test]
    fn the_middle_is_summed_so_the_rows_add_up() {
        // 12 symbols, S00 … S11, S_k gaining k − 3.
        let parts: Vec<(String, String, String)> = (0..12)
            .map(|k: i64| {
                (
                    format!("symbol:S{k:02}"),
                    format!("{}.00000000", k - 3),
                    format!("{:.12}", Decimal::new(k - 3, 3)),
                )
            })
            .collect();
        let refs: Vec<(&str, &str, &str)> = parts
            .iter()
            .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
            .collect();
        let a = attribution(&refs, ("30.00000000", "0.030000000000"));
        let r = rows(&a, MOVERS);
        assert_eq!(r.len(), 2 * MOVERS + 2);
        let labels: Vec<&str> = r.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "S11",
                "S10",
                "S09",
                "S08",
                "S07",
                "The other 2 components",
                "S04",
                "S03",
                "S02",
                "S01",
                "S00",
                "Total"
            ]
        );
        assert_eq!(r[5].pnl, Decimal::new(5, 0), "S06 + S05 = 3 + 2");
        let shown: Decimal = r[..r.len() - 1].iter().map(|r| r.pnl).sum();
        assert_eq!(shown, r[r.len() - 1].pnl, "the rows add up to the total");
        let shown: Decimal = r[..r.len() - 1].iter().map(|r| r.contribution).sum();
        assert_eq!(shown, r[r.len() - 1].contribution);
    }

    #[test]
    fn labels() {
        assert_eq!(component_label("symbol:BRK.B"), "BRK.B");
        assert_eq!(component_label("cash"), "Cash account");
        assert_eq!(component_label("receivable"), "Dividends receivable");
    }
}
