//! The bond module's unit tests: schedules, day counts, accrued interest,
//! coupons and redemption on hand-counted examples, and the schedule
//! against a separate reading of the contract's wording.

use super::*;

fn day(s: &str) -> NaiveDate {
    s.parse().unwrap()
}

fn dec(s: &str) -> Decimal {
    s.parse().unwrap()
}

fn int(n: i64) -> Decimal {
    Decimal::from(n)
}

fn bond(face: &str, c: &str, f: u32, dc: &str, issue: &str, maturity: &str) -> BondTerms {
    BondTerms::new(
        dec(face),
        dec(c),
        Some(Frequency::try_from(f).unwrap()),
        Some(dc.parse().unwrap()),
        day(issue),
        day(maturity),
        None,
    )
    .unwrap()
}

fn dates(list: &[&str]) -> Vec<NaiveDate> {
    list.iter().map(|s| day(s)).collect()
}

fn at_10(d: Decimal) -> String {
    let mut r = d.round_dp_with_strategy(10, rust_decimal::RoundingStrategy::MidpointNearestEven);
    r.rescale(10);
    r.to_string()
}

/// bonds.json's BOND5: 5 % semi-annual 30/360, face 100, 2024-01-15 → 2027-01-15.
fn bond5() -> BondTerms {
    bond("100", "0.05", 2, "30/360", "2024-01-15", "2027-01-15")
}

/// bonds.json's ICMA4: a short first period [2024-02-15 notional, 2024-08-15).
fn icma4() -> BondTerms {
    bond(
        "1000",
        "0.0425",
        2,
        "ACT/ACT-ICMA",
        "2024-04-10",
        "2034-02-15",
    )
}

/// bonds.json's BME: a month-end maturity under 30/360.
fn bme(dc: &str) -> BondTerms {
    bond("1000", "0.04", 2, dc, "2024-02-29", "2026-08-31")
}

fn zero() -> BondTerms {
    BondTerms::new(
        int(1000),
        Decimal::ZERO,
        Some(Frequency::Quarterly),
        Some(DayCount::Act360),
        day("2024-01-02"),
        day("2024-12-31"),
        None,
    )
    .unwrap()
}

/// The schedule as the contract words it, k by k, independently of the
/// module's direct index: maturity − k·step months (chrono clamps to the
/// month's end) until a date on or before the issue date.
fn naive_schedule(maturity: NaiveDate, issue: NaiveDate, step: u32) -> Vec<NaiveDate> {
    let mut out = Vec::new();
    for k in 0.. {
        let d = maturity - Months::new(k * step);
        out.push(d);
        if d <= issue {
            break;
        }
    }
    out.reverse();
    out
}

// ---- parsing and validation ----

#[test]
fn day_counts_parse_from_the_contracts_spellings_only() {
    let spelled = ["30/360", "30E/360", "ACT/360", "ACT/365F", "ACT/ACT-ICMA"];
    for (s, dc) in spelled.iter().zip(DayCount::ALL) {
        assert_eq!(s.parse::<DayCount>(), Ok(dc));
        assert_eq!(dc.to_string(), *s);
    }
    for bad in ["act/360", "30/360 ", "ACT/365", "ACT/ACT", "30E360", ""] {
        let err = bad.parse::<DayCount>().unwrap_err();
        assert_eq!(err, BondError::UnknownDayCount(bad.to_owned()));
        assert_eq!(err.field(), "day_count");
    }
}

#[test]
fn frequencies_are_one_two_four_or_twelve() {
    let all = [
        (1, Frequency::Annual, 12),
        (2, Frequency::SemiAnnual, 6),
        (4, Frequency::Quarterly, 3),
        (12, Frequency::Monthly, 1),
    ];
    for (n, f, months) in all {
        assert_eq!(Frequency::try_from(n), Ok(f));
        assert_eq!(n.to_string().parse::<Frequency>(), Ok(f));
        assert_eq!(f.per_year(), n);
        assert_eq!(f.months(), months);
    }
    assert_eq!("02".parse::<Frequency>(), Ok(Frequency::SemiAnnual));
    for n in [0, 3, 6, 24] {
        let err = Frequency::try_from(n).unwrap_err();
        assert_eq!(err, BondError::UnknownFrequency(n.to_string()));
        assert_eq!(err.field(), "frequency");
    }
    for bad in ["", "+2", "-2", "2.0", " 2", "two", "99999999999"] {
        assert_eq!(
            bad.parse::<Frequency>(),
            Err(BondError::UnknownFrequency(bad.to_owned()))
        );
    }
}

