//! Bonds' terms, coupon schedules, day counts and accrued interest (SPEC
//! §12.1's `bond` row and §12.6), as pure functions of a bond's terms and a
//! day: what the fold needs to value a bond (accrued interest on any day),
//! to price a trade (the accrued interest of its trade date), and to pay
//! what a bond pays without events (the coupon of a schedule date, the
//! redemption at maturity).
//!
//! The schedule is counted back from the maturity: coupon date k is the
//! maturity minus k·(12/f) months, each computed from the maturity itself
//! (never from the previous date, so a month-end clamp does not propagate)
//! and clamped to the end of its month, unadjusted. The coupon dates are
//! those after the issue date; the next one back is the first period's
//! notional start, which gives a short first period its reference length.
//!
//! Nothing here rounds. Every amount is one product divided once (face ·
//! rate · days / denominator), so it is the exact rational to
//! `rust_decimal`'s 28 significant digits; the caller rounds what it
//! reports (§3's money places). The golden table of §12.6 gives its values
//! rounded half-even at 10 places, and they are not exact at 10 places
//! (e.g. 100 × 0.00935 × 1/360 = 0.0025972222…), so rounding earlier here
//! would only add a second rounding to the fold's.

use std::fmt;
use std::str::FromStr;

use chrono::{Datelike, Months, NaiveDate};
use rust_decimal::Decimal;

/// A bond's terms refused (§12.1): the dead letter names [`BondError::field`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BondError {
    #[error("{0} must be > 0")]
    NotPositive(&'static str),
    #[error("coupon must be within 0 … 1")]
    CouponOutOfRange,
    #[error("{0} is required when the coupon is > 0")]
    Missing(&'static str),
    #[error("maturity must be after issue_date")]
    MaturityNotAfterIssue,
    #[error("unknown day_count {0:?}")]
    UnknownDayCount(String),
    #[error("frequency must be 1, 2, 4 or 12, not {0:?}")]
    UnknownFrequency(String),
    /// A face so large that face × rate × days or face × redemption would
    /// overflow a `Decimal`, or a schedule reaching outside the dates
    /// `chrono` represents: refused so that every function here is total.
    #[error("{0} is out of range")]
    OutOfRange(&'static str),
}

impl BondError {
    /// The instrument field the error is about, as §12.1 names it.
    pub fn field(&self) -> &'static str {
        match self {
            BondError::NotPositive(field) | BondError::Missing(field) => field,
            BondError::OutOfRange(field) => field,
            BondError::CouponOutOfRange => "coupon",
            BondError::MaturityNotAfterIssue => "maturity",
            BondError::UnknownDayCount(_) => "day_count",
            BondError::UnknownFrequency(_) => "frequency",
        }
    }
}

/// How a bond counts the interest of a stretch of days (§12.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DayCount {
    /// `30/360`, bond basis: d₁ = 31 becomes 30, then d₂ = 31 becomes 30
    /// when d₁ is 30.
    Thirty360,
    /// `30E/360`: both days above 30 become 30.
    Thirty360European,
    /// `ACT/360`.
    Act360,
    /// `ACT/365F`.
    Act365Fixed,
    /// `ACT/ACT-ICMA`: the coupon times the share of the period's actual days.
    ActActIcma,
}

impl DayCount {
    pub const ALL: [DayCount; 5] = [
        DayCount::Thirty360,
        DayCount::Thirty360European,
        DayCount::Act360,
        DayCount::Act365Fixed,
        DayCount::ActActIcma,
    ];

    /// The contract's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DayCount::Thirty360 => "30/360",
            DayCount::Thirty360European => "30E/360",
            DayCount::Act360 => "ACT/360",
            DayCount::Act365Fixed => "ACT/365F",
            DayCount::ActActIcma => "ACT/ACT-ICMA",
        }
    }
}

impl FromStr for DayCount {
    type Err = BondError;

    /// Exactly the contract's spellings: an instrument is refused, not
    /// guessed at, when its day count is written any other way.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DayCount::ALL
            .into_iter()
            .find(|dc| dc.as_str() == s)
            .ok_or_else(|| BondError::UnknownDayCount(s.to_owned()))
    }
}

