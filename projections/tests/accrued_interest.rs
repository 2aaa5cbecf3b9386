//! The accrued-interest golden table (`fixtures/golden/accrued-interest-table.json`,
//! SPEC §12.6) through [`projections::bond`]: for every row, a bond of face
//! 100 on the row's terms, its accrued interest on the row's date rounded
//! half-even at 10 places (the table's precision) against the contract's
//! value digit for digit, and against QuantLib's wherever the table says
//! the two agree. Where it says they do not (ACT/ACT-ICMA short first
//! periods whose notional start the contract and QuantLib place
//! differently), the module must give the contract's value, not QuantLib's.

use chrono::NaiveDate;
use projections::bond::accrued_interest;
use projections::{BondTerms, DayCount, Frequency};
use rust_decimal::{Decimal, RoundingStrategy};
use serde_json::Value;

const TABLE: &str = include_str!("../../fixtures/golden/accrued-interest-table.json");

/// Rows in the table (its `rows`), and those where QuantLib disagrees.
const ROWS: usize = 2107;
const QUANTLIB_DIFFERS: usize = 6;

fn text(v: &Value, key: &str) -> String {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} in {v}"))
        .to_owned()
}

fn date(v: &Value, key: &str) -> NaiveDate {
    text(v, key).parse().unwrap()
}

fn dec(v: &Value, key: &str) -> Decimal {
    text(v, key).parse().unwrap()
}

/// Written at the table's 10 places, half-even.
fn at_10(d: Decimal) -> String {
    let mut r = d.round_dp_with_strategy(10, RoundingStrategy::MidpointNearestEven);
    r.rescale(10);
    r.to_string()
}

#[test]
fn accrued_interest_matches_the_golden_table() {
    let json: Value = serde_json::from_str(TABLE).unwrap();
    assert_eq!(json["spec"], "§12.6");
    let face = dec(&json, "face");
    let rows = json["rows"].as_array().unwrap();

    let (mut checked, mut against_quantlib, mut quantlib_differs) = (0, 0, 0);
    let mut failures = Vec::new();
    for row in rows {
        let frequency = Frequency::try_from(row["frequency"].as_u64().unwrap() as u32).unwrap();
        let day_count: DayCount = text(row, "day_count").parse().unwrap();
        let terms = BondTerms::new(
            face,
            dec(row, "coupon"),
            Some(frequency),
            Some(day_count),
            date(row, "issue_date"),
            date(row, "maturity"),
            None,
        )
        .unwrap();
        let got = at_10(accrued_interest(&terms, date(row, "date")));
        checked += 1;
        if got != text(row, "accrued") {
            failures.push(format!(
                "contract {} got {got}: {row}",
                text(row, "accrued")
            ));
        }
        if row["same"].as_bool().unwrap() {
            against_quantlib += 1;
            if got != text(row, "quantlib") {
                failures.push(format!(
                    "QuantLib {} got {got}: {row}",
                    text(row, "quantlib")
                ));
            }
        } else {
            quantlib_differs += 1;
            if got == text(row, "quantlib") {
                failures.push(format!("QuantLib's value, not the contract's: {row}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(checked, ROWS);
    assert_eq!(quantlib_differs, QUANTLIB_DIFFERS);
    assert_eq!(against_quantlib, ROWS - QUANTLIB_DIFFERS);
}
