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

/// A bond's accrued interest day after day, as [`accrued_interest`]
/// gives it: the coupon period is found once and kept while the days stay
/// in it (a fold asks for every day in turn).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accrual {
    terms: BondTerms,
    period: Option<CouponPeriod>,
}

impl Accrual {
    pub fn new(terms: BondTerms) -> Accrual {
        Accrual {
            terms,
            period: None,
        }
    }

    /// The terms it accrues by.
    pub fn terms(&self) -> &BondTerms {
        &self.terms
    }

    /// [`accrued_interest`] on `day`.
    pub fn on(&mut self, day: NaiveDate) -> Decimal {
        let terms = &self.terms;
        let Some(coupon) = terms.coupon else {
            return Decimal::ZERO;
        };
        if !(terms.issue_date..terms.maturity).contains(&day) {
            return Decimal::ZERO;
        }
        let period = match self.period {
            Some(p) if p.start <= day && day < p.end => p,
            _ => {
                let p = terms.period(coupon, day);
                self.period = Some(p);
                p
            }
        };
        terms.accrual(coupon, &period, day)
    }
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
mod tests;
