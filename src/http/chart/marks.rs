//! The ex-dates on the portfolio page's chart (docs/valuation.md): a dashed
//! vertical line over both panels, with a small ▼ at the top, on each day
//! of the range where a split or corporate action moved a position, and a
//! `<title>` saying what each did ([`ExMark`], [`mark_layer`]). The day's
//! hover column stays under it: the mark answers only over its own few
//! pixels.

use std::fmt::Write as _;

use chrono::NaiveDate;

use super::format::{amount_str, money};
use crate::http::html::escape_html;
use crate::query::actions::{ExDate, ExDateKind};

/// One marked day and what happened on it, for people.
#[derive(Debug, Clone, PartialEq)]
pub struct ExMark {
    pub day: NaiveDate,
    /// One line per split or action of the day.
    pub lines: Vec<String>,
}

/// The colour of the marks: apart from the NAV's blue, the drawdown's
/// orange and the benchmark's green.
const MARK_COLOR: &str = "#6a3d9a";

/// The marks of `dates` (in the order they applied), one per day; money in
/// `currency`, the portfolio's.
pub(super) fn ex_marks(dates: &[ExDate], currency: &str) -> Vec<ExMark> {
    let mut out: Vec<ExMark> = Vec::new();
    for x in dates {
        let line = describe(&x.what, currency);
        match out.last_mut() {
            Some(m) if m.day == x.date => m.lines.push(line),
            _ => out.push(ExMark {
                day: x.date,
                lines: vec![line],
            }),
        }
    }
    out
}

/// One split or action in words.
fn describe(what: &ExDateKind, currency: &str) -> String {
    let qty = |d: rust_decimal::Decimal| amount_str(&d.to_string(), 0);
    let e = match what {
        ExDateKind::Split(symbol, n, d) => return format!("split {n}:{d} of {symbol}"),
        ExDateKind::Action(e) => e,
    };
    let new = e.new_symbol.as_ref().map_or("", |s| s.as_str());
    match e.kind {
        projections::ActionKind::SpinOff => format!(
            "spin-off: {} {new} from {} {}, cost moved {}",
            qty(e.new_quantity),
            qty(e.quantity),
            e.symbol,
            money(e.cost_moved, currency)
        ),
        projections::ActionKind::SymbolChange => {
            format!(
                "symbol change: {} {} \u{2192} {new}",
                qty(e.quantity),
                e.symbol
            )
        }
        projections::ActionKind::Merger => {
            let mut t = format!("merger: {} {}", qty(e.quantity), e.symbol);
            if e.new_symbol.is_some() {
                let _ = write!(t, " into {} {new}", qty(e.new_quantity));
            }
            match &e.cash {
                Some(c) if c.amount.is_zero() && e.new_symbol.is_none() => {
                    t.push_str(", written off")
                }
                Some(c) => {
                    let _ = write!(
                        t,
                        ", cash {} (realized {})",
                        money(c.amount, c.currency.as_str()),
                        money(c.realized_pnl, currency)
                    );
                }
                None => {}
            }
            t
        }
    }
}

