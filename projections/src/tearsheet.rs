//! The tear sheet of a NAV curve (docs/valuation.md): the table of its
//! deepest drawdowns, trailing returns, value at risk, the shape of the
//! return distribution, and rolling volatility and Sharpe ratio.
//!
//! Everything here works on the same sampled returns as the time-weighted
//! statistics ([`crate::stats`]), in `f64` like them, except where dates or
//! peaks are decided: those compare exact NAVs, so a tie is a tie.
//!
//! Choices where docs/valuation.md is silent:
//! - A drawdown's peak is the day its high was first reached, as for
//!   `max_drawdown_peak`; so the table's first row always has the dates of
//!   `max_drawdown`, and a NAV that comes back exactly to its high and
//!   falls again opens a new row whose peak is that same first day.
//! - A drawdown below a non-positive high (everything lost) is left out, as
//!   `max_drawdown` leaves it out.

use chrono::{Datelike, Months, NaiveDate};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::sampling::{is_sampled, mean, ratio_minus_one, sample_std, to_f64, StatsQuery, MIN_SD};

/// How many drawdowns the table lists.
pub const DRAWDOWNS_LISTED: usize = 5;

/// The tear-sheet figures of [`crate::Statistics`] (flattened into it).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TearSheet {
    /// The deepest drawdowns, deepest first (at most [`DRAWDOWNS_LISTED`]).
    pub drawdowns: Vec<DrawdownPeriod>,
    /// Set by callers that can look back over the whole history
    /// ([`trailing`]); all null otherwise.
    pub trailing: Trailing,
    pub value_at_risk_95: Option<f64>,
    pub conditional_value_at_risk_95: Option<f64>,
    pub skew: Option<f64>,
    pub kurtosis: Option<f64>,
    pub best_day: Option<f64>,
    pub worst_day: Option<f64>,
    pub win_rate: Option<f64>,
    pub tail_ratio: Option<f64>,
}

/// One row of the drawdowns table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DrawdownPeriod {
    pub peak: NaiveDate,
    pub trough: NaiveDate,
    /// The first day back at the peak's NAV; null while under water.
    pub recovery: Option<NaiveDate>,
    /// trough NAV / peak NAV − 1, below 0.
    pub depth: f64,
    /// Calendar days from the peak to the recovery, or to the range's last
    /// record while under water.
    pub days: i64,
}

/// Returns up to the range's last record from the same calendar day some
/// months earlier (clamped to the month's end), from the end of the
/// previous year, and from the start; null when the history does not reach
/// back that far.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Trailing {
    #[serde(rename = "1m")]
    pub m1: Option<f64>,
    #[serde(rename = "3m")]
    pub m3: Option<f64>,
    #[serde(rename = "6m")]
    pub m6: Option<f64>,
    pub ytd: Option<f64>,
    #[serde(rename = "1y")]
    pub y1: Option<f64>,
    /// Annualised when it spans a year or more (always, unless clamped).
    #[serde(rename = "3y")]
    pub y3: Option<f64>,
    /// Annualised as `3y`.
    #[serde(rename = "5y")]
    pub y5: Option<f64>,
    /// From NAV 1 on the day before the first record; annualised when it
    /// spans a year or more.
    pub inception: Option<f64>,
}

/// The tear sheet of the sampled curve: `w0` on `w0_date` then `sampled`
/// (ascending), with `returns` its returns (one per sampled day) and
/// `last_day` the range's last record (sampled or not). Trailing returns
/// are left null: they look outside the range ([`trailing`]).
pub fn tear_sheet(
    w0: Decimal,
    w0_date: NaiveDate,
    sampled: &[(NaiveDate, Decimal)],
    returns: &[f64],
    last_day: NaiveDate,
) -> TearSheet {
    let mut sorted = returns.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (p5, p95) = (percentile(&sorted, 5.0), percentile(&sorted, 95.0));
    let (skew, kurtosis) = moments(returns);
    let (wins, moved) = returns.iter().fold((0usize, 0usize), |(w, m), r| {
        (w + usize::from(*r > 0.0), m + usize::from(*r != 0.0))
    });
    TearSheet {
        drawdowns: drawdown_table(w0, w0_date, sampled, last_day),
        trailing: Trailing::default(),
        value_at_risk_95: p5,
        conditional_value_at_risk_95: (!sorted.is_empty()).then(|| {
            // empyrical: the mean of the int((n − 1) · 0.05) + 1 lowest.
            let k = ((sorted.len() - 1) as f64 * 0.05) as usize;
            mean(&sorted[..=k])
        }),
        skew,
        kurtosis,
        best_day: sorted.last().copied(),
        worst_day: sorted.first().copied(),
        win_rate: (moved > 0).then(|| wins as f64 / moved as f64),
        tail_ratio: match (p95, p5) {
            (Some(hi), Some(lo)) if lo != 0.0 => Some(hi.abs() / lo.abs()),
            _ => None,
        },
    }
}

