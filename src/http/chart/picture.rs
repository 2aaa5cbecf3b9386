//! What a picture shows: [`Picture`] (the recorded NAVs, and optionally
//! the range's [`Base`]: rebased to 1 and/or a benchmark line from W0),
//! and [`prepare`], which turns it into the series drawn — finite values,
//! one per day, day-sorted, starting on the base day when there is one —
//! with what the legend says.

use chrono::NaiveDate;

/// What [`render`](super::render) draws: the recorded NAVs by day, and
/// optionally the range's [`Base`] (a rebased curve and/or a benchmark
/// line).
#[derive(Debug, Clone, Copy)]
pub struct Picture<'a> {
    pub title: &'a str,
    /// (day, recorded NAV).
    pub nav: &'a [(NaiveDate, f64)],
    pub base: Option<Base<'a>>,
    /// The ex-dates of splits and corporate actions to mark (none outside
    /// the portfolio page).
    pub marks: &'a [super::marks::ExMark],
}

/// The range's starting point, W0 on the day before its first record
/// (docs/chart.md). With a base the picture starts on that day, where
/// every line has the same value: 1 when `rebased`, W0 otherwise.
#[derive(Debug, Clone, Copy)]
pub struct Base<'a> {
    /// W0's day: the day before the range's first record.
    pub day: NaiveDate,
    /// W0: the recorded NAV at the end of that day (1 before D0).
    pub w0: f64,
    /// Draw NAV / W0, so the curve starts at 1.
    pub rebased: bool,
    /// A benchmark's name and its index B_k / B_0 by day (the points'
    /// `benchmark_index`). It is drawn as B_k / B_0 when rebased and as
    /// W0 · B_k / B_0 otherwise: what the range's starting value would
    /// have become in the benchmark.
    pub benchmark: Option<(&'a str, &'a [(NaiveDate, f64)])>,
}

/// A picture's series as drawn.
pub(super) struct Prepared {
    /// (day, value drawn), day-sorted, the base day first when there is one.
    pub(super) nav: Vec<(NaiveDate, f64)>,
    /// The recorded NAV of each point of `nav`.
    pub(super) recorded: Vec<f64>,
    /// (day, value drawn) of the benchmark, with the index B_k / B_0.
    pub(super) bench: Vec<(NaiveDate, f64, f64)>,
    pub(super) legend: Option<Legend>,
}

/// What the legend strip says.
pub(super) struct Legend {
    pub(super) base_day: NaiveDate,
    pub(super) rebased: bool,
    pub(super) bench: Option<String>,
}

/// Finite values, day-sorted, one per day (the last one given wins).
fn clean(points: &[(NaiveDate, f64)]) -> Vec<(NaiveDate, f64)> {
    let mut series: Vec<(NaiveDate, f64)> = points
        .iter()
        .copied()
        .filter(|(_, v)| v.is_finite())
        .collect();
    series.sort_by_key(|(d, _)| *d);
    // Two records for one day cannot both be right; keep the last one given.
    series.dedup_by(|later, earlier| {
        if later.0 == earlier.0 {
            earlier.1 = later.1;
            true
        } else {
            false
        }
    });
    series
}

pub(super) fn prepare(p: &Picture<'_>) -> Prepared {
    let recorded = clean(p.nav);
    // A base needs a positive W0 before the first record; without one the
    // picture is the plain curve.
    let base = p.base.filter(|b| {
        b.w0.is_finite() && b.w0 > 0.0 && recorded.first().is_some_and(|(d, _)| b.day < *d)
    });
    let Some(b) = base else {
        return Prepared {
            nav: recorded.clone(),
            recorded: recorded.iter().map(|(_, v)| *v).collect(),
            bench: Vec::new(),
            legend: None,
        };
    };
    let start = if b.rebased { 1.0 } else { b.w0 };
    let scale = if b.rebased { 1.0 / b.w0 } else { 1.0 };
    let mut nav = vec![(b.day, start)];
    let mut rec = vec![b.w0];
    for (d, v) in &recorded {
        nav.push((*d, v * scale));
        rec.push(*v);
    }
    let index: Vec<(NaiveDate, f64)> = b
        .benchmark
        .map(|(_, idx)| clean(idx))
        .unwrap_or_default()
        .into_iter()
        .filter(|(d, _)| *d > b.day)
        .collect();
    let mut bench = Vec::new();
    if !index.is_empty() {
        bench.push((b.day, start, 1.0));
        bench.extend(index.iter().map(|&(d, i)| (d, i * start, i)));
    }
    Prepared {
        nav,
        recorded: rec,
        bench,
        legend: Some(Legend {
            base_day: b.day,
            rebased: b.rebased,
            bench: b.benchmark.map(|(name, _)| name.to_string()),
        }),
    }
}
