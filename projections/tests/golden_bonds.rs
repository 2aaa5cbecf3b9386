//! What the bonds golden (`fixtures/golden/bonds.json`, SPEC §12.6) asks of
//! [`projections::bond`], before the fold uses it: the instruments' terms
//! build, and each portfolio's expected records are what the module's
//! amounts make of the position held (a number of bonds read off the
//! portfolio's own transactions) —
//!
//! - `accrued_interest` of every record: q · AI(d) · FX, at 8 places;
//! - on each coupon or maturity date without a trade, the payment the day
//!   starts with: `outflow` (cash `none`) or the day's change of `cash`
//!   (`tracked`) is q · (coupon + redemption at maturity) · FX.
//!
//! The fold's own bookkeeping (flows of trades, income, cost) is the fold's
//! test; this one pins the per-bond amounts it will be handed.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use projections::bond::{accrued_interest, coupon_dates, coupon_on, redemption_amount};
use projections::{money_text, BondTerms, DayCount, Frequency};
use rust_decimal::Decimal;
use serde_json::Value;

const GOLDEN: &str = include_str!("../../fixtures/golden/bonds.json");

fn date(v: &Value) -> NaiveDate {
    v.as_str().unwrap().parse().unwrap()
}

fn dec(v: &Value) -> Decimal {
    v.as_str().unwrap().parse().unwrap()
}

struct Bond {
    terms: BondTerms,
    currency: String,
}

/// An instrument event's bond fields as §12.1 writes them (`frequency` a
/// JSON number or a string of digits).
fn bond_of(v: &Value) -> Bond {
    let frequency = match &v["frequency"] {
        Value::Null => None,
        Value::Number(n) => Some(Frequency::try_from(n.as_u64().unwrap() as u32).unwrap()),
        Value::String(s) => Some(s.parse::<Frequency>().unwrap()),
        other => panic!("frequency {other}"),
    };
    let day_count = v["day_count"]
        .as_str()
        .map(|s| s.parse::<DayCount>().unwrap());
    let terms = BondTerms::new(
        dec(&v["face"]),
        dec(&v["coupon"]),
        frequency,
        day_count,
        date(&v["issue_date"]),
        date(&v["maturity"]),
        v.get("redemption").filter(|r| !r.is_null()).map(dec),
    )
    .unwrap();
    Bond {
        terms,
        currency: v["currency"].as_str().unwrap().to_owned(),
    }
}

/// The latest rate `from` → `to` dated on or before `d` (1 within a currency).
fn fx(json: &Value, from: &str, to: &str, d: NaiveDate) -> Decimal {
    if from == to {
        return Decimal::ONE;
    }
    json["fx"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["from"] == from && r["to"] == to && date(&r["date"]) <= d)
        .max_by_key(|r| date(&r["date"]))
        .map(|r| dec(&r["rate"]))
        .unwrap_or_else(|| panic!("no {from}->{to} rate on {d}"))
}

#[test]
fn bond_amounts_explain_the_expected_records() {
    let json: Value = serde_json::from_str(GOLDEN).unwrap();
    let bonds: BTreeMap<String, Bond> = json["instruments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["kind"] == "bond")
        .map(|v| (v["symbol"].as_str().unwrap().to_owned(), bond_of(v)))
        .collect();
    assert_eq!(bonds.len(), 7);

    let (mut accrued_checked, mut payments_checked, mut portfolios) = (0, 0, 0);
    for (id, p) in json["portfolios"].as_object().unwrap() {
        // (trade date, signed quantity) of the portfolio's trades in its bond.
        let trades: Vec<(NaiveDate, Decimal, &str)> = json["transactions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["portfolio_id"] == id.as_str() && t["symbol"].is_string())
            .map(|t| {
                let q = dec(&t["quantity"]);
                let signed = match t["type"].as_str().unwrap() {
                    "buy" | "transfer_in" => q,
                    "sell" | "transfer_out" => -q,
                    other => panic!("{other}"),
                };
                (
                    date(&t["trade_date"]),
                    signed,
                    t["symbol"].as_str().unwrap(),
                )
            })
            .collect();
        let symbol = trades[0].2;
        assert!(trades.iter().all(|t| t.2 == symbol), "{id}: one bond");
        let bond = &bonds[symbol];
        let terms = &bond.terms;
        let base = p["base_currency"].as_str().unwrap();
        // Held at the start of `d` (before its trades), and at its end (a
        // bond redeemed on its maturity is gone by the record).
        let held_before =
            |d: NaiveDate| -> Decimal { trades.iter().filter(|t| t.0 < d).map(|t| t.1).sum() };
        let held_after = |d: NaiveDate| -> Decimal {
            if d >= terms.maturity() {
                return Decimal::ZERO;
            }
            trades.iter().filter(|t| t.0 <= d).map(|t| t.1).sum()
        };

        let records: BTreeMap<NaiveDate, &Value> = p["expected_records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (date(&r["date"]), r))
            .collect();
        let tracked = match p["cash"].as_str().unwrap() {
            "tracked" => true,
            "none" => false,
            other => panic!("{other}"),
        };
        let mut paid_here = 0;
        for (&d, r) in &records {
            let rate = fx(&json, &bond.currency, base, d);
            let want = held_after(d) * accrued_interest(terms, d) * rate;
            assert_eq!(money_text(want), r["accrued_interest"], "{id} {d}");
            accrued_checked += 1;

            let coupon = coupon_on(terms, d).unwrap_or_default();
            let redeemed = if d == terms.maturity() {
                redemption_amount(terms)
            } else {
                Decimal::ZERO
            };
            let traded = trades.iter().any(|t| t.0 == d);
            let pays = coupon + redeemed;
            if traded || pays.is_zero() || held_before(d).is_zero() {
                continue;
            }
            let payment = held_before(d) * pays * rate;
            if tracked {
                let Some(prev) = d.pred_opt().and_then(|y| records.get(&y)) else {
                    continue;
                };
                // Both balances are rounded at 8 places: their difference
                // may be one unit of the last place off the exact payment.
                let change = dec(&r["cash"]) - dec(&prev["cash"]);
                let unit = Decimal::new(1, 8);
                assert!(
                    (change - payment).abs() <= unit,
                    "{id} {d} cash {change} {payment}"
                );
            } else {
                assert_eq!(r["outflow"], money_text(payment), "{id} {d} outflow");
            }
            paid_here += 1;
        }
        // Every coupon or maturity date the records sample while the bond is
        // held (and not traded) was checked above.
        let held_on_coupon_dates = coupon_dates(terms)
            .chain(std::iter::once(terms.maturity()))
            .filter(|n| records.contains_key(n) && !held_before(*n).is_zero())
            .filter(|n| !trades.iter().any(|t| t.0 == *n))
            .count();
        if terms.coupon_rate().is_zero() {
            assert_eq!(coupon_dates(terms).count(), 0);
        }
        assert_eq!(
            paid_here, held_on_coupon_dates,
            "{id}: every payment day checked"
        );
        payments_checked += paid_here;
        portfolios += 1;
    }
    assert_eq!(portfolios, 9);
    let records: usize = json["portfolios"]
        .as_object()
        .unwrap()
        .values()
        .map(|p| p["expected_records"].as_array().unwrap().len())
        .sum();
    assert_eq!(accrued_checked, records);
    assert!(
        payments_checked >= 10,
        "{payments_checked} payments checked"
    );
}