/// The q-th percentile of ascending `sorted`, interpolated linearly between
/// neighbours as numpy's default does (with its rounding: from the upper
/// neighbour when past half way); None when empty.
pub(crate) fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let at = (q / 100.0) * last as f64;
    let lo = (at.floor() as usize).min(last);
    let hi = (lo + 1).min(last);
    let t = at - lo as f64;
    let (a, b) = (sorted[lo], sorted[hi]);
    let d = b - a;
    Some(if t >= 0.5 {
        b - d * (1.0 - t)
    } else {
        a + d * t
    })
}

/// Skew and excess kurtosis, unbiased (pandas' `skew()` and `kurt()`); null
/// below four returns or with no dispersion.
fn moments(r: &[f64]) -> (Option<f64>, Option<f64>) {
    let n = r.len() as f64;
    if r.len() < 4 || sample_std(r).is_none_or(|s| s <= MIN_SD) {
        return (None, None);
    }
    let m = mean(r);
    let (mut s2, mut s3, mut s4) = (0.0, 0.0, 0.0);
    for x in r {
        let d = x - m;
        let d2 = d * d;
        s2 += d2;
        s3 += d2 * d;
        s4 += d2 * d2;
    }
    let skew = n * (n - 1.0).sqrt() / (n - 2.0) * (s3 / s2.powf(1.5));
    let kurt = n * (n + 1.0) * (n - 1.0) * s4 / ((n - 2.0) * (n - 3.0) * s2 * s2)
        - 3.0 * (n - 1.0) * (n - 1.0) / ((n - 2.0) * (n - 3.0));
    (Some(skew), Some(kurt))
}

/// One stretch under water: the high's first day, the first lowest day,
/// the first day back (all indices into W0..Wn) and the high.
struct UnderWater {
    peak: usize,
    trough: usize,
    recovery: Option<usize>,
    high: Decimal,
}

/// The deepest drawdowns of W0..Wn, as pyfolio's `gen_drawdown_table`
/// finds them. Its loop (take the lowest point left, cut out the stretch
/// under water around it, repeat) lists the stretches between two days at
/// the running high by their depth, the earlier first on a tie: found here
/// in one pass, then sorted.
pub fn drawdown_table(
    w0: Decimal,
    w0_date: NaiveDate,
    sampled: &[(NaiveDate, Decimal)],
    last_day: NaiveDate,
) -> Vec<DrawdownPeriod> {
    let at = |k: usize| {
        if k == 0 {
            (w0_date, w0)
        } else {
            sampled[k - 1]
        }
    };
    let mut stretches = Vec::new();
    let (mut high, mut peak) = (w0, 0);
    let mut trough: Option<usize> = None;
    for k in 1..=sampled.len() {
        let w = at(k).1;
        if w >= high {
            if let Some(t) = trough.take() {
                stretches.push(UnderWater {
                    peak,
                    trough: t,
                    recovery: Some(k),
                    high,
                });
            }
            if w > high {
                (high, peak) = (w, k);
            }
        } else if !matches!(trough, Some(t) if w >= at(t).1) {
            trough = Some(k);
        }
    }
    if let Some(t) = trough {
        stretches.push(UnderWater {
            peak,
            trough: t,
            recovery: None,
            high,
        });
    }
    let mut rows: Vec<(Decimal, UnderWater)> = stretches
        .into_iter()
        .filter(|s| s.high > Decimal::ZERO)
        .map(|s| (ratio_minus_one(at(s.trough).1, s.high), s))
        .filter(|(depth, _)| *depth < Decimal::ZERO)
        .collect();
    // Stable: equal depths keep their order in time.
    rows.sort_by_key(|r| r.0);
    rows.truncate(DRAWDOWNS_LISTED);
    rows.into_iter()
        .map(|(depth, s)| {
            let peak = at(s.peak).0;
            let recovery = s.recovery.map(|k| at(k).0);
            DrawdownPeriod {
                peak,
                trough: at(s.trough).0,
                recovery,
                depth: to_f64(depth),
                days: (recovery.unwrap_or(last_day) - peak).num_days(),
            }
        })
        .collect()
}