impl fmt::Display for DayCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Coupons a year (§12.1: 1, 2, 4 or 12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Frequency {
    Annual,
    SemiAnnual,
    Quarterly,
    Monthly,
}

impl Frequency {
    pub fn per_year(self) -> u32 {
        match self {
            Frequency::Annual => 1,
            Frequency::SemiAnnual => 2,
            Frequency::Quarterly => 4,
            Frequency::Monthly => 12,
        }
    }

    /// The length of a period in months (12/f).
    pub fn months(self) -> u32 {
        12 / self.per_year()
    }
}

impl TryFrom<u32> for Frequency {
    type Error = BondError;

    fn try_from(n: u32) -> Result<Self, Self::Error> {
        match n {
            1 => Ok(Frequency::Annual),
            2 => Ok(Frequency::SemiAnnual),
            4 => Ok(Frequency::Quarterly),
            12 => Ok(Frequency::Monthly),
            _ => Err(BondError::UnknownFrequency(n.to_string())),
        }
    }
}

impl FromStr for Frequency {
    type Err = BondError;

    /// A string of digits (§12.1 lets numbers be written as strings);
    /// `u32::from_str` alone would also take a sign.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unknown = || BondError::UnknownFrequency(s.to_owned());
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(unknown());
        }
        s.parse::<u32>()
            .map_err(|_| unknown())
            .and_then(|n| Frequency::try_from(n).map_err(|_| unknown()))
    }
}

/// What a coupon-paying bond pays: a rate > 0, how often, counted how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Coupon {
    rate: Decimal,
    frequency: Frequency,
    day_count: DayCount,
}

/// One bond's terms (§12.1), validated: every function of this module is
/// total on them. Amounts are per bond of `face`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BondTerms {
    face: Decimal,
    /// `None`: a zero-coupon bond (§12.1's c = 0, whose frequency and day
    /// count are ignored).
    coupon: Option<Coupon>,
    issue_date: NaiveDate,
    maturity: NaiveDate,
    /// Percent of face.
    redemption: Decimal,
    /// How many coupon dates the schedule has; the date one step further
    /// back (index `periods`) is the notional start. 0 for a zero-coupon.
    periods: u32,
}

/// The largest number of days (actual or 30/360) a period of at most
/// twelve months can count, rounded up: what the face is checked against
/// so that face × rate × days cannot overflow.
const MAX_PERIOD_DAYS: u32 = 1000;

impl BondTerms {
    /// The terms of §12.1, refused as it refuses them. `frequency` and
    /// `day_count` are required when `coupon` > 0 and ignored when it is 0;
    /// `redemption` defaults to 100 (% of face).
    pub fn new(
        face: Decimal,
        coupon: Decimal,
        frequency: Option<Frequency>,
        day_count: Option<DayCount>,
        issue_date: NaiveDate,
        maturity: NaiveDate,
        redemption: Option<Decimal>,
    ) -> Result<BondTerms, BondError> {
        if face <= Decimal::ZERO {
            return Err(BondError::NotPositive("face"));
        }
        if coupon < Decimal::ZERO || coupon > Decimal::ONE {
            return Err(BondError::CouponOutOfRange);
        }
        let redemption = redemption.unwrap_or(Decimal::ONE_HUNDRED);
        if redemption <= Decimal::ZERO {
            return Err(BondError::NotPositive("redemption"));
        }
        if maturity <= issue_date {
            return Err(BondError::MaturityNotAfterIssue);
        }
        let coupon = if coupon.is_zero() {
            None
        } else {
            Some(Coupon {
                rate: coupon,
                frequency: frequency.ok_or(BondError::Missing("frequency"))?,
                day_count: day_count.ok_or(BondError::Missing("day_count"))?,
            })
        };
        if face.checked_mul(Decimal::from(MAX_PERIOD_DAYS)).is_none() {
            return Err(BondError::OutOfRange("face"));
        }
        if face.checked_mul(redemption).is_none() {
            return Err(BondError::OutOfRange("redemption"));
        }
        let mut terms = BondTerms {
            face,
            coupon,
            issue_date,
            maturity,
            redemption,
            periods: 0,
        };
        if coupon.is_some() {
            // The issue date lies in the schedule's range (after the
            // notional start), so the index of the last schedule date on or
            // before it is the number of coupon dates after it.
            terms.periods = terms
                .index_on_or_before(issue_date)
                .ok_or(BondError::OutOfRange("issue_date"))?;
        }
        Ok(terms)
    }