#[test]
fn terms_are_refused_as_the_contract_refuses_them() {
    let new = |face: &str, c: &str, f: Option<Frequency>, dc: Option<DayCount>, r: Option<&str>| {
        BondTerms::new(
            dec(face),
            dec(c),
            f,
            dc,
            day("2024-01-15"),
            day("2027-01-15"),
            r.map(dec),
        )
    };
    let (f, dc) = (Some(Frequency::SemiAnnual), Some(DayCount::Thirty360));
    let refused = [
        (new("0", "0.05", f, dc, None), "face"),
        (new("-100", "0.05", f, dc, None), "face"),
        (new("100", "-0.0001", f, dc, None), "coupon"),
        (new("100", "1.0001", f, dc, None), "coupon"),
        (new("100", "0.05", None, dc, None), "frequency"),
        (new("100", "0.05", f, None, None), "day_count"),
        (new("100", "0.05", f, dc, Some("0")), "redemption"),
        (new("100", "0.05", f, dc, Some("-1")), "redemption"),
    ];
    for (result, field) in refused {
        assert_eq!(result.unwrap_err().field(), field);
    }
    assert_eq!(
        new("0", "0.05", f, dc, None),
        Err(BondError::NotPositive("face"))
    );
    assert_eq!(
        new("100", "0.05", None, dc, None),
        Err(BondError::Missing("frequency"))
    );
    // The bounds are inclusive, and a zero coupon needs neither
    // frequency nor day count.
    assert_eq!(
        new("100", "1", f, dc, None).unwrap().coupon_rate(),
        Decimal::ONE
    );
    let zero = new("100", "0", None, None, None).unwrap();
    assert_eq!(zero.coupon_rate(), Decimal::ZERO);
    assert_eq!(zero.frequency(), None);
    assert_eq!(zero.day_count(), None);

    for maturity in ["2024-01-15", "2024-01-14"] {
        let err = BondTerms::new(
            int(100),
            dec("0.05"),
            f,
            dc,
            day("2024-01-15"),
            day(maturity),
            None,
        )
        .unwrap_err();
        assert_eq!(err, BondError::MaturityNotAfterIssue);
        assert_eq!(err.field(), "maturity");
    }
    let one_day = BondTerms::new(
        int(100),
        dec("0.05"),
        f,
        dc,
        day("2024-01-15"),
        day("2024-01-16"),
        None,
    )
    .unwrap();
    assert_eq!(
        coupon_dates(&one_day).collect::<Vec<_>>(),
        dates(&["2024-01-16"])
    );
}

#[test]
fn terms_whose_amounts_could_overflow_are_refused() {
    let (f, dc) = (Some(Frequency::SemiAnnual), Some(DayCount::Thirty360));
    let (issue, maturity) = (day("2024-01-15"), day("2027-01-15"));
    let huge = BondTerms::new(Decimal::MAX, dec("0.05"), f, dc, issue, maturity, None);
    assert_eq!(huge, Err(BondError::OutOfRange("face")));
    // face × 1000 fits, face × redemption does not.
    let face = dec("1e25");
    let high = BondTerms::new(face, dec("1"), f, dc, issue, maturity, Some(dec("1e5")));
    assert_eq!(high.unwrap_err().field(), "redemption");
    // The largest face accepted: every amount of a whole year's period at
    // a coupon of 1 is computable.
    let largest = Decimal::MAX / int(i64::from(MAX_PERIOD_DAYS));
    let terms = BondTerms::new(
        largest,
        Decimal::ONE,
        Some(Frequency::Annual),
        dc,
        issue,
        maturity,
        None,
    )
    .unwrap();
    // Exact to the last of Decimal's 28 digits, which here are units.
    let near = |x: Decimal| (x - largest).abs() <= Decimal::ONE;
    assert!(near(coupon_on(&terms, day("2025-01-15")).unwrap()));
    assert!(near(redemption_amount(&terms)));
    assert!(accrued_interest(&terms, day("2024-07-15")) > largest / int(3));
    // A schedule whose notional start chrono cannot represent.
    let first = NaiveDate::MIN;
    let early = BondTerms::new(
        int(100),
        dec("0.05"),
        f,
        dc,
        first,
        first + Months::new(3),
        None,
    );
    assert_eq!(early, Err(BondError::OutOfRange("issue_date")));
    let zero = BondTerms::new(
        int(100),
        Decimal::ZERO,
        None,
        None,
        first,
        first + Months::new(3),
        None,
    );
    assert!(
        zero.is_ok(),
        "a zero-coupon bond has no schedule to reach back"
    );
}

