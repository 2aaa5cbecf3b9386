//! The page's tax-lot tables, under a lot method only: the open lots at
//! the range's end (under the positions) and what the year of that day
//! realized, by lot, with its short-term, long-term and unclassified
//! totals (docs/valuation.md, lots). Under `average` the positions table
//! already says it all.

use std::fmt::Write as _;

use super::format::{amount_str, money_str, NULL};
use crate::http::html::escape_html;
use crate::query::lots::{Lots, Realized};

/// What the page shows of a portfolio's lots.
#[derive(Debug)]
pub(super) struct LotTables {
    pub(super) lots: Lots,
    pub(super) realized: Realized,
}

/// A lot id shortened for a table: an event id's last 12 digits (the
/// full id is the cell's title).
fn short_lot(lot: Option<&str>) -> String {
    match lot {
        None => NULL.to_string(),
        Some(l) if l.len() == 36 => format!(
            "<span title=\"{}\">…{}</span>",
            escape_html(l),
            escape_html(&l[24..])
        ),
        Some(l) => escape_html(l),
    }
}

pub(super) fn write_lot_tables(h: &mut String, t: &LotTables, currency: &str) {
    let m = |text: &str| escape_html(&money_str(text, currency));
    let _ = writeln!(
        h,
        "<div class=\"card scroll\"><h2>{}</h2><table><tr><th>Symbol</th><th>Lot</th>\
         <th>Opened</th><th>Quantity</th><th>Cost</th><th>Value</th><th>Unrealized</th>\
         <th>Term</th></tr>",
        escape_html(&format!("Lots on {} ({})", t.lots.date, t.lots.method))
    );
    for l in &t.lots.lots {
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\">{}</th><td>{}</td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            escape_html(&l.symbol),
            short_lot(l.lot.as_deref()),
            l.open_date.map_or_else(|| NULL.to_string(), |d| d.to_string()),
            escape_html(&amount_str(&l.quantity, 0)),
            m(&l.cost),
            m(&l.value),
            m(&l.unrealized_pnl),
            l.term.unwrap_or(NULL),
        );
    }
    let _ = writeln!(h, "</table></div>");
    let r = &t.realized;
    let _ = writeln!(
        h,
        "<div class=\"card scroll\"><h2>{}</h2><table><tr><th>Date</th><th>Kind</th>\
         <th>Symbol</th><th>Lot</th><th>Quantity</th><th>Proceeds</th><th>Cost</th>\
         <th>Gain</th><th>Term</th></tr>",
        escape_html(&format!("Realized {} to {}", r.from, r.to))
    );
    for x in &r.realizations {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><th scope=\"row\">{}</th><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            x.date,
            escape_html(x.kind),
            escape_html(&x.symbol),
            short_lot(x.lot.as_deref()),
            escape_html(&amount_str(&x.quantity, 0)),
            m(&x.proceeds),
            m(&x.cost),
            m(&x.gain),
            x.term.unwrap_or(NULL),
        );
    }
    let totals = &r.totals;
    for (name, v) in [
        ("Short-term", &totals.short_term),
        ("Long-term", &totals.long_term),
        ("Unclassified", &totals.unclassified),
        ("Total", &totals.total),
    ] {
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\" colspan=\"7\">{name}</th><td class=\"num\">{}</td><td></td></tr>",
            m(v)
        );
    }
    let _ = writeln!(h, "</table></div>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::lots::{Lots, Realized};
    use projections::{LotRow, RealizedRow, RealizedTotals};

    #[test]
    fn the_tables_show_each_lot_and_the_totals_by_term() {
        let t = LotTables {
            lots: Lots {
                portfolio_id: "p".into(),
                date: "2024-03-01".parse().unwrap(),
                method: "fifo".into(),
                lots: vec![LotRow {
                    symbol: "XYZ".into(),
                    lot: Some("00000000-0000-4000-8015-000000000009".into()),
                    open_date: Some("2023-06-01".parse().unwrap()),
                    quantity: "5".into(),
                    cost: "600.00000000".into(),
                    average_cost: "120.00000000".into(),
                    value: "550.00000000".into(),
                    unrealized_pnl: "-50.00000000".into(),
                    term: Some("short"),
                }],
            },
            realized: Realized {
                portfolio_id: "p".into(),
                from: "2024-01-01".parse().unwrap(),
                to: "2024-03-01".parse().unwrap(),
                method: "fifo".into(),
                realizations: vec![RealizedRow {
                    date: "2024-03-01".parse().unwrap(),
                    event_id: None,
                    kind: "sale",
                    symbol: "XYZ".into(),
                    lot: Some("00000000-0000-4000-8015-000000000008".into()),
                    open_date: Some("2023-01-10".parse().unwrap()),
                    quantity: "10".into(),
                    proceeds: "1100.00000000".into(),
                    cost: "1000.00000000".into(),
                    gain: "100.00000000".into(),
                    term: Some("long"),
                }],
                totals: RealizedTotals {
                    short_term: "-50.00000000".into(),
                    long_term: "100.00000000".into(),
                    unclassified: "0.00000000".into(),
                    total: "50.00000000".into(),
                },
            },
        };
        let mut h = String::new();
        write_lot_tables(&mut h, &t, "USD");
        assert!(h.contains("Lots on 2024-03-01 (fifo)"), "{h}");
        assert!(h.contains("…000000000009"), "{h}");
        assert!(h.contains("Realized 2024-01-01 to 2024-03-01"), "{h}");
        let long = h.find("Long-term").unwrap();
        assert!(h[long..].contains("100.00"), "{h}");
        assert!(h.contains(">long<") && h.contains(">short<"), "{h}");
    }
}