/// The marks' SVG, over the panels whose plotting area spans `top ..
/// bottom` pixels: `x_of` gives a day's x; days outside `first ..= last`
/// (the days drawn) are left out.
pub(super) fn mark_layer(
    marks: &[ExMark],
    (first, last): (NaiveDate, NaiveDate),
    x_of: impl Fn(NaiveDate) -> i32,
    (top, bottom): (i32, i32),
) -> String {
    let shown: Vec<&ExMark> = marks
        .iter()
        .filter(|m| first <= m.day && m.day <= last)
        .collect();
    if shown.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "<style>.ex rect{{fill:#000;fill-opacity:0}}.ex rect:hover{{fill-opacity:.1}}</style>\
         <g class=\"ex\" stroke=\"{MARK_COLOR}\" fill=\"{MARK_COLOR}\">"
    );
    for m in shown {
        let x = x_of(m.day);
        let title = format!("{}\n{}", m.day, m.lines.join("\n"));
        let _ = write!(
            s,
            "<line x1=\"{x}\" y1=\"{top}\" x2=\"{x}\" y2=\"{bottom}\" stroke-width=\"1\" \
             stroke-dasharray=\"4 3\"/>\
             <path d=\"M{} {top}L{} {top}L{x} {}Z\" stroke=\"none\"/>\
             <rect x=\"{}\" y=\"{top}\" width=\"9\" height=\"{}\" stroke=\"none\">\
             <title>{}</title></rect>",
            x - 5,
            x + 5,
            top + 8,
            x - 4,
            bottom - top,
            escape_html(&title)
        );
    }
    s.push_str("</g>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use projections::{ActionCash, ActionEffect, ActionKind, Currency, Symbol};
    use rust_decimal::Decimal;

    fn day(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    fn effect(kind: ActionKind, new: Option<&str>) -> ActionEffect {
        ActionEffect {
            event_id: uuid::Uuid::nil(),
            kind,
            symbol: Symbol::parse("PAR").unwrap(),
            new_symbol: new.map(|s| Symbol::parse(s).unwrap()),
            quantity: Decimal::from(100),
            cost: Decimal::from(6000),
            quantity_after: Decimal::ZERO,
            cost_after: Decimal::ZERO,
            new_quantity: "50.0000000000".parse().unwrap(),
            cost_moved: Decimal::from(1200),
            cash: None,
        }
    }

    #[test]
    fn each_kind_in_words_and_one_mark_per_day() {
        let mut merger = effect(ActionKind::Merger, None);
        merger.cash = Some(ActionCash {
            currency: Currency::parse("EUR").unwrap(),
            amount: Decimal::from(1500),
            fx_rate: Decimal::ONE,
            value: Decimal::from(1500),
            cost: Decimal::from(6000),
            realized_pnl: Decimal::from(-4500),
        });
        let mut write_off = merger.clone();
        write_off.cash.as_mut().unwrap().amount = Decimal::ZERO;
        let dates = [
            (day("2024-06-06"), ExDateKind::Split("PAR".into(), 2, 1)),
            (
                day("2024-06-06"),
                ExDateKind::Action(Box::new(effect(ActionKind::SpinOff, Some("KID")))),
            ),
            (
                day("2024-06-07"),
                ExDateKind::Action(Box::new(effect(ActionKind::SymbolChange, Some("NEW")))),
            ),
            (day("2024-06-08"), ExDateKind::Action(Box::new(merger))),
            (day("2024-06-09"), ExDateKind::Action(Box::new(write_off))),
        ]
        .map(|(date, what)| ExDate { date, what });
        let marks = ex_marks(&dates, "USD");
        let lines: Vec<Vec<String>> = marks.iter().map(|m| m.lines.clone()).collect();
        assert_eq!(
            lines,
            [
                vec![
                    "split 2:1 of PAR".to_string(),
                    "spin-off: 50 KID from 100 PAR, cost moved 1,200.00 USD".into()
                ],
                vec!["symbol change: 100 PAR \u{2192} NEW".into()],
                vec!["merger: 100 PAR, cash 1,500.00 EUR (realized -4,500.00 USD)".into()],
                vec!["merger: 100 PAR, written off".into()],
            ]
        );
        // Only the days drawn are marked, each with its title.
        let svg = mark_layer(
            &marks,
            (day("2024-06-07"), day("2024-06-08")),
            |d| (d - day("2024-06-01")).num_days() as i32 * 10,
            (20, 300),
        );
        assert_eq!(svg.matches("<line").count(), 2);
        assert!(
            svg.contains("x1=\"60\" y1=\"20\" x2=\"60\" y2=\"300\""),
            "{svg}"
        );
        assert!(svg.contains("<title>2024-06-07\nsymbol change: 100 PAR \u{2192} NEW</title>"));
        assert!(!svg.contains("2024-06-06"));
        let none = mark_layer(
            &marks,
            (day("2024-07-01"), day("2024-07-02")),
            |_| 0,
            (0, 1),
        );
        assert_eq!(none, "");
    }
}