#[test]
fn getters_give_the_terms_back() {
    let terms = BondTerms::new(
        int(1000),
        dec("0.0425"),
        Some(Frequency::Quarterly),
        Some(DayCount::Act365Fixed),
        day("2024-04-10"),
        day("2034-02-15"),
        Some(dec("101.5")),
    )
    .unwrap();
    assert_eq!(terms.face(), int(1000));
    assert_eq!(terms.coupon_rate(), dec("0.0425"));
    assert_eq!(terms.frequency(), Some(Frequency::Quarterly));
    assert_eq!(terms.day_count(), Some(DayCount::Act365Fixed));
    assert_eq!(terms.issue_date(), day("2024-04-10"));
    assert_eq!(terms.maturity(), day("2034-02-15"));
    assert_eq!(terms.redemption(), dec("101.5"));
    assert_eq!(bond5().redemption(), Decimal::ONE_HUNDRED);
}

// ---- schedule ----

#[test]
fn a_regular_schedule_starts_at_the_issue_date() {
    let terms = bond5();
    let want = dates(&[
        "2024-07-15",
        "2025-01-15",
        "2025-07-15",
        "2026-01-15",
        "2026-07-15",
        "2027-01-15",
    ]);
    assert_eq!(coupon_dates(&terms).collect::<Vec<_>>(), want);
    assert_eq!(notional_start(&terms), Some(day("2024-01-15")));
    assert_eq!(coupon_dates(&terms).next_back(), Some(terms.maturity()));
}

#[test]
fn dates_are_clamped_to_their_months_end_each_from_the_maturity() {
    // Counted from 08-31 each time: after 02-28 comes 08-31 again, not
    // 08-28 (an iterative schedule would stay on the 28th).
    let terms = bme("30/360");
    let want = dates(&[
        "2024-08-31",
        "2025-02-28",
        "2025-08-31",
        "2026-02-28",
        "2026-08-31",
    ]);
    assert_eq!(coupon_dates(&terms).collect::<Vec<_>>(), want);
    // Feb 31 of a leap year clamps to the 29th, the issue date itself.
    assert_eq!(notional_start(&terms), Some(day("2024-02-29")));

    let quarterly = bond("100", "0.04", 4, "30E/360", "2024-05-15", "2025-05-31");
    let want = dates(&[
        "2024-05-31",
        "2024-08-31",
        "2024-11-30",
        "2025-02-28",
        "2025-05-31",
    ]);
    assert_eq!(coupon_dates(&quarterly).collect::<Vec<_>>(), want);
    assert_eq!(notional_start(&quarterly), Some(day("2024-02-29")));

    // A maturity on the 30th stays on the 30th (no end-of-month rule).
    let thirtieth = bond("100", "0.04", 12, "ACT/360", "2024-12-20", "2025-04-30");
    let want = dates(&[
        "2024-12-30",
        "2025-01-30",
        "2025-02-28",
        "2025-03-30",
        "2025-04-30",
    ]);
    assert_eq!(coupon_dates(&thirtieth).collect::<Vec<_>>(), want);
    assert_eq!(notional_start(&thirtieth), Some(day("2024-11-30")));
}

#[test]
fn a_short_first_period_has_a_notional_start_before_the_issue() {
    let terms = icma4();
    let got: Vec<_> = coupon_dates(&terms).collect();
    assert_eq!(got.len(), 20);
    assert_eq!(got[0], day("2024-08-15"));
    assert_eq!(got[1], day("2025-02-15"));
    assert_eq!(got[19], day("2034-02-15"));
    assert_eq!(notional_start(&terms), Some(day("2024-02-15")));
    assert_eq!(
        period_of(&terms, day("2024-05-13")),
        Some(CouponPeriod {
            start: day("2024-02-15"),
            end: day("2024-08-15"),
            accrual_start: day("2024-04-10"),
        })
    );
    assert_eq!(
        period_of(&terms, day("2024-08-15")),
        Some(CouponPeriod {
            start: day("2024-08-15"),
            end: day("2025-02-15"),
            accrual_start: day("2024-08-15"),
        })
    );
    // Shorter than one period: the maturity is the only coupon date.
    let short = bond(
        "100",
        "0.06687",
        2,
        "ACT/ACT-ICMA",
        "2023-06-07",
        "2023-10-20",
    );
    assert_eq!(
        coupon_dates(&short).collect::<Vec<_>>(),
        dates(&["2023-10-20"])
    );
    assert_eq!(notional_start(&short), Some(day("2023-04-20")));
}