/// The days whose NAV [`trailing`] looks up for a range ending on `last`:
/// the same day 1, 3, 6, 12, 36 and 60 months earlier (clamped to the
/// month's end), then the last day of the previous year.
pub fn trailing_days(last: NaiveDate) -> [Option<NaiveDate>; 7] {
    let back = |m: u32| last.checked_sub_months(Months::new(m));
    [
        back(1),
        back(3),
        back(6),
        back(12),
        back(36),
        back(60),
        NaiveDate::from_ymd_opt(last.year() - 1, 12, 31),
    ]
}

/// Trailing returns to `last` (its day and exact NAV) for a history whose
/// first record is on `d0`; `nav_on` gives the exact NAV at the end of a
/// day from `d0` on (None: not known, and that return is null).
pub fn trailing(
    last: (NaiveDate, Decimal),
    d0: NaiveDate,
    nav_on: impl Fn(NaiveDate) -> Option<Decimal>,
) -> Trailing {
    let Some(start) = d0.pred_opt() else {
        return Trailing::default();
    };
    let from = |day: Option<NaiveDate>, annualise: bool| -> Option<f64> {
        let day = day?;
        let base = match day {
            d if d < start => return None,
            d if d == start => Decimal::ONE,
            d => nav_on(d)?,
        };
        if base <= Decimal::ZERO {
            return None;
        }
        let span = (last.0 - day).num_days();
        let r = to_f64(ratio_minus_one(last.1, base));
        if annualise && span >= 365 {
            let growth = 1.0 + r;
            (growth >= 0.0).then(|| growth.powf(365.0 / span as f64) - 1.0)
        } else {
            Some(r)
        }
    };
    let [m1, m3, m6, y1, y3, y5, ytd] = trailing_days(last.0);
    Trailing {
        m1: from(m1, false),
        m3: from(m3, false),
        m6: from(m6, false),
        ytd: from(ytd, false),
        y1: from(y1, false),
        y3: from(y3, true),
        y5: from(y5, true),
        inception: from(Some(start), true),
    }
}

/// Rolling figures of one point of the curve.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Rolling {
    pub volatility: Option<f64>,
    pub sharpe: Option<f64>,
}

/// For each record of `series` (the range, every calendar day, after W0 =
/// `w0`): the volatility and Sharpe ratio of the last `window` sampled
/// returns, annualised as the range's. Null until `window` returns are in;
/// a day the calendar does not sample carries the last sampled day's.
pub fn rolling(
    w0: Decimal,
    series: &[(NaiveDate, Decimal)],
    query: &StatsQuery,
    window: usize,
) -> Vec<Rolling> {
    let periods = query.calendar.periods_per_year();
    let rf_p = (1.0 + query.risk_free).powf(1.0 / periods) - 1.0;
    let mut returns: Vec<f64> = Vec::with_capacity(series.len());
    let mut prev = w0;
    let mut current = Rolling::default();
    let mut out = Vec::with_capacity(series.len());
    for (d, w) in series {
        if is_sampled(*d, query.calendar) {
            returns.push(to_f64(ratio_minus_one(*w, prev)));
            prev = *w;
            if window >= 2 && returns.len() >= window {
                let last = &returns[returns.len() - window..];
                let sd = sample_std(last).unwrap_or(0.0);
                current = Rolling {
                    volatility: Some(sd * periods.sqrt()),
                    sharpe: (sd > MIN_SD).then(|| (mean(last) - rf_p) / sd * periods.sqrt()),
                };
            }
        }
        out.push(current);
    }
    out
}