    pub fn face(&self) -> Decimal {
        self.face
    }

    /// The annual coupon rate as a fraction (0 for a zero-coupon bond).
    pub fn coupon_rate(&self) -> Decimal {
        self.coupon.map_or(Decimal::ZERO, |c| c.rate)
    }

    /// `None` for a zero-coupon bond.
    pub fn frequency(&self) -> Option<Frequency> {
        self.coupon.map(|c| c.frequency)
    }

    /// `None` for a zero-coupon bond.
    pub fn day_count(&self) -> Option<DayCount> {
        self.coupon.map(|c| c.day_count)
    }

    pub fn issue_date(&self) -> NaiveDate {
        self.issue_date
    }

    pub fn maturity(&self) -> NaiveDate {
        self.maturity
    }

    /// Percent of face paid at maturity.
    pub fn redemption(&self) -> Decimal {
        self.redemption
    }

    /// Schedule date k (0 the maturity), or `None` past chrono's range.
    /// `checked_sub_months` clamps to the end of the month, which is the
    /// contract's clamp.
    fn date_at(&self, coupon: Coupon, k: u32) -> Option<NaiveDate> {
        let months = k.checked_mul(coupon.frequency.months())?;
        self.maturity.checked_sub_months(Months::new(months))
    }

    /// Schedule date k for k ≤ `periods`: in range since `new` found the
    /// notional start (index `periods`), the earliest of them.
    fn date(&self, coupon: Coupon, k: u32) -> NaiveDate {
        self.date_at(coupon, k)
            .expect("schedule dates up to the notional start are in range (BondTerms::new)")
    }

    /// The smallest k whose schedule date is ≤ `day`, for `day` ≤ the
    /// maturity; `None` when that date falls outside chrono's range.
    ///
    /// Date k lies in month index (maturity's) − k·step, so with K the
    /// whole periods between the maturity's month and `day`'s, date K is in
    /// `day`'s month or up to a period later and date K + 1 in an earlier
    /// month: the answer is K or K + 1, no search needed.
    fn index_on_or_before(&self, day: NaiveDate) -> Option<u32> {
        let coupon = self.coupon?;
        let months = month_index(self.maturity) - month_index(day);
        let whole = u32::try_from(months / i64::from(coupon.frequency.months())).ok()?;
        if self.date_at(coupon, whole)? <= day {
            Some(whole)
        } else {
            self.date_at(coupon, whole + 1).map(|_| whole + 1)
        }
    }

    /// The coupon period [p, n) holding `day`, for issue ≤ `day` < maturity.
    fn period(&self, coupon: Coupon, day: NaiveDate) -> CouponPeriod {
        let j = self
            .index_on_or_before(day)
            .expect("a day from the issue date on lies after the notional start");
        let start = self.date(coupon, j);
        CouponPeriod {
            start,
            end: self.date(coupon, j - 1),
            accrual_start: start.max(self.issue_date),
        }
    }

    /// The accrued interest of a period from its accrual start to `day`
    /// (start ≤ `day` ≤ end), per bond. One multiplication chain and one
    /// division, so nothing is rounded but the last digit.
    fn accrual(&self, coupon: Coupon, period: &CouponPeriod, day: NaiveDate) -> Decimal {
        let a = period.accrual_start;
        let interest = self.face * coupon.rate;
        match coupon.day_count {
            DayCount::ActActIcma => {
                let reference = Decimal::from(coupon.frequency.per_year())
                    * Decimal::from(actual_days(period.start, period.end));
                interest * Decimal::from(actual_days(a, day)) / reference
            }
            DayCount::Thirty360 => interest * Decimal::from(days_30_360(a, day, false)) / D360,
            DayCount::Thirty360European => {
                interest * Decimal::from(days_30_360(a, day, true)) / D360
            }
            DayCount::Act360 => interest * Decimal::from(actual_days(a, day)) / D360,
            DayCount::Act365Fixed => interest * Decimal::from(actual_days(a, day)) / D365,
        }
    }
}

const D360: Decimal = Decimal::from_parts(360, 0, 0, false, 0);
const D365: Decimal = Decimal::from_parts(365, 0, 0, false, 0);