#[test]
fn an_issue_a_day_after_a_schedule_date_starts_a_long_way_back() {
    let terms = bond("100", "0.05", 2, "30/360", "2024-01-16", "2027-01-15");
    assert_eq!(coupon_dates(&terms).next(), Some(day("2024-07-15")));
    assert_eq!(notional_start(&terms), Some(day("2024-01-15")));
    let terms = bond("100", "0.05", 2, "30/360", "2024-01-14", "2027-01-15");
    assert_eq!(coupon_dates(&terms).next(), Some(day("2024-01-15")));
    assert_eq!(notional_start(&terms), Some(day("2023-07-15")));
}

#[test]
fn schedules_match_the_contracts_wording_date_by_date() {
    let maturities = [
        "2030-01-31",
        "2030-02-28",
        "2028-02-29",
        "2030-03-30",
        "2030-06-15",
        "2029-12-31",
    ];
    let issues = [
        "2019-12-31",
        "2020-02-29",
        "2020-03-01",
        "2021-08-30",
        "2027-11-15",
        "2029-11-30",
    ];
    for f in [1, 2, 4, 12] {
        for m in maturities {
            for i in issues {
                if day(i) >= day(m) {
                    continue;
                }
                let terms = bond("100", "0.03", f, "ACT/360", i, m);
                let naive = naive_schedule(day(m), day(i), 12 / f);
                let (start, coupons) = naive.split_first().unwrap();
                let got: Vec<_> = coupon_dates(&terms).collect();
                assert_eq!(got, coupons, "f {f} issue {i} maturity {m}");
                assert_eq!(notional_start(&terms), Some(*start));
                // Every day of the bond's life lies in the period the
                // naive schedule says, and its next coupon date ends it.
                let mut d = terms.issue_date();
                while d < terms.maturity() {
                    let at = naive.partition_point(|x| *x <= d);
                    let want = CouponPeriod {
                        start: naive[at - 1],
                        end: naive[at],
                        accrual_start: naive[at - 1].max(terms.issue_date()),
                    };
                    assert_eq!(period_of(&terms, d), Some(want), "{d} f {f} {i} {m}");
                    assert_eq!(next_coupon_date(&terms, d), Some(naive[at]));
                    assert_eq!(coupon_on(&terms, d).is_some(), naive[1..].contains(&d));
                    d = d + chrono::Days::new(17);
                }
            }
        }
    }
}

#[test]
fn a_long_monthly_schedule() {
    let terms = bond("100", "0.03", 12, "ACT/365F", "1979-06-15", "2017-07-31");
    let got: Vec<_> = coupon_dates(&terms).collect();
    assert_eq!(got.len(), (2017 - 1979) * 12 + 2);
    assert_eq!(got[0], day("1979-06-30"));
    assert_eq!(got[1], day("1979-07-31"));
    assert_eq!(notional_start(&terms), Some(day("1979-05-31")));
    assert!(got.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(
        next_coupon_date(&terms, day("2001-02-27")),
        Some(day("2001-02-28"))
    );
    assert_eq!(
        next_coupon_date(&terms, day("2001-02-28")),
        Some(day("2001-03-31"))
    );
}

#[test]
fn periods_and_next_coupon_dates_at_the_edges() {
    let terms = icma4();
    assert_eq!(period_of(&terms, day("2024-04-09")), None);
    assert_eq!(
        period_of(&terms, day("2024-04-10")).map(|p| p.accrual_start),
        Some(day("2024-04-10"))
    );
    assert_eq!(
        period_of(&terms, day("2034-02-14")).map(|p| (p.start, p.end)),
        Some((day("2033-08-15"), day("2034-02-15")))
    );
    assert_eq!(period_of(&terms, day("2034-02-15")), None);
    assert_eq!(period_of(&terms, day("2040-01-01")), None);

    assert_eq!(
        next_coupon_date(&terms, day("2020-01-01")),
        Some(day("2024-08-15"))
    );
    assert_eq!(
        next_coupon_date(&terms, day("2024-04-10")),
        Some(day("2024-08-15"))
    );
    assert_eq!(
        next_coupon_date(&terms, day("2024-08-14")),
        Some(day("2024-08-15"))
    );
    assert_eq!(
        next_coupon_date(&terms, day("2024-08-15")),
        Some(day("2025-02-15"))
    );
    assert_eq!(
        next_coupon_date(&terms, day("2034-02-14")),
        Some(day("2034-02-15"))
    );
    assert_eq!(next_coupon_date(&terms, day("2034-02-15")), None);
    assert_eq!(next_coupon_date(&terms, day("2035-01-01")), None);
}

// ---- day counts ----

#[test]
fn thirty_360_bond_basis_and_european() {
    let cases = [
        // from, to, bond basis D, 30E D
        ("2024-01-31", "2024-03-31", 60, 60),
        ("2024-01-30", "2024-03-31", 60, 60),
        ("2024-01-29", "2024-03-31", 62, 61),
        ("2024-02-29", "2024-03-31", 32, 31),
        ("2024-01-31", "2024-02-29", 29, 29),
        ("2023-12-31", "2024-01-31", 30, 30),
        ("2024-01-15", "2024-03-04", 49, 49),
        ("2024-03-31", "2024-03-31", 0, 0),
        ("2024-03-30", "2024-03-31", 0, 0),
        ("2024-03-15", "2025-03-15", 360, 360),
        ("2020-08-31", "2021-02-28", 178, 178),
        ("2021-02-28", "2021-08-31", 183, 182),
    ];
    for (from, to, bond_basis, european) in cases {
        assert_eq!(
            days_30_360(day(from), day(to), false),
            bond_basis,
            "{from} {to}"
        );
        assert_eq!(
            days_30_360(day(from), day(to), true),
            european,
            "{from} {to}"
        );
    }
}

#[test]
fn accrued_interest_30_360() {
    // bonds.json: 100 × 0.05 × 49/360 = 0.6805555556, QuantLib's too.
    let terms = bond5();
    let ai = accrued_interest(&terms, day("2024-03-04"));
    assert_eq!(ai, int(100) * dec("0.05") * int(49) / int(360));
    assert_eq!(at_10(ai), "0.6805555556");
    // 2024-05-01: D = 30·4 − 14 = 106; 2024-08-01 (after 07-15): D = 16.
    assert_eq!(
        accrued_interest(&terms, day("2024-05-01")),
        int(5) * int(106) / int(360)
    );
    assert_eq!(
        accrued_interest(&terms, day("2024-08-01")),
        int(5) * int(16) / int(360)
    );
    // From a period start on the 31st: d₁ → 30, and d₂ = 31 → 30.
    let terms = bme("30/360");
    assert_eq!(
        accrued_interest(&terms, day("2024-10-31")),
        int(40) * int(60) / int(360)
    );
    // From the 28th to the 31st: d₂ stays 31 in bond basis…
    assert_eq!(
        accrued_interest(&terms, day("2025-03-31")),
        int(40) * int(33) / int(360)
    );
    // …but not in 30E/360.
    let terms = bme("30E/360");
    assert_eq!(
        accrued_interest(&terms, day("2025-03-31")),
        int(40) * int(32) / int(360)
    );
    assert_eq!(
        accrued_interest(&terms, day("2024-10-31")),
        int(40) * int(60) / int(360)
    );
}

#[test]
fn accrued_interest_actual_over_360_and_365() {
    let terms = bond("1000", "0.06", 2, "ACT/360", "2024-03-15", "2027-03-15");
    // 18 actual days from the issue.
    assert_eq!(accrued_interest(&terms, day("2024-04-02")), int(3));
    assert_eq!(
        accrued_interest(&terms, day("2024-09-14")),
        int(60) * int(183) / int(360)
    );
    let terms = bond("1000", "0.03", 1, "ACT/365F", "2024-02-20", "2029-02-20");
    assert_eq!(
        accrued_interest(&terms, day("2024-03-20")),
        int(30) * int(29) / int(365)
    );
    // 365 actual days of a leap year's period, over 365.
    assert_eq!(accrued_interest(&terms, day("2025-02-19")), int(30));
    assert_eq!(
        accrued_interest(&terms, day("2025-02-21")),
        int(30) / int(365)
    );
}

#[test]
fn accrued_interest_act_act_icma() {
    let terms = icma4();
    // bonds.json: 1000 × 0.02125 × 33/182 in the short first period,
    // measured against the notional period's 182 days.
    let ai = accrued_interest(&terms, day("2024-05-13"));
    assert_eq!(ai, dec("21.25") * int(33) / int(182));
    assert_eq!(at_10(ai), "3.8530219780");
    // Half of a regular 184-day period is half the coupon, exactly.
    assert_eq!(accrued_interest(&terms, day("2024-11-15")), dec("10.625"));
    // 2025-02-15 → 2025-08-15: 181 days.
    assert_eq!(
        accrued_interest(&terms, day("2025-02-16")),
        dec("21.25") / int(181)
    );
}

#[test]
fn accrued_interest_is_zero_before_the_issue_on_coupon_dates_and_after() {
    for terms in [bond5(), icma4(), bme("30/360"), bme("30E/360")] {
        let issue = terms.issue_date();
        assert_eq!(
            accrued_interest(&terms, issue.pred_opt().unwrap()),
            Decimal::ZERO
        );
        assert_eq!(accrued_interest(&terms, day("1990-01-01")), Decimal::ZERO);
        assert_eq!(accrued_interest(&terms, issue), Decimal::ZERO);
        for n in coupon_dates(&terms) {
            assert_eq!(accrued_interest(&terms, n), Decimal::ZERO, "{n}");
            assert!(accrued_interest(&terms, n.pred_opt().unwrap()) > Decimal::ZERO);
        }
        let after = terms.maturity().succ_opt().unwrap();
        assert_eq!(accrued_interest(&terms, after), Decimal::ZERO);
        assert_eq!(accrued_interest(&terms, day("2099-01-01")), Decimal::ZERO);
    }
    // The day before a short first period's issue lies in the period but
    // accrues nothing.
    assert_eq!(accrued_interest(&icma4(), day("2024-04-09")), Decimal::ZERO);
    assert!(accrued_interest(&icma4(), day("2024-04-11")) > Decimal::ZERO);
}

#[test]
fn actual_day_counts_accrue_the_same_amount_every_day_of_a_period() {
    for dc in ["ACT/360", "ACT/365F", "ACT/ACT-ICMA"] {
        let terms = bond("1000", "0.05", 4, dc, "2024-01-10", "2026-03-31");
        for n in coupon_dates(&terms) {
            let period = period_of(&terms, n.pred_opt().unwrap()).unwrap();
            let coupon = coupon_on(&terms, n).unwrap();
            let days = actual_days(period.accrual_start, n);
            let mut d = period.accrual_start;
            let mut before = Decimal::ZERO;
            while d < n {
                let next = d.succ_opt().unwrap();
                let after = if next == n {
                    coupon
                } else {
                    accrued_interest(&terms, next)
                };
                assert_eq!(
                    ((after - before) * int(days)).round_dp(20),
                    coupon.round_dp(20),
                    "{dc} {d}"
                );
                before = after;
                d = next;
            }
        }
    }
}

// ---- coupons and redemption ----

#[test]
fn coupons_are_the_whole_periods_accrual() {
    let terms = bond5();
    let coupons: Vec<_> = coupon_dates(&terms).map(|n| coupon_on(&terms, n)).collect();
    assert_eq!(coupons, vec![Some(dec("2.5")); 6]);

    // bonds.json: D = 182, 178, 183 (then 178, 183), QuantLib's too.
    let terms = bme("30/360");
    let want: Vec<_> = [182, 178, 183, 178, 183]
        .into_iter()
        .map(|d| Some(int(40) * int(d) / int(360)))
        .collect();
    let got: Vec<_> = coupon_dates(&terms).map(|n| coupon_on(&terms, n)).collect();
    assert_eq!(got, want);
    assert_eq!(at_10(got[0].unwrap()), "20.2222222222");
    // 30E/360 counts the 31st as the 30th even after a 28th.
    let terms = bme("30E/360");
    let want: Vec<_> = [181, 178, 182, 178, 182]
        .into_iter()
        .map(|d| Some(int(40) * int(d) / int(360)))
        .collect();
    let got: Vec<_> = coupon_dates(&terms).map(|n| coupon_on(&terms, n)).collect();
    assert_eq!(got, want);

    // bonds.json: ACT/360 pays the period's actual days.
    let terms = bond("1000", "0.06", 2, "ACT/360", "2024-03-15", "2027-03-15");
    assert_eq!(
        coupon_on(&terms, day("2024-09-15")),
        Some(int(60) * int(184) / int(360))
    );
    assert_eq!(
        coupon_on(&terms, day("2025-03-15")),
        Some(int(60) * int(181) / int(360))
    );
    let terms = bond("1000", "0.03", 1, "ACT/365F", "2024-02-20", "2029-02-20");
    assert_eq!(
        coupon_on(&terms, day("2025-02-20")),
        Some(int(30) * int(366) / int(365))
    );
    assert_eq!(coupon_on(&terms, day("2026-02-20")), Some(int(30)));
}

#[test]
fn icma_pays_a_regular_coupon_and_less_for_a_short_first_period() {
    let terms = icma4();
    let got: Vec<_> = coupon_dates(&terms)
        .map(|n| coupon_on(&terms, n).unwrap())
        .collect();
    // bonds.json: 21.25 × 127/182 on 2024-08-15, then 21.25 each.
    assert_eq!(got[0], dec("21.25") * int(127) / int(182));
    assert_eq!(at_10(got[0]), "14.8282967033");
    assert!(got[1..].iter().all(|c| *c == dec("21.25")));
    // A bond shorter than one period: [maturity − period, maturity).
    let terms = bond(
        "100",
        "0.06687",
        2,
        "ACT/ACT-ICMA",
        "2023-06-07",
        "2023-10-20",
    );
    assert_eq!(
        coupon_on(&terms, day("2023-10-20")),
        Some(dec("6.687") * int(135) / int(2 * 183))
    );
}

#[test]
fn coupons_fall_on_schedule_dates_only() {
    let terms = icma4();
    for not_a_coupon in [
        "2024-02-15", // the notional start
        "2024-04-10", // the issue
        "2024-08-14",
        "2024-08-16",
        "2034-02-16",
        "2034-08-15", // where the next would be
        "2023-08-15",
    ] {
        assert_eq!(coupon_on(&terms, day(not_a_coupon)), None, "{not_a_coupon}");
    }
    assert!(coupon_on(&terms, day("2034-02-15")).is_some());
    // A regular bond's notional start is its issue date: no coupon there.
    assert_eq!(coupon_on(&bond5(), day("2024-01-15")), None);
    let mut d = day("2024-01-01");
    let mut paid = Vec::new();
    while d <= day("2027-06-30") {
        if let Some(c) = coupon_on(&bond5(), d) {
            paid.push((d, c));
        }
        d = d.succ_opt().unwrap();
    }
    let want: Vec<_> = coupon_dates(&bond5()).map(|n| (n, dec("2.5"))).collect();
    assert_eq!(paid, want);
}

#[test]
fn a_zero_coupon_bond_accrues_and_pays_nothing_but_its_redemption() {
    let terms = zero();
    assert_eq!(terms.frequency(), None, "ignored when the coupon is 0");
    assert_eq!(terms.day_count(), None);
    assert_eq!(coupon_dates(&terms).count(), 0);
    assert_eq!(notional_start(&terms), None);
    let mut d = day("2023-12-01");
    while d <= day("2025-01-31") {
        assert_eq!(accrued_interest(&terms, d), Decimal::ZERO, "{d}");
        assert_eq!(coupon_on(&terms, d), None, "{d}");
        assert_eq!(period_of(&terms, d), None, "{d}");
        assert_eq!(next_coupon_date(&terms, d), None, "{d}");
        d = d.succ_opt().unwrap();
    }
    assert_eq!(redemption_amount(&terms), int(1000));
}

#[test]
fn redemption_is_a_percentage_of_face() {
    assert_eq!(redemption_amount(&bond5()), int(100));
    let terms = BondTerms::new(
        int(1000),
        dec("0.02"),
        Some(Frequency::Annual),
        Some(DayCount::Thirty360European),
        day("2023-06-30"),
        day("2024-06-30"),
        Some(dec("101.5")),
    )
    .unwrap();
    assert_eq!(redemption_amount(&terms), int(1015));
    assert_eq!(coupon_on(&terms, day("2024-06-30")), Some(int(20)));
}