fn month_index(d: NaiveDate) -> i64 {
    i64::from(d.year()) * 12 + i64::from(d.month0())
}

fn actual_days(from: NaiveDate, to: NaiveDate) -> i64 {
    (to - from).num_days()
}

/// D of `30/360` (bond basis) or, `european`, of `30E/360` (§12.6).
fn days_30_360(from: NaiveDate, to: NaiveDate, european: bool) -> i64 {
    let (mut d1, mut d2) = (from.day(), to.day());
    if european {
        d1 = d1.min(30);
        d2 = d2.min(30);
    } else {
        if d1 == 31 {
            d1 = 30;
        }
        if d2 == 31 && d1 == 30 {
            d2 = 30;
        }
    }
    360 * i64::from(to.year() - from.year())
        + 30 * (i64::from(to.month()) - i64::from(from.month()))
        + (i64::from(d2) - i64::from(d1))
}

/// A coupon period [start, end) of the schedule and where its accrual
/// starts: the issue date in the first period when the bond was issued
/// after the period's (notional) start, else the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CouponPeriod {
    pub start: NaiveDate,
    pub end: NaiveDate,
    pub accrual_start: NaiveDate,
}

/// The coupon dates, ascending: the first after the issue date through the
/// maturity. Empty for a zero-coupon bond.
pub fn coupon_dates(terms: &BondTerms) -> impl DoubleEndedIterator<Item = NaiveDate> {
    let terms = *terms;
    terms
        .coupon
        .into_iter()
        .flat_map(move |c| (0..terms.periods).rev().map(move |k| terms.date(c, k)))
}

/// The first period's notional start: the schedule date one step before
/// the first coupon date (on or before the issue date). `None` for a
/// zero-coupon bond.
pub fn notional_start(terms: &BondTerms) -> Option<NaiveDate> {
    terms.coupon.map(|c| terms.date(c, terms.periods))
}

/// The coupon period holding `day`: `None` before the issue date, from the
/// maturity on, and for a zero-coupon bond.
pub fn period_of(terms: &BondTerms, day: NaiveDate) -> Option<CouponPeriod> {
    let coupon = terms.coupon?;
    (terms.issue_date..terms.maturity)
        .contains(&day)
        .then(|| terms.period(coupon, day))
}

/// The first coupon date after `day` (the first coupon date for a day
/// before the issue): `None` from the maturity on and for a zero-coupon.
pub fn next_coupon_date(terms: &BondTerms, day: NaiveDate) -> Option<NaiveDate> {
    period_of(terms, day.max(terms.issue_date)).map(|p| p.end)
}

/// Accrued interest per bond on `day` (§12.6): 0 before the issue date, on
/// a coupon date, from the maturity on and for a zero-coupon bond. Not
/// rounded (see the module doc).
pub fn accrued_interest(terms: &BondTerms, day: NaiveDate) -> Decimal {
    match (terms.coupon, period_of(terms, day)) {
        (Some(coupon), Some(period)) => terms.accrual(coupon, &period, day),
        _ => Decimal::ZERO,
    }
}

/// The coupon per bond paid on `day` when it is a coupon date (the
/// maturity included): the whole period's accrual, its formula evaluated at
/// the period's end. `None` on any other day and for a zero-coupon bond.
pub fn coupon_on(terms: &BondTerms, day: NaiveDate) -> Option<Decimal> {
    let coupon = terms.coupon?;
    if day <= terms.issue_date || day > terms.maturity {
        return None;
    }
    let j = terms.index_on_or_before(day)?;
    if terms.date(coupon, j) != day {
        return None;
    }
    // The period ending on `day` holds the day before it.
    let period = terms.period(coupon, day.pred_opt()?);
    Some(terms.accrual(coupon, &period, day))
}

/// What a bond redeems at on its maturity date: face × redemption / 100.
pub fn redemption_amount(terms: &BondTerms) -> Decimal {
    terms.face * terms.redemption / Decimal::ONE_HUNDRED
}

#[cfg(test)]
mod tests {
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
        let mut r =
            d.round_dp_with_strategy(10, rust_decimal::RoundingStrategy::MidpointNearestEven);
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
        let new =
            |face: &str, c: &str, f: Option<Frequency>, dc: Option<DayCount>, r: Option<&str>| {
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
}
