//! The picture of the curve (the README's API section "Also expected": NAV and drawdown for
//! people who would rather look than read).
//!
//! This module owns:
//! - [`render`] (and [`render_svg`], the plain curve): pure functions
//!   drawing the NAV curve (top panel, optionally rebased to 1 and with a
//!   benchmark line and a legend) and its drawdown (bottom panel, % below
//!   the running peak) with plotters' SVG backend into a `String`, with a
//!   hover `<title>` per day and a compact layout for narrow pictures;
//! - [`svg`]: `GET /api/v1/portfolio/{id}/nav-history.svg`, the same read as
//!   the JSON GET (same query, scope, 400/404 rules) answered as
//!   `image/svg+xml`; a browser's login cookie is accepted as well as the
//!   header (`auth::BrowserCaller`), since the page links to it;
//! - [`page`]: `GET /portfolio/{id}`, a small self-contained HTML page (no
//!   JavaScript, no external assets) with a date-range form, the SVG inlined
//!   (wide and compact, CSS picks by width), the status and the statistics;
//!   `benchmark=` and the page's own `rebase=1` (docs/chart.md);
//! - [`index`]: `GET /`, the portfolios the caller may see.
//!
//! The pages find their caller through `login::PageCaller`: the
//! `Authorization` header, or under JWT auth the cookie of `/login`, and
//! without a usable token the sign-in form rather than a bare 401.
//!
//! Both handlers go through [`crate::query::read_history`], so the picture, the
//! page and the JSON always show the same snapshot and obey the same rules,
//! and both draw through [`RenderPool`]: off the async threads, a bounded
//! number at a time, each on at most [`MAX_PLOT_POINTS`] points. None of
//! them is cached, so each (the index too) first takes a share of its
//! caller's uncached work (`guard::WorkLimiter`, 429 past it), held until
//! its answer is drawn.
//!
//! Text is drawn as SVG `<text>` elements naming a generic font family
//! (`sans-serif`): the viewer's browser picks the font, so no font file or
//! plotters' `ttf` feature is needed on the server.

use std::fmt::Write as _;
use std::ops::Range;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use chrono::{Datelike, NaiveDate};
use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use projections::Statistics;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::{Decimal, RoundingStrategy};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::auth::{BrowserCaller, SCOPE_READ};
use super::error::ApiError;
use super::guard::{caller_key, PeerAddr};
use super::html::escape_html;
use super::login::PageCaller;
use super::params::{self, ParseQuery};
use super::state::AppState;
use crate::query::{read_history, History, HistoryQuery};

/// Size of the picture served and inlined (16:9, readable on a laptop).
const WIDTH: u32 = 960;
const HEIGHT: u32 = 540;

/// Size of the compact picture the page shows on a phone's screen (about
/// its width in CSS pixels, so its type keeps about its size).
const NARROW: (u32, u32) = (360, 480);

/// Bounds on the size given to [`render_svg`]: below them plotters has no
/// room for labels (and may fail to lay out), above them the SVG is just big.
const MIN_SIZE: (u32, u32) = (320, 240);
const MAX_SIZE: (u32, u32) = (4096, 4096);

/// Most points drawn per curve. The picture is under a thousand pixels
/// wide, so two points per pixel column (the lowest and the highest of the
/// days it covers) draw the same line as all of them; it bounds what one
/// render costs whatever the length of the history (a century of days
/// otherwise made a render take seconds and hundreds of MB).
pub const MAX_PLOT_POINTS: usize = 2_000;

/// The generic family: resolved by whoever displays the SVG.
const FONT: &str = "sans-serif";

// Colour-blind-safe (Okabe–Ito): blue for the curve, vermilion for
// losses, bluish green (and dashes) for the benchmark.
const NAV_COLOR: RGBColor = RGBColor(0, 114, 178);
const DD_COLOR: RGBColor = RGBColor(213, 94, 0);
const BENCH_COLOR: RGBColor = RGBColor(0, 158, 115);
const GRID_BOLD: RGBColor = RGBColor(205, 205, 205);
const GRID_LIGHT: RGBColor = RGBColor(238, 238, 238);
const TEXT_COLOR: RGBColor = RGBColor(40, 40, 40);
const MUTED: RGBColor = RGBColor(120, 120, 120);

/// Draws the NAV curve and its drawdown as an SVG document.
///
/// `points` are (day, net value); they are sorted by day here and non-finite
/// values are dropped, so the function never panics on odd input. With fewer
/// than two usable points there is no curve to draw: the result is a valid
/// SVG of the same size saying so.
///
/// The drawdown is `NAV / running max − 1` over the given points only, in
/// percent. The `max_drawdown` statistic also counts the NAV of the day
/// before the range (docs/valuation.md), so when a range starts inside a drawdown the
/// two can differ; the statistic is the reference. (A [`Picture`] with a
/// [`Base`] draws that day too, and then the two agree.)
///
/// Both curves are computed from every point, then thinned to at most
/// [`MAX_PLOT_POINTS`] for drawing (see [`downsample`]); the deepest
/// drawdown's markers come from the full series.
pub fn render_svg(
    points: &[(NaiveDate, f64)],
    width: u32,
    height: u32,
    title: &str,
) -> Result<String, String> {
    render(
        &Picture {
            title,
            nav: points,
            base: None,
        },
        width,
        height,
    )
}

/// What [`render`] draws: the recorded NAVs by day, and optionally the
/// range's [`Base`] (a rebased curve and/or a benchmark line).
#[derive(Debug, Clone, Copy)]
pub struct Picture<'a> {
    pub title: &'a str,
    /// (day, recorded NAV).
    pub nav: &'a [(NaiveDate, f64)],
    pub base: Option<Base<'a>>,
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
struct Prepared {
    /// (day, value drawn), day-sorted, the base day first when there is one.
    nav: Vec<(NaiveDate, f64)>,
    /// The recorded NAV of each point of `nav`.
    recorded: Vec<f64>,
    /// (day, value drawn) of the benchmark, with the index B_k / B_0.
    bench: Vec<(NaiveDate, f64, f64)>,
    legend: Option<Legend>,
}

struct Legend {
    base_day: NaiveDate,
    rebased: bool,
    bench: Option<String>,
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

fn prepare(p: &Picture<'_>) -> Prepared {
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

/// Draws a [`Picture`]: the NAV (top panel, with the benchmark line and a
/// legend when there is a base) and its drawdown (bottom panel), with a
/// transparent column per day (or group of days) carrying a `<title>`, so
/// a browser shows the day's values on hover. Below 600 px of width the
/// layout is compact (larger type relative to the picture, fewer date
/// labels, shorter captions) for a phone's screen.
pub fn render(p: &Picture<'_>, width: u32, height: u32) -> Result<String, String> {
    let size = (
        width.clamp(MIN_SIZE.0, MAX_SIZE.0),
        height.clamp(MIN_SIZE.1, MAX_SIZE.1),
    );
    let style = Style::for_width(size.0);
    let prepared = prepare(p);
    let mut out = String::new();
    let hover;
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        let result = if prepared.nav.len() < 2 {
            draw_no_data(&root, &prepared.nav, p.title, &style).map(|()| String::new())
        } else {
            draw_chart(&root, &prepared, p.title, &style)
        };
        hover = result.map_err(|e| format!("could not draw the chart: {e}"))?;
        root.present()
            .map_err(|e| format!("could not write the chart: {e}"))?;
    }
    if let Some(at) = out.rfind("</svg>") {
        out.insert_str(at, &hover);
    }
    Ok(out)
}

/// Type sizes and room for labels, by the picture's width.
#[derive(Debug, Clone, Copy)]
struct Style {
    compact: bool,
    title: u32,
    caption: u32,
    label: u32,
    x_labels: usize,
    margin_right: u32,
}

impl Style {
    fn for_width(width: u32) -> Self {
        if width < 600 {
            Style {
                compact: true,
                title: 20,
                caption: 17,
                label: 15,
                x_labels: 4,
                margin_right: 14,
            }
        } else {
            Style {
                compact: false,
                title: 22,
                caption: 16,
                label: 13,
                x_labels: X_LABELS,
                margin_right: 25,
            }
        }
    }

    /// Room for y labels like `sample` (and the axis name when not compact).
    fn y_label_area(&self, sample: &str) -> u32 {
        let text = text_width(sample, self.label) + 12;
        if self.compact {
            text.max(40)
        } else {
            (text + 24).max(70)
        }
    }
}

/// A rough width of `text` in a sans-serif face of nominal `size`:
/// plotters' SVG backend writes font sizes as size / 1.24, and digits are
/// about 0.56 em.
fn text_width(text: &str, size: u32) -> u32 {
    (text.chars().count() as f64 * f64::from(size) / 1.24 * 0.56).ceil() as u32
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type DrawResult<T = ()> = Result<T, DrawingAreaErrorKind<std::io::Error>>;

fn draw_no_data(
    root: &Area<'_>,
    series: &[(NaiveDate, f64)],
    title: &str,
    style: &Style,
) -> DrawResult {
    root.fill(&WHITE)?;
    let body = root.titled(title, (FONT, style.title).into_font().color(&TEXT_COLOR))?;
    let (w, h) = body.dim_in_pixel();
    let center = Pos::new(HPos::Center, VPos::Center);
    let big = (FONT, 20).into_font().color(&MUTED).pos(center);
    let small = (FONT, 15).into_font().color(&MUTED).pos(center);
    let (headline, detail) = match series.first() {
        None => (
            "No data".to_string(),
            "there is no record in this range".to_string(),
        ),
        Some((d, v)) => (
            "Not enough data to draw a curve".to_string(),
            format!("one day only: {d}, net value {v:.6}"),
        ),
    };
    let (cx, cy) = (w as i32 / 2, h as i32 / 2);
    body.draw(&Text::new(headline, (cx, cy - 14), big))?;
    body.draw(&Text::new(detail, (cx, cy + 16), small))?;
    Ok(())
}

/// Draws both panels; answers the hover layer (an SVG fragment).
fn draw_chart(root: &Area<'_>, p: &Prepared, title: &str, style: &Style) -> DrawResult<String> {
    let series = &p.nav;
    root.fill(&WHITE)?;
    let body = root.titled(title, (FONT, style.title).into_font().color(&TEXT_COLOR))?;
    let (_, h) = body.dim_in_pixel();
    // The curve is what people came for: give it about 60% of the height.
    let (top, bottom) = body.split_vertically(h * 3 / 5);

    let first = series[0].0;
    let last = series[series.len() - 1].0;
    let x = DateAxis {
        short: style.compact,
        ..DateAxis::new(first, last, style.x_labels)
    };

    // Drawdown in percent, and where the deepest one bottoms out, over
    // every point; only the drawing below is thinned.
    let mut peak = f64::NEG_INFINITY;
    let mut peak_day = first;
    let mut worst = (0.0_f64, first, first); // (dd %, peak day, trough day)
    let drawdown: Vec<(NaiveDate, f64)> = series
        .iter()
        .map(|&(d, v)| {
            if v > peak {
                peak = v;
                peak_day = d;
            }
            // A non-positive peak only happens with nonsense data; show flat.
            let dd = if peak > 0.0 {
                (v / peak - 1.0) * 100.0
            } else {
                0.0
            };
            if dd < worst.0 {
                worst = (dd, peak_day, d);
            }
            (d, dd)
        })
        .collect();

    // ---- top panel: NAV (and the benchmark) ----
    let (lo, hi) = series
        .iter()
        .map(|&(_, v)| v)
        .chain(p.bench.iter().map(|&(_, v, _)| v))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    // A flat curve still needs a non-empty range; pad 5% so the line does
    // not sit on the frame.
    let span = if hi > lo {
        hi - lo
    } else {
        lo.abs().max(1.0) * 0.02
    };
    let y_nav = (lo - span * 0.05)..(hi + span * 0.05);
    let nav_decimals = decimals_for(y_nav.end - y_nav.start);
    let widest = [y_nav.start, y_nav.end]
        .iter()
        .map(|v| format!("{v:.nav_decimals$}"))
        .max_by_key(String::len)
        .unwrap_or_default();
    let y_area = style.y_label_area(&widest).max(style.y_label_area("-100%"));

    let label_font = (FONT, style.label).into_font().color(&TEXT_COLOR);
    let axis_desc = (FONT, 14).into_font().color(&TEXT_COLOR);
    let caption = (FONT, style.caption).into_font().color(&TEXT_COLOR);

    let top = match &p.legend {
        Some(legend) => {
            let (strip, rest) = top.split_vertically(style.caption + 14);
            draw_legend(&strip, legend, style, 10 + y_area)?;
            rest
        }
        None => top,
    };
    let mut builder = ChartBuilder::on(&top);
    if p.legend.is_none() {
        builder.caption("Net value (NAV)", caption.clone());
    }
    let mut nav_chart = builder
        .margin_left(10)
        .margin_right(style.margin_right)
        .margin_top(5)
        // No date labels here: the bottom panel carries them, and the
        // vertical grid lines of both panels line up on the same days.
        .x_label_area_size(0)
        .y_label_area_size(y_area)
        .build_cartesian_2d(x.clone(), y_nav.clone())?;
    let nav_label = |v: &f64| format!("{v:.nav_decimals$}");
    let mut mesh = nav_chart.configure_mesh();
    mesh.x_labels(style.x_labels)
        .y_labels(6)
        .y_label_formatter(&nav_label)
        .label_style(label_font.clone())
        .axis_desc_style(axis_desc.clone())
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        // A few faint lines between labels help reading; dozens are noise.
        .max_light_lines(3);
    if !style.compact {
        mesh.y_desc(if p.legend.as_ref().is_some_and(|l| l.rebased) {
            "NAV / W0"
        } else {
            "NAV"
        });
    }
    mesh.draw()?;
    // The starting value 1 is the natural reference for a NAV.
    if y_nav.start < 1.0 && 1.0 < y_nav.end {
        nav_chart.draw_series(LineSeries::new(
            [(first, 1.0), (last, 1.0)],
            MUTED.mix(0.6).stroke_width(1),
        ))?;
    }
    if p.bench.len() >= 2 {
        let line: Vec<(NaiveDate, f64)> = p.bench.iter().map(|&(d, v, _)| (d, v)).collect();
        nav_chart.draw_series(DashedLineSeries::new(
            downsample(&line, MAX_PLOT_POINTS),
            7,
            4,
            BENCH_COLOR.stroke_width(2),
        ))?;
    }
    nav_chart.draw_series(LineSeries::new(
        downsample(series, MAX_PLOT_POINTS),
        NAV_COLOR.stroke_width(2),
    ))?;
    if worst.0 < 0.0 {
        let at = |day: NaiveDate| {
            series
                .binary_search_by_key(&day, |p| p.0)
                .ok()
                .map(|i| series[i].1)
        };
        if let (Some(pv), Some(tv)) = (at(worst.1), at(worst.2)) {
            nav_chart.draw_series([
                Circle::new((worst.1, pv), 4, NAV_COLOR.filled()),
                Circle::new((worst.2, tv), 4, DD_COLOR.filled()),
            ])?;
        }
    }

    // ---- bottom panel: drawdown ----
    let floor = (worst.0 * 1.1).min(-1.0);
    let y_dd = floor..(-floor * 0.04);
    let dd_decimals = if -floor >= 5.0 { 0 } else { 1 };
    let dd_caption = match (worst.0 < 0.0, style.compact) {
        (true, false) => format!(
            "Drawdown (% below the running peak) \u{2014} deepest {:.2}% on {}",
            worst.0, worst.2
        ),
        (true, true) => format!("Drawdown \u{2014} deepest {:.2}%", worst.0),
        (false, false) => {
            "Drawdown (% below the running peak) \u{2014} none in this range".to_string()
        }
        (false, true) => "Drawdown \u{2014} none".to_string(),
    };
    let mut dd_chart = ChartBuilder::on(&bottom)
        .caption(dd_caption, caption)
        .margin_left(10)
        .margin_right(style.margin_right)
        .margin_bottom(5)
        .x_label_area_size(if style.compact { 30 } else { 40 })
        .y_label_area_size(y_area)
        .build_cartesian_2d(x.clone(), y_dd)?;
    let date_label = |d: &NaiveDate| x.label(d);
    let dd_label = |v: &f64| format!("{v:.dd_decimals$}%");
    let mut mesh = dd_chart.configure_mesh();
    mesh.x_labels(style.x_labels)
        .y_labels(5)
        .x_label_formatter(&date_label)
        .y_label_formatter(&dd_label)
        .label_style(label_font)
        .axis_desc_style(axis_desc)
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        // A few faint lines between labels help reading; dozens are noise.
        .max_light_lines(3);
    if !style.compact {
        mesh.y_desc("drawdown");
    }
    mesh.draw()?;
    dd_chart.draw_series(
        AreaSeries::new(
            downsample(&drawdown, MAX_PLOT_POINTS),
            0.0,
            DD_COLOR.mix(0.25),
        )
        .border_style(DD_COLOR.stroke_width(1)),
    )?;

    // ---- hover: a transparent column per day (or group of days) ----
    let (xs, ys) = nav_chart.plotting_area().get_pixel_range();
    let (_, dd_ys) = dd_chart.plotting_area().get_pixel_range();
    let columns = ((xs.end - xs.start) / 3).max(2) as usize;
    let n = series.len();
    // Group consecutive days so there are at most `columns`; each group
    // shows its last day.
    let shown: Vec<usize> = if n <= columns {
        (0..n).collect()
    } else {
        (1..=columns).map(|c| c * n / columns - 1).collect()
    };
    let px: Vec<i32> = shown
        .iter()
        .map(|&i| nav_chart.backend_coord(&(series[i].0, y_nav.start)).0)
        .collect();
    let mut layer = String::with_capacity(shown.len() * 160);
    let _ = write!(
        layer,
        "<style>.hv rect{{fill:#000;fill-opacity:0}}.hv rect:hover{{fill-opacity:.07}}</style>\
         <g class=\"hv\">"
    );
    for (k, &i) in shown.iter().enumerate() {
        let left = if k == 0 {
            xs.start
        } else {
            (px[k - 1] + px[k]) / 2
        };
        let right = if k + 1 == shown.len() {
            xs.end
        } else {
            (px[k] + px[k + 1]) / 2
        };
        if right <= left {
            continue;
        }
        let (day, v) = series[i];
        let _ = write!(
            layer,
            "<rect x=\"{left}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>{}</title></rect>",
            ys.start,
            right - left,
            dd_ys.end - ys.start,
            escape_html(&hover_text(p, i, day, v, drawdown[i].1))
        );
    }
    layer.push_str("</g>");
    Ok(layer)
}

/// The values of one day, for its hover title.
fn hover_text(p: &Prepared, i: usize, day: NaiveDate, v: f64, dd: f64) -> String {
    let mut t = day.to_string();
    let legend = p.legend.as_ref();
    if legend.is_some_and(|l| l.base_day == day) {
        t.push_str(" (the day before the range)");
    }
    let recorded = p.recorded.get(i).copied().unwrap_or(v);
    if legend.is_some_and(|l| l.rebased) {
        let _ = write!(t, "\nNAV rebased {v:.6} (recorded {recorded:.6})");
    } else {
        let _ = write!(t, "\nNAV {v:.6}");
    }
    if let (Some(name), Ok(j)) = (
        legend.and_then(|l| l.bench.as_deref()),
        p.bench.binary_search_by_key(&day, |b| b.0),
    ) {
        let (_, drawn, index) = p.bench[j];
        if legend.is_some_and(|l| l.rebased) {
            let _ = write!(t, "\n{name} rebased {index:.6}");
        } else {
            let _ = write!(t, "\n{name} {drawn:.6} (index {index:.6})");
        }
    }
    let _ = write!(t, "\nDrawdown {}%", fixed(dd, 2));
    t
}

/// The legend strip above the NAV panel: a swatch and a name per line,
/// then what they are relative to (when it fits).
fn draw_legend(area: &Area<'_>, l: &Legend, style: &Style, left: u32) -> DrawResult {
    let (w, h) = area.dim_in_pixel();
    let y = h as i32 / 2;
    let font = (FONT, style.caption)
        .into_font()
        .color(&TEXT_COLOR)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let muted = (FONT, style.label)
        .into_font()
        .color(&MUTED)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let mut x = if style.compact { 10 } else { left as i32 };
    // The compact legend says "rebased" once, in its note.
    let rebased_names = l.rebased && !style.compact;
    let nav_name = if rebased_names { "NAV rebased" } else { "NAV" };
    area.draw(&PathElement::new(
        vec![(x, y), (x + 22, y)],
        NAV_COLOR.stroke_width(3),
    ))?;
    x += 28;
    area.draw(&Text::new(nav_name, (x, y), font.clone()))?;
    x += text_width(nav_name, style.caption) as i32 + 18;
    if let Some(name) = &l.bench {
        for k in 0..3 {
            let a = x + k * 9;
            area.draw(&PathElement::new(
                vec![(a, y), (a + 6, y)],
                BENCH_COLOR.stroke_width(3),
            ))?;
        }
        x += 32;
        let label = if rebased_names {
            format!("{name} rebased")
        } else {
            name.clone()
        };
        area.draw(&Text::new(label.clone(), (x, y), font))?;
        x += text_width(&label, style.caption) as i32 + 18;
    }
    let note = match (l.rebased, l.bench.is_some(), style.compact) {
        (true, true, true) => format!("both = 1 on {}", l.base_day),
        (true, false, true) => format!("rebased: 1 on {}", l.base_day),
        (true, true, false) => format!("both = 1 on {}, the day before the range", l.base_day),
        (true, false, false) => format!("= 1 on {}, the day before the range", l.base_day),
        (false, true, true) => format!("from the NAV of {}", l.base_day),
        (false, true, false) => format!(
            "benchmark from the NAV of {}, the day before the range",
            l.base_day
        ),
        (false, false, _) => String::new(),
    };
    if !note.is_empty() && x + text_width(&note, style.label) as i32 <= w as i32 - 4 {
        area.draw(&Text::new(note, (x, y), muted))?;
    }
    Ok(())
}

/// Thins a day-sorted series to at most `max` points (`max` ≥ 4): the first
/// and the last point, and between them buckets of consecutive points each
/// represented by its lowest and its highest point, in day order. Every
/// local extreme wider than a bucket survives — the deepest trough and the
/// highest peak always do — so the drawn line has the shape of the full
/// one. Series already short enough are returned as they are.
pub fn downsample(series: &[(NaiveDate, f64)], max: usize) -> Vec<(NaiveDate, f64)> {
    let max = max.max(4);
    let n = series.len();
    if n <= max {
        return series.to_vec();
    }
    let inner = &series[1..n - 1];
    let buckets = (max - 2) / 2;
    let mut out = Vec::with_capacity(max);
    out.push(series[0]);
    for b in 0..buckets {
        let lo = b * inner.len() / buckets;
        let hi = (b + 1) * inner.len() / buckets;
        let chunk = &inner[lo..hi];
        let (mut min_i, mut max_i) = (0, 0);
        for (i, p) in chunk.iter().enumerate() {
            if p.1 < chunk[min_i].1 {
                min_i = i;
            }
            if p.1 > chunk[max_i].1 {
                max_i = i;
            }
        }
        let (a, z) = (min_i.min(max_i), min_i.max(max_i));
        out.push(chunk[a]);
        if z != a {
            out.push(chunk[z]);
        }
    }
    out.push(series[n - 1]);
    out
}

/// Decimals that keep neighbouring y labels distinct for a range of `span`
/// (plotters picks about span/10 as its finest tick step).
fn decimals_for(span: f64) -> usize {
    if !(span.is_finite() && span > 0.0) {
        return 3;
    }
    ((-(span / 10.0).log10()).ceil().max(0.0) as usize).min(8)
}

/// How many date labels the x-axis aims for (10 characters each fit well).
const X_LABELS: usize = 8;

/// A tick spacing on the date axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Days(u32),
    Months(u32),
}

const STEPS: [Step; 14] = [
    Step::Days(1),
    Step::Days(2),
    Step::Days(7),
    Step::Days(14),
    Step::Months(1),
    Step::Months(2),
    Step::Months(3),
    Step::Months(6),
    Step::Months(12),
    Step::Months(24),
    Step::Months(60),
    Step::Months(120),
    Step::Months(240),
    Step::Months(600),
];

/// A date x-axis with ticks on calendar boundaries (Mondays, first of a
/// month / quarter / year) rather than on plotters' "nice numbers" of days,
/// which would land on arbitrary dates. Also avoids plotters' `datetime`
/// feature, which is not enabled.
#[derive(Debug, Clone)]
struct DateAxis {
    start: NaiveDate,
    end: NaiveDate,
    /// The spacing of the labelled ticks, which decides the label format.
    label_step: Step,
    /// Day labels without the year (`4 Mar`), for a narrow picture whose
    /// title gives the range.
    short: bool,
}

impl DateAxis {
    fn new(start: NaiveDate, end: NaiveDate, labels: usize) -> Self {
        let label_step = STEPS
            .iter()
            .copied()
            .find(|s| ticks(start, end, *s).len() <= labels)
            .unwrap_or(Step::Months(600));
        DateAxis {
            start,
            end,
            label_step,
            short: false,
        }
    }

    /// The label of a tick, as precise as the tick spacing needs.
    fn label(&self, d: &NaiveDate) -> String {
        match self.label_step {
            Step::Days(_) if self.short => d.format("%-d %b").to_string(),
            Step::Days(_) => d.format("%Y-%m-%d").to_string(),
            Step::Months(m) if m % 12 == 0 && d.month() == 1 && d.day() == 1 => {
                d.format("%Y").to_string()
            }
            Step::Months(_) if d.day() == 1 => d.format("%b %Y").to_string(),
            Step::Months(_) => d.format("%Y-%m-%d").to_string(),
        }
    }
}

/// Calendar-aligned ticks from `start` to `end` (inclusive).
fn ticks(start: NaiveDate, end: NaiveDate, step: Step) -> Vec<NaiveDate> {
    let mut out = Vec::new();
    match step {
        Step::Days(n) => {
            let mut d = start;
            if n >= 7 {
                // Weekly ticks on Mondays.
                let back = d.weekday().num_days_from_monday();
                if back > 0 {
                    match d.checked_add_days(chrono::Days::new(u64::from(7 - back))) {
                        Some(monday) => d = monday,
                        None => return out,
                    }
                }
            }
            while d <= end {
                out.push(d);
                match d.checked_add_days(chrono::Days::new(u64::from(n))) {
                    Some(next) => d = next,
                    None => break,
                }
            }
        }
        Step::Months(n) => {
            // First day of the first month on the step's grid: months
            // counted from year 0, so quarters start in Jan/Apr/Jul/Oct and
            // multi-year steps on years divisible by the step.
            let index = |d: NaiveDate| i64::from(d.year()) * 12 + i64::from(d.month0());
            let n64 = i64::from(n);
            let mut i = index(start);
            if start.day() != 1 {
                i += 1;
            }
            i = (i + n64 - 1).div_euclid(n64) * n64;
            let from_index = |i: i64| {
                let y = i32::try_from(i.div_euclid(12)).ok()?;
                let m = u32::try_from(i.rem_euclid(12)).ok()? + 1;
                NaiveDate::from_ymd_opt(y, m, 1)
            };
            while let Some(d) = from_index(i) {
                if d > end {
                    break;
                }
                out.push(d);
                i += n64;
            }
        }
    }
    out
}

impl Ranged for DateAxis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = NaiveDate;

    fn map(&self, value: &NaiveDate, limit: (i32, i32)) -> i32 {
        let span = (self.end - self.start).num_days().max(1) as f64;
        let offset = (*value - self.start).num_days() as f64;
        limit.0 + (f64::from(limit.1 - limit.0) * offset / span).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<NaiveDate> {
        let max = hint.max_num_points();
        if max == 0 {
            return Vec::new();
        }
        // The finest calendar step that fits: the bold (labelled) request
        // gets `label_step`, the light grid request gets something finer.
        STEPS
            .iter()
            .map(|s| ticks(self.start, self.end, *s))
            .find(|t| t.len() <= max)
            .unwrap_or_default()
    }

    fn range(&self) -> Range<NaiveDate> {
        self.start..self.end
    }
}

impl ValueFormatter<NaiveDate> for DateAxis {
    fn format_ext(&self, value: &NaiveDate) -> String {
        self.label(value)
    }
}

// ---------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------

/// `GET /api/v1/portfolio/{id}/nav-history.svg`: the curve of the JSON GET
/// as a picture. Same query (`from`, `to`, `calendar`, `risk_free`,
/// `benchmark`; `calendar` and `risk_free` do not change the picture but
/// are accepted so a JSON URL can be turned into a picture URL by adding
/// `.svg`; `benchmark` adds its line, from the NAV of the day before the
/// range), scope `nav:read`, and the same 400/404 answers, since it is the
/// same read. Rebasing is the page's (`/portfolio/{id}?rebase=1`).
#[utoipa::path(
    get,
    path = "/api/v1/portfolio/{id}/nav-history.svg",
    tag = "nav",
    params(("id" = String, Path, description = "portfolio id", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", example = "p-1001"), super::schema::HistoryParams),
    responses(
        (status = 200, description = "the NAV curve and its drawdown", body = String, content_type = "image/svg+xml"),
        (status = 400, description = "malformed id, date, range or parameter", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "unknown or hidden portfolio", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "this caller already has its share (NAVD_HTTP_MISSES_PER_CALLER) of uncached requests in flight; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
        (status = 503, description = "database unavailable, request timed out, or too many charts being drawn; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:read"]))
)]
pub async fn svg(
    State(s): State<AppState>,
    BrowserCaller(caller): BrowserCaller,
    peer: Option<Extension<PeerAddr>>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_READ, id.as_str())?;
    let q = HistoryQuery::parse(raw.as_deref())?;
    // The caller's share of uncached work, taken before waiting for a
    // slot and held until the drawing is done.
    let permit = s
        .guards
        .work
        .admit(&caller_key(&caller, peer.map(|Extension(p)| p)))?;
    let slot = RenderPool::global().slot().await?;
    let h = read_history(&s.db, id.as_str(), &q).await?;
    let bench = q.benchmark.as_ref().map(|b| b.to_string());
    let body = RenderPool::run(slot, move || {
        let _permit = permit;
        let curve = curve_of(&h)?;
        draw(
            &picture(&h, &curve, &wide_title(&h), false, bench.as_deref()),
            WIDTH,
            HEIGHT,
        )
    })
    .await?;
    Ok((
        [
            (
                header::CONTENT_TYPE,
                // XML defaults to UTF-8, which is what plotters writes; the
                // bare type is what clients compare against.
                HeaderValue::from_static("image/svg+xml"),
            ),
            // The curve moves every day and with late events: revalidate.
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            // An SVG opened directly is a document; it needs nothing.
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'"),
            ),
        ],
        body,
    )
        .into_response())
}

/// `GET /portfolio/{id}`: a human view of the curve (status, statistics,
/// picture, date-range form). Plain HTML without JavaScript or external
/// assets, so it works behind any proxy and prints or screenshots as is.
///
/// Its query is the JSON GET's plus the page's own `rebase=1` (draw the
/// range rebased to 1 on the day before it; docs/chart.md). With
/// `benchmark=` the benchmark is a second, dashed line with a legend, and
/// a small table gives both lines' values at the range's start and end.
/// The picture is drawn twice, wide and compact, and CSS shows the compact
/// one below 600 px, so a phone gets type it can read.
///
/// Authorization is that of the JSON GET (scope `nav:read`, 404 for unknown
/// or hidden portfolios). A browser following a link or submitting the form
/// cannot add an `Authorization: Bearer` header, so with JWT auth enabled
/// the token may also come from the cookie `/login` sets ([`PageCaller`]);
/// without either the answer is the sign-in form (401), which comes back
/// here. An authenticating reverse proxy that adds the header works too.
///
/// A malformed query (say `from` after `to`) answers 400 with the page's
/// form and the reason, rather than problem+json, so the person can fix it
/// in place. Errors before that (bad id, a refused `Authorization` header,
/// 403/404) and database errors stay problem+json like the rest of the API.
pub async fn page(
    State(s): State<AppState>,
    PageCaller(caller): PageCaller,
    peer: Option<Extension<PeerAddr>>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_READ, id.as_str())?;
    // An empty form field arrives as `from=`; for the page it means "not
    // given", while the strict API parser rightly refuses it.
    let pairs = non_empty_pairs(raw.as_deref());
    // `rebase` is the page's own; the rest is the API's query.
    let (rebase, pairs) = take_rebase(pairs);
    let query = serialize_pairs(&pairs);
    let mut form = FormValues::of(&pairs);
    form.rebase = matches!(rebase, Ok(true));
    if let Err(reason) = rebase {
        let html = render_page(id.as_str(), &form, query.as_deref(), Err(&reason));
        return Ok(html_response(StatusCode::BAD_REQUEST, html));
    }
    let q = match HistoryQuery::parse(query.as_deref()) {
        Ok(q) => q,
        Err(ApiError::BadRequest(reason)) => {
            let html = render_page(id.as_str(), &form, query.as_deref(), Err(&reason));
            return Ok(html_response(StatusCode::BAD_REQUEST, html));
        }
        Err(e) => return Err(e),
    };
    let permit = s
        .guards
        .work
        .admit(&caller_key(&caller, peer.map(|Extension(p)| p)))?;
    let slot = RenderPool::global().slot().await?;
    let h = match read_history(&s.db, id.as_str(), &q).await {
        Ok(h) => h,
        // A benchmark symbol navd does not know is a typo to fix in place.
        Err(crate::query::QueryError::UnknownBenchmark(reason)) => {
            let html = render_page(id.as_str(), &form, query.as_deref(), Err(&reason));
            return Ok(html_response(StatusCode::BAD_REQUEST, html));
        }
        Err(e) => return Err(e.into()),
    };
    // The positions table is a convenience: a range ending where there is
    // no record simply shows none.
    let held = match h.points.last() {
        Some(last) => crate::query::read_positions(&s.db, id.as_str(), Some(last.date))
            .await
            .ok(),
        None => None,
    };
    let html = RenderPool::run(slot, move || {
        let _permit = permit;
        let curve = curve_of(&h)?;
        let bench = q.benchmark.as_ref().map(|b| b.to_string());
        let bench = bench.as_deref();
        let charts = Charts {
            wide: draw(
                &picture(&h, &curve, &wide_title(&h), form.rebase, bench),
                WIDTH,
                HEIGHT,
            )?,
            narrow: draw(
                &picture(&h, &curve, &narrow_title(&h), form.rebase, bench),
                NARROW.0,
                NARROW.1,
            )?,
        };
        Ok(render_page(
            id.as_str(),
            &form,
            query.as_deref(),
            Ok(PageData {
                history: &h,
                query: &q,
                charts: &charts,
                positions: held.as_ref(),
            }),
        ))
    })
    .await?;
    Ok(html_response(StatusCode::OK, html))
}

/// The index page: the portfolios the caller may see, with their status,
/// days and latest NAV, each linking to its page; 200 at a time
/// (`?after=` for the next ones).
pub async fn index(
    State(s): State<AppState>,
    PageCaller(caller): PageCaller,
    peer: Option<Extension<PeerAddr>>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    caller.require(SCOPE_READ)?;
    let q = params::query(raw.as_deref(), &["after"])?;
    let after = match q.get("after") {
        None => String::new(),
        Some(v) => params::portfolio_id(v)?.to_string(),
    };
    let _permit = s
        .guards
        .work
        .admit(&caller_key(&caller, peer.map(|Extension(p)| p)))?;
    let page = crate::query::list_portfolios(&s.db, &after, 200, caller.visible()).await?;
    Ok(html_response(StatusCode::OK, render_index(&page)))
}

fn render_index(page: &crate::query::PortfolioPage) -> String {
    let mut h = String::with_capacity(16 * 1024);
    let _ = writeln!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>NAV \u{2014} portfolios</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n\
         <h1>Portfolios</h1>\n<div class=\"card scroll\"><table>\n\
         <tr><th>Portfolio</th><th>Status</th><th class=\"wide-only\">From</th><th>Through</th><th>NAV</th></tr>"
    );
    for p in &page.portfolios {
        let id = escape_html(&p.portfolio_id);
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\" class=\"nowrap\"><a href=\"/portfolio/{id}\">{id}</a></th>\
             <td><span class=\"badge {state}\">{state}</span></td>\
             <td class=\"nowrap wide-only\">{}</td><td class=\"nowrap\">{}</td>\
             <td class=\"num\">{}</td></tr>",
            p.first_day
                .map_or_else(|| NULL.to_string(), |d| d.to_string()),
            p.last_day
                .map_or_else(|| NULL.to_string(), |d| d.to_string()),
            escape_html(p.net_value.as_deref().unwrap_or(NULL)),
            state = escape_html(p.status.state),
        );
    }
    if page.portfolios.is_empty() {
        h.push_str("<tr><td colspan=\"5\">no portfolio to show</td></tr>\n");
    }
    h.push_str("</table></div>\n");
    if let Some(next) = &page.next {
        let _ = writeln!(
            h,
            "<div class=\"card links\"><a href=\"/?after={}\">Next portfolios</a></div>",
            escape_html(next)
        );
    }
    h.push_str("</main>\n</body>\n</html>\n");
    h
}

/// Where charts are drawn: on blocking threads, at most as many at once as
/// there are CPUs, so drawing never occupies the async workers that answer
/// every other request (`/healthz` included), and a burst of chart requests
/// costs a bounded amount of CPU and memory.
///
/// A request holds its slot from before it reads the history until the
/// drawing is done — even when the request itself has timed out and its
/// answer is dropped — so the bound counts the work really running. One
/// that cannot get a slot within [`RenderPool::WAIT`] answers 503 with
/// `Retry-After`.
#[derive(Debug)]
pub struct RenderPool {
    slots: Arc<Semaphore>,
    wait: Duration,
}

impl RenderPool {
    /// Longest wait for a slot; below the default request timeout (10 s), so
    /// the answer says why.
    pub const WAIT: Duration = Duration::from_secs(5);

    pub fn new(slots: usize, wait: Duration) -> Self {
        RenderPool {
            slots: Arc::new(Semaphore::new(slots.max(1))),
            wait,
        }
    }

    /// The process's pool: one slot per CPU available to the process.
    pub fn global() -> &'static RenderPool {
        static POOL: OnceLock<RenderPool> = OnceLock::new();
        POOL.get_or_init(|| {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            RenderPool::new(cpus, Self::WAIT)
        })
    }

    /// A slot, or 503 once [`RenderPool::WAIT`] has passed without one.
    pub async fn slot(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        match tokio::time::timeout(self.wait, self.slots.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_closed)) => Err(ApiError::Internal(anyhow::anyhow!("render pool closed"))),
            Err(_) => {
                metrics::counter!("navd_chart_renders_refused_total").increment(1);
                Err(ApiError::Unavailable(
                    "too many charts are being drawn right now; retry later".into(),
                ))
            }
        }
    }

    /// Runs `draw` on a blocking thread, holding `slot` until it returns.
    pub async fn run<T, F>(slot: OwnedSemaphorePermit, draw: F) -> Result<T, ApiError>
    where
        F: FnOnce() -> Result<T, ApiError> + Send + 'static,
        T: Send + 'static,
    {
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            draw()
        })
        .await
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("chart drawing failed: {e}")))?
    }

    /// Slots free right now (for tests and diagnostics).
    pub fn available(&self) -> usize {
        self.slots.available_permits()
    }
}

/// The numbers a read's pictures are drawn from.
struct Curve {
    nav: Vec<(NaiveDate, f64)>,
    /// B_k / B_0 on the days the benchmark has a level.
    bench: Vec<(NaiveDate, f64)>,
    /// W0's day and W0 (none without records).
    base: Option<(NaiveDate, f64)>,
}

fn curve_of(h: &History) -> Result<Curve, ApiError> {
    let number = |what: &str, text: &str, day: NaiveDate| {
        text.parse::<f64>().map_err(|e| {
            ApiError::Internal(anyhow::anyhow!(
                "{what} `{text}` of {day} is not a number: {e}"
            ))
        })
    };
    let nav = h
        .points
        .iter()
        .map(|p| number("net_value", &p.net_value, p.date).map(|v| (p.date, v)))
        .collect::<Result<Vec<_>, _>>()?;
    let bench = h
        .points
        .iter()
        .filter_map(|p| match &p.benchmark_index {
            Some(Some(x)) => Some(number("benchmark_index", x, p.date).map(|v| (p.date, v))),
            _ => None,
        })
        .collect::<Result<Vec<_>, _>>()?;
    let base = h
        .points
        .first()
        .and_then(|p| p.date.pred_opt())
        .zip(h.w0.to_f64());
    Ok(Curve { nav, bench, base })
}

/// What to draw of a read: with a benchmark or rebased, from the day
/// before the range.
fn picture<'a>(
    h: &History,
    c: &'a Curve,
    title: &'a str,
    rebased: bool,
    bench: Option<&'a str>,
) -> Picture<'a> {
    let compared = bench.is_some() && h.points.iter().any(|p| p.benchmark_index.is_some());
    let base = c
        .base
        .filter(|_| rebased || compared)
        .map(|(day, w0)| Base {
            day,
            w0,
            rebased,
            benchmark: bench.filter(|_| compared).map(|b| (b, c.bench.as_slice())),
        });
    Picture {
        title,
        nav: &c.nav,
        base,
    }
}

/// The wide picture's title: the portfolio and the range shown.
fn wide_title(h: &History) -> String {
    match (h.from, h.to) {
        (Some(f), Some(t)) => format!("{} \u{2014} NAV {f} to {t}", h.portfolio_id),
        _ => format!("{} \u{2014} NAV", h.portfolio_id),
    }
}

/// The compact picture's title.
fn narrow_title(h: &History) -> String {
    match (h.from, h.to) {
        (Some(f), Some(t)) => format!("{} \u{2014} {f} to {t}", h.portfolio_id),
        _ => h.portfolio_id.clone(),
    }
}

fn draw(p: &Picture<'_>, width: u32, height: u32) -> Result<String, ApiError> {
    render(p, width, height).map_err(|e| ApiError::Internal(anyhow::anyhow!(e)))
}

/// The page's two pictures of one read: wide for screens, compact for
/// phones (CSS shows one).
struct Charts {
    wide: String,
    narrow: String,
}

/// Takes the page's own `rebase` out of the query's pairs: `1` draws the
/// range rebased to 1, `0` (or none) as recorded; anything else, or twice,
/// is refused like a bad API parameter.
fn take_rebase(pairs: Vec<(String, String)>) -> (Result<bool, String>, Vec<(String, String)>) {
    let (ours, rest): (Vec<_>, Vec<_>) = pairs.into_iter().partition(|(k, _)| k == "rebase");
    let rebase = match ours.as_slice() {
        [] => Ok(false),
        [(_, v)] if v == "1" => Ok(true),
        [(_, v)] if v == "0" => Ok(false),
        [(_, v)] => Err(format!(
            "`rebase` must be 1 or 0, got `{}`",
            projections::echo(v)
        )),
        _ => Err("query parameter `rebase` given twice".to_string()),
    };
    (rebase, rest)
}

fn html_response(status: StatusCode, html: String) -> Response {
    (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            // No script anywhere: say so, so an injection could not run one.
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; \
                     form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
                ),
            ),
        ],
        html,
    )
        .into_response()
}

/// The query's pairs without the blank ones, in order.
fn non_empty_pairs(raw: Option<&str>) -> Vec<(String, String)> {
    form_urlencoded::parse(raw.unwrap_or("").as_bytes())
        .filter(|(_, v)| !v.trim().is_empty())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// Re-encodes pairs as a query string; `None` when there are none.
fn serialize_pairs(pairs: &[(String, String)]) -> Option<String> {
    if pairs.is_empty() {
        return None;
    }
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    Some(s.finish())
}

/// What the form shows: what the person typed, even when it was refused.
#[derive(Debug, Default)]
struct FormValues {
    from: String,
    to: String,
    calendar: String,
    risk_free: String,
    benchmark: String,
    /// The page's `rebase=1`.
    rebase: bool,
}

impl FormValues {
    fn of(pairs: &[(String, String)]) -> Self {
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        FormValues {
            from: get("from"),
            to: get("to"),
            calendar: get("calendar"),
            risk_free: get("risk_free"),
            benchmark: get("benchmark"),
            rebase: false,
        }
    }
}

struct PageData<'a> {
    history: &'a History,
    query: &'a HistoryQuery,
    charts: &'a Charts,
    /// What was held at the range's end (none when there is no record
    /// there).
    positions: Option<&'a crate::query::Positions>,
}

const CSS: &str = "\
:root{color-scheme:light}\
*{box-sizing:border-box}\
body{margin:0;font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#222;background:#f4f5f7}\
main{max-width:1040px;margin:0 auto;padding:24px 20px 40px}\
h1{font-size:1.5em;margin:0 0 4px;display:flex;gap:12px;align-items:center;flex-wrap:wrap}\
.sub{color:#666;margin:0 0 16px}\
h2{font-size:1.1em;margin:0 0 8px}\
.badge{font-size:.6em;font-weight:600;padding:2px 10px;border-radius:999px;text-transform:uppercase;letter-spacing:.04em}\
.ok{background:#e3f4ea;color:#17653a}\
.recomputing{background:#fff3d6;color:#7a5200}\
.inconsistent{background:#fde4e1;color:#9b1c11}\
.card{background:#fff;border:1px solid #e2e4e8;border-radius:8px;padding:16px;margin:0 0 16px}\
.notice{border-left:4px solid #c9a227}\
.error{border-left:4px solid #c0392b}\
form{display:flex;flex-wrap:wrap;gap:12px 16px;align-items:flex-end}\
label{display:flex;flex-direction:column;font-size:.85em;color:#555;gap:4px}\
input,select{font:inherit;padding:5px 8px;border:1px solid #c8ccd2;border-radius:5px;background:#fff}\
button{font:inherit;padding:6px 16px;border:0;border-radius:5px;background:#0072b2;color:#fff;cursor:pointer}\
.chart svg{display:block;width:100%;height:auto}\
table{border-collapse:collapse;width:100%}\
th,td{padding:6px 10px;border-bottom:1px solid #eceef1;text-align:left;vertical-align:top}\
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
td.note{color:#777;font-size:.88em}\
tr:last-child th,tr:last-child td{border-bottom:0}\
.scroll{overflow-x:auto}\
td.up{color:#17653a}td.down{color:#9b1c11}\
a{color:#0063a0}\
.links{display:flex;gap:18px;flex-wrap:wrap}\
label.check{flex-direction:row;align-items:center;gap:6px;padding-bottom:6px}\
.tools{margin:0 0 10px;display:flex;gap:18px;flex-wrap:wrap}\
.chart .narrow{display:none}\
.lines{margin-top:12px}\
.lines table{width:auto}\
.nowrap{white-space:nowrap}\
.lines p{margin:8px 0 0}\
.sw{display:inline-block;width:22px;height:0;border-top:3px solid #0072b2;vertical-align:middle;margin-right:8px}\
.sw.bm{border-top:3px dashed #009e73}\
@media (max-width:600px){\
main{padding:14px 10px 28px}\
h1{font-size:1.25em}\
.card{padding:10px;margin-bottom:12px}\
th,td{padding:5px 6px}\
.chart .wide{display:none}\
.chart .narrow{display:block}\
.wide-only{display:none}\
}\
";

fn render_page(
    id: &str,
    form: &FormValues,
    query: Option<&str>,
    data: Result<PageData<'_>, &str>,
) -> String {
    let id_e = escape_html(id);
    let suffix = query.map(|q| format!("?{q}")).unwrap_or_default();
    let json_href = escape_html(&format!("/api/v1/portfolio/{id}/nav-history{suffix}"));
    let svg_href = escape_html(&format!("/api/v1/portfolio/{id}/nav-history.svg{suffix}"));
    let csv_href = escape_html(&format!("/api/v1/portfolio/{id}/nav-history.csv{suffix}"));
    let page_href = escape_html(&format!("/portfolio/{id}"));

    let mut h = String::with_capacity(64 * 1024);
    let _ = writeln!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>NAV \u{2014} {id_e}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>"
    );

    // Heading and status.
    match &data {
        Ok(d) => {
            let st = &d.history.status;
            let class = match st.state {
                "ok" | "recomputing" | "inconsistent" => st.state,
                _ => "recomputing",
            };
            let _ = writeln!(
                h,
                "<h1>Portfolio {id_e} <span class=\"badge {class}\">{}</span></h1>",
                escape_html(st.state)
            );
            let range = match (d.history.from, d.history.to) {
                (Some(f), Some(t)) => format!("{f} to {t}"),
                _ => "no records".to_string(),
            };
            let _ = writeln!(
                h,
                "<p class=\"sub\">Range shown: {} \u{b7} as of {} \u{b7} {} day(s)</p>",
                escape_html(&range),
                opt_date(d.history.as_of),
                d.history.points.len()
            );
            match st.state {
                "recomputing" => {
                    let _ = writeln!(
                        h,
                        "<div class=\"card notice\">A late event is being folded in: \
                         records from {} on may still change.</div>",
                        opt_date(st.since)
                    );
                }
                "inconsistent" => {
                    let _ = writeln!(
                        h,
                        "<div class=\"card error\"><strong>Inconsistent history</strong> \
                         since {}{}: {}</div>",
                        opt_date(st.since),
                        st.event_id
                            .map(|e| format!(" (event {})", escape_html(&e.to_string())))
                            .unwrap_or_default(),
                        st.detail
                            .as_deref()
                            .map(escape_html)
                            .unwrap_or_else(|| "no detail recorded".into())
                    );
                }
                _ => {}
            }
        }
        Err(_) => {
            let _ = writeln!(h, "<h1>Portfolio {id_e}</h1>");
        }
    }

    // The form: a plain GET to this same page.
    let selected = |v: &str| {
        if form.calendar == v {
            " selected"
        } else {
            ""
        }
    };
    let _ = writeln!(
        h,
        "<div class=\"card\"><form method=\"get\" action=\"{page_href}\">\n\
         <label>From<input type=\"date\" name=\"from\" value=\"{}\"></label>\n\
         <label>To<input type=\"date\" name=\"to\" value=\"{}\"></label>\n\
         <label>Calendar<select name=\"calendar\">\
         <option value=\"trading\"{}>trading days (252/yr)</option>\
         <option value=\"all\"{}>all days (365/yr)</option></select></label>\n\
         <label>Risk-free rate (annual, e.g. 0.02)<input type=\"number\" name=\"risk_free\" \
         step=\"any\" min=\"-0.9999\" max=\"0.9999\" placeholder=\"0\" value=\"{}\"></label>\n\
         <label>Benchmark symbol<input type=\"text\" name=\"benchmark\" maxlength=\"32\" \
         placeholder=\"none\" value=\"{}\"></label>\n\
         <label class=\"check\"><input type=\"checkbox\" name=\"rebase\" value=\"1\"{}>\
         Rebased to 1</label>\n\
         <button type=\"submit\">Show</button> <a href=\"{page_href}\">reset</a>\n\
         </form></div>",
        escape_html(&form.from),
        escape_html(&form.to),
        selected("trading"),
        selected("all"),
        escape_html(&form.risk_free),
        escape_html(&form.benchmark),
        if form.rebase { " checked" } else { "" },
    );

    match &data {
        Err(reason) => {
            let _ = writeln!(
                h,
                "<div class=\"card error\"><strong>This range cannot be shown:</strong> {}</div>",
                escape_html(reason)
            );
        }
        Ok(d) => {
            // The same page, rebased or not.
            let toggle = {
                let mut q = query.map(str::to_string).unwrap_or_default();
                if !form.rebase {
                    q.push_str(if q.is_empty() {
                        "rebase=1"
                    } else {
                        "&rebase=1"
                    });
                }
                let href = if q.is_empty() {
                    format!("/portfolio/{id}")
                } else {
                    format!("/portfolio/{id}?{q}")
                };
                escape_html(&href)
            };
            let _ = writeln!(
                h,
                "<div class=\"card chart\">\n<div class=\"tools\"><a class=\"toggle\" href=\"{toggle}\">{}</a></div>",
                if form.rebase {
                    "Show the NAV as recorded"
                } else {
                    "Rebase the range to 1"
                }
            );
            // plotters escapes the text it writes, so the SVG can be inlined.
            let _ = writeln!(
                h,
                "<div class=\"wide\" role=\"img\" aria-label=\"NAV curve and drawdown\">{}</div>\n\
                 <div class=\"narrow\" role=\"img\" aria-label=\"NAV curve and drawdown\">{}</div>",
                d.charts.wide, d.charts.narrow
            );
            write_lines(
                &mut h,
                d.history,
                form.rebase,
                d.query.benchmark.as_ref().map(|b| b.as_str()),
            );
            h.push_str("</div>\n");
            write_stats(&mut h, &d.history.statistics, d.query);
            write_periods(&mut h, &d.history.statistics.periods);
            if let Some(last) = d.history.points.last() {
                write_last_day(&mut h, last);
            }
            if let Some(p) = d.positions {
                write_positions(&mut h, p);
            }
            let _ = writeln!(
                h,
                "<div class=\"card links\"><a href=\"{json_href}\">JSON of this range</a>\
                 <a href=\"{csv_href}\">CSV of this range</a>\
                 <a href=\"{svg_href}\">SVG picture</a><a href=\"/\">All portfolios</a></div>"
            );
        }
    }
    h.push_str("</main>\n</body>\n</html>\n");
    h
}

/// A number of the lines' table: 6 places, half away from zero.
fn places6(v: Decimal) -> String {
    format!(
        "{:.6}",
        v.round_dp_with_strategy(6, RoundingStrategy::MidpointAwayFromZero)
    )
}

/// Under the picture, when it is rebased or has a benchmark: each line's
/// value on the day before the range, at its end, and the change, in exact
/// decimals from W0, the points' `net_value` and their `benchmark_index`.
fn write_lines(h: &mut String, hist: &History, rebased: bool, bench: Option<&str>) {
    let (Some(first), Some(last)) = (hist.points.first(), hist.points.last()) else {
        return;
    };
    let Some(base_day) = first.date.pred_opt() else {
        return;
    };
    if !rebased && bench.is_none() {
        return;
    }
    let w0 = hist.w0;
    let start = if rebased { Decimal::ONE } else { w0 };
    let nav_end = last.net_value.parse::<Decimal>().ok().and_then(|v| {
        if rebased {
            v.checked_div(w0)
        } else {
            Some(v)
        }
    });
    let mut rows = vec![(
        "nav",
        if rebased { "NAV rebased" } else { "NAV" }.to_string(),
        nav_end,
        String::new(),
    )];
    if let Some(name) = bench {
        let level = hist
            .points
            .iter()
            .rev()
            .find_map(|p| match &p.benchmark_index {
                Some(Some(x)) => x.parse::<Decimal>().ok().map(|x| (p.date, x)),
                _ => None,
            });
        let status = hist
            .statistics
            .benchmark
            .as_ref()
            .map(|b| b.benchmark_status.as_str())
            .filter(|s| *s != "ok");
        let (end, note) = match level {
            Some((day, x)) => (
                if rebased { Some(x) } else { w0.checked_mul(x) },
                if day == last.date {
                    String::new()
                } else {
                    format!("last level on {day}")
                },
            ),
            None => (
                None,
                status.map_or_else(|| "no level in this range".to_string(), str::to_string),
            ),
        };
        rows.push((
            "bm",
            if rebased {
                format!("{name} rebased")
            } else {
                name.to_string()
            },
            end,
            note,
        ));
    }
    let _ = writeln!(
        h,
        "<div class=\"lines scroll\"><table>\n<tr><th>Line</th><th>On {base_day}</th><th>On {}</th>\
         <th>Change</th></tr>",
        last.date
    );
    for (class, name, end, note) in rows {
        let change = end
            .and_then(|e| e.checked_div(start))
            .and_then(|r| (r - Decimal::ONE).to_f64());
        let sign = match change {
            Some(c) if c > 0.0 => " up",
            Some(c) if c < 0.0 => " down",
            _ => "",
        };
        let _ = writeln!(
            h,
            "<tr class=\"line-{class}\"><th scope=\"row\"><span class=\"sw {class}\"></span>{}</th>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num{sign}\">{}</td></tr>",
            escape_html(&name),
            places6(start),
            end.map_or_else(|| NULL.to_string(), places6),
            match change {
                Some(c) => pct(c),
                None => escape_html(&note),
            }
        );
    }
    h.push_str("</table>\n");
    let explain = match (rebased, bench) {
        (true, Some(b)) => format!(
            "Rebased: the NAV divided by its value on {base_day}, the day before the range \
             (W0 = {}), and the {b} index B / B\u{2080} over the same day, so both start at 1.",
            places6(w0)
        ),
        (true, None) => format!(
            "Rebased: the NAV divided by its value on {base_day}, the day before the range \
             (W0 = {}), so it starts at 1.",
            places6(w0)
        ),
        (false, Some(b)) => format!(
            "The {b} line starts from the NAV on {base_day}, the day before the range: \
             W0 \u{b7} B / B\u{2080}, what the starting value would have become in {b}."
        ),
        (false, None) => String::new(),
    };
    let _ = writeln!(h, "<p class=\"sub\">{}</p></div>", escape_html(&explain));
}

fn write_stats(h: &mut String, s: &Statistics, q: &HistoryQuery) {
    let not_recovered = s.max_drawdown < 0.0 && s.max_drawdown_recovery.is_none();
    let rows: [(&str, String, &str); 14] = [
        (
            "Total return",
            pct(s.total_return),
            "last NAV / NAV before the range \u{2212} 1",
        ),
        (
            "Annual return",
            opt(s.annual_return, pct),
            "compounded per year; only with at least a year of returns",
        ),
        (
            "Max drawdown",
            pct(s.max_drawdown),
            "deepest fall below a previous peak",
        ),
        ("Drawdown peak", opt_date(s.max_drawdown_peak), ""),
        ("Drawdown trough", opt_date(s.max_drawdown_trough), ""),
        (
            "Drawdown recovery",
            opt_date(s.max_drawdown_recovery),
            if not_recovered {
                "not recovered yet"
            } else {
                "first day back at the peak"
            },
        ),
        (
            "Volatility",
            opt(s.volatility, pct),
            "annualized standard deviation of returns",
        ),
        ("Sharpe ratio", opt(s.sharpe_ratio, ratio), "annualized"),
        ("Sortino ratio", opt(s.sortino_ratio, ratio), "annualized"),
        (
            "Calmar ratio",
            opt(s.calmar_ratio, ratio),
            "annual return / |max drawdown|",
        ),
        (
            "Money-weighted return",
            opt(s.money_weighted_return, pct),
            "annual rate your deposits and withdrawals earned (XIRR)",
        ),
        (
            "Modified Dietz",
            opt(s.modified_dietz, pct),
            "the range's gain over its time-weighted capital",
        ),
        (
            "Observations",
            s.observations.to_string(),
            "number of returns used",
        ),
        (
            "Calendar / risk-free",
            format!(
                "{} / {}",
                match q.stats.calendar {
                    projections::Calendar::Trading => "trading",
                    projections::Calendar::All => "all",
                },
                pct(q.stats.risk_free)
            ),
            match q.stats.calendar {
                projections::Calendar::Trading => "Mon\u{2013}Fri records, 252 periods a year",
                projections::Calendar::All => "every record, 365 periods a year",
            },
        ),
    ];
    let bench_rows: Vec<(&str, String, &str)> = match &s.benchmark {
        None => Vec::new(),
        Some(b) => vec![
            (
                "Benchmark",
                q.benchmark
                    .as_ref()
                    .map_or_else(String::new, |s| s.to_string()),
                if b.benchmark_status == "ok" {
                    ""
                } else {
                    b.benchmark_status.as_str()
                },
            ),
            (
                "Benchmark return",
                opt(b.benchmark_total_return, pct),
                "over the same days",
            ),
            ("Beta", opt(b.beta, ratio), "sensitivity to the benchmark"),
            (
                "Alpha",
                opt(b.alpha, pct),
                "annualized, beyond what beta explains",
            ),
            (
                "Tracking error",
                opt(b.tracking_error, pct),
                "annualized stdev of the difference",
            ),
            (
                "Information ratio",
                opt(b.information_ratio, ratio),
                "annualized",
            ),
            ("Correlation", opt(b.correlation, ratio), ""),
            (
                "Up capture",
                opt(b.up_capture, ratio),
                "on the benchmark's up days",
            ),
            (
                "Down capture",
                opt(b.down_capture, ratio),
                "on its down days",
            ),
        ],
    };
    h.push_str("<div class=\"card\"><h2>Statistics of the range</h2><table>\n");
    for (name, value, note) in rows.into_iter().chain(bench_rows) {
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\">{}</th><td class=\"num\">{}</td><td class=\"note\">{}</td></tr>",
            escape_html(name),
            escape_html(&value),
            escape_html(note)
        );
    }
    h.push_str("</table></div>\n");
}

/// Monthly returns, a row per year with its months and the year's own
/// return, coloured by sign; a period the range covers only in part is
/// marked with an asterisk.
fn write_periods(h: &mut String, p: &projections::Periods) {
    if p.monthly.is_empty() {
        return;
    }
    let cell = |r: &projections::PeriodReturn| {
        let class = if r.value > 0.0 {
            "num up"
        } else if r.value < 0.0 {
            "num down"
        } else {
            "num"
        };
        format!(
            "<td class=\"{class}\">{}{}</td>",
            escape_html(&pct(r.value)),
            if r.partial { "*" } else { "" }
        )
    };
    h.push_str(
        "<div class=\"card scroll\"><h2>Returns by month and year</h2><table><tr><th>Year</th>",
    );
    for m in [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ] {
        let _ = write!(h, "<th>{m}</th>");
    }
    h.push_str("<th>Year</th></tr>\n");
    for y in &p.yearly {
        let _ = write!(h, "<tr><th scope=\"row\">{}</th>", escape_html(&y.period));
        for m in 1..=12 {
            let name = format!("{}-{m:02}", y.period);
            match p.monthly.iter().find(|x| x.period == name) {
                Some(r) => h.push_str(&cell(r)),
                None => h.push_str("<td></td>"),
            }
        }
        h.push_str(&cell(y));
        h.push_str("</tr>\n");
    }
    h.push_str("</table><p class=\"sub\">* the range covers only part of the period</p></div>\n");
}

/// The positions at the range's end: prices in their own currency with
/// the rate that converted them, values in the portfolio's.
fn write_positions(h: &mut String, p: &crate::query::Positions) {
    let _ = writeln!(
        h,
        "<div class=\"card scroll\"><h2>{}</h2><table><tr><th>Symbol</th><th>Quantity</th>\
         <th>Price</th><th>Rate</th><th>Value</th><th>Weight</th><th>Cost</th><th>Unrealized</th></tr>",
        escape_html(&format!("Held on {}", p.date))
    );
    for x in &p.positions {
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\">{}</th><td class=\"num\">{}</td><td class=\"num\">{} {}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape_html(&x.symbol),
            escape_html(&x.quantity),
            escape_html(&x.price),
            escape_html(&x.currency),
            escape_html(&x.fx_rate),
            escape_html(&x.value),
            x.weight.map_or_else(|| NULL.to_string(), pct),
            escape_html(&x.cost),
            escape_html(&x.unrealized_pnl),
        );
    }
    for c in &p.cash {
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\">Cash {}</th><td class=\"num\">{}</td><td></td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td></td><td></td><td></td></tr>",
            escape_html(&c.currency),
            escape_html(&c.amount),
            escape_html(&c.fx_rate),
            escape_html(&c.value)
        );
    }
    if p.positions.is_empty() && p.cash.is_empty() {
        h.push_str("<tr><td colspan=\"8\">nothing held</td></tr>\n");
    }
    h.push_str("</table></div>\n");
}

/// The money of the range's last day: what the value is made of, and what
/// the portfolio earned so far besides price moves.
fn write_last_day(h: &mut String, p: &crate::query::Point) {
    let rows: [(&str, &str, &str); 8] = [
        (
            "Market value",
            &p.market_value,
            "holdings + cash + receivable",
        ),
        ("Holdings", &p.holdings_value, "quantity \u{d7} price"),
        ("Cash", &p.cash, "0 unless the portfolio tracks cash"),
        (
            "Receivable",
            &p.receivable,
            "dividends past their ex-date, not yet paid",
        ),
        ("Cost", &p.cost, "moving-average cost of the open positions"),
        ("Profit", &p.profit, "value + money out \u{2212} money in"),
        ("Income", &p.income, "net dividends and interest so far"),
        (
            "Realized P&L",
            &p.realized_pnl,
            "sells' proceeds less the cost they released",
        ),
    ];
    let _ = writeln!(
        h,
        "<div class=\"card\"><h2>{}</h2><table>",
        escape_html(&format!("On {}", p.date))
    );
    for (name, value, note) in rows {
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\">{}</th><td class=\"num\">{}</td><td class=\"note\">{}</td></tr>",
            escape_html(name),
            escape_html(value),
            escape_html(note)
        );
    }
    h.push_str("</table></div>\n");
}

const NULL: &str = "\u{2014}";

/// A fixed-decimal number without the confusing "-0.00".
fn fixed(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return NULL.to_string();
    }
    let s = format!("{v:.decimals$}");
    match s.strip_prefix('-') {
        Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => rest.to_string(),
        _ => s,
    }
}

fn pct(v: f64) -> String {
    if v.is_finite() {
        format!("{}%", fixed(v * 100.0, 2))
    } else {
        NULL.to_string()
    }
}

fn ratio(v: f64) -> String {
    fixed(v, 2)
}

fn opt(v: Option<f64>, f: fn(f64) -> String) -> String {
    v.map_or_else(|| NULL.to_string(), f)
}

fn opt_date(d: Option<NaiveDate>) -> String {
    d.map_or_else(|| NULL.to_string(), |d| d.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    /// Three years of a deterministic wavy curve with a real drawdown.
    fn three_years() -> Vec<(NaiveDate, f64)> {
        let start = day("2021-01-01");
        (0..(3 * 365))
            .map(|i| {
                let t = f64::from(i);
                let v = 1.0 + t / 2000.0 + 0.08 * (t / 60.0).sin();
                (start + chrono::Days::new(i as u64), v)
            })
            .collect()
    }

    #[test]
    fn renders_three_years() {
        let svg = render_svg(&three_years(), 960, 540, "p-1 <NAV> & co").unwrap();
        assert!(svg.contains("<svg"), "{svg}");
        assert!(svg.contains("<polyline") || svg.contains("<path"));
        assert!(
            svg.contains("<polygon") || svg.contains("<path"),
            "area drawn"
        );
        // Text is escaped by the backend and uses a generic family.
        assert!(svg.contains("p-1 &lt;NAV&gt; &amp; co"));
        assert!(!svg.contains("<NAV>"));
        assert!(svg.contains("sans-serif"));
        // Calendar-aligned date labels on the bottom axis.
        assert!(svg.contains("2022"), "year labels");
        assert!(svg.contains("Drawdown"));
        assert!(svg.trim_end().ends_with("</svg>"));
        dump("chart.svg", &svg);
    }

    /// `NAVD_CHART_DUMP=dir cargo test --lib chart` writes the picture and
    /// the page there, to look at them.
    fn dump(name: &str, body: &str) {
        if let Some(dir) = std::env::var_os("NAVD_CHART_DUMP") {
            std::fs::write(std::path::Path::new(&dir).join(name), body).unwrap();
        }
    }

    #[test]
    fn page_shows_status_chart_stats_and_links() {
        use crate::query::PortfolioStatus;
        let series = three_years();
        let points = series
            .iter()
            .map(|(d, v)| crate::query::Point {
                date: *d,
                net_value: format!("{v:.12}"),
                return_rate: "0".into(),
                daily_return: "0".into(),
                market_value: "0".into(),
                cost: "0".into(),
                net_flow: "0".into(),
                profit: "0".into(),
                holdings_value: "0".into(),
                cash: "12.50000000".into(),
                receivable: "0".into(),
                income: "3.25000000".into(),
                realized_pnl: "0".into(),
                benchmark_index: None,
            })
            .collect();
        let mut status = PortfolioStatus::ok();
        status.state = "inconsistent";
        status.since = Some(day("2023-02-01"));
        status.detail = Some("sell of <XYZ> exceeds the position".into());
        let history = History {
            portfolio_id: "p-1001".into(),
            from: Some(series[0].0),
            to: Some(series[series.len() - 1].0),
            as_of: Some(series[series.len() - 1].0),
            status,
            points,
            w0: Decimal::ONE,
            version: 0,
            pending_from: None,
            statistics: Statistics {
                max_drawdown: -0.1234,
                max_drawdown_peak: Some(day("2021-03-05")),
                max_drawdown_trough: Some(day("2021-06-10")),
                max_drawdown_recovery: None,
                volatility: Some(0.1567),
                sharpe_ratio: Some(0.8123),
                sortino_ratio: None,
                total_return: 0.55,
                annual_return: Some(0.157),
                calmar_ratio: Some(1.27),
                observations: 782,
                money_weighted_return: Some(0.0912),
                modified_dietz: Some(0.0877),
                periods: projections::Periods {
                    monthly: vec![
                        projections::PeriodReturn {
                            period: "2023-11".into(),
                            value: 0.0123,
                            partial: true,
                        },
                        projections::PeriodReturn {
                            period: "2023-12".into(),
                            value: -0.0456,
                            partial: false,
                        },
                    ],
                    yearly: vec![projections::PeriodReturn {
                        period: "2023".into(),
                        value: -0.0339,
                        partial: true,
                    }],
                },
                benchmark: Some(projections::BenchmarkStats {
                    beta: Some(1.234),
                    alpha: Some(0.0456),
                    tracking_error: Some(0.07),
                    information_ratio: Some(0.5),
                    correlation: Some(0.9),
                    up_capture: Some(1.1),
                    down_capture: Some(0.8),
                    benchmark_total_return: Some(0.31),
                    benchmark_status: "ok".into(),
                }),
            },
        };
        let q = HistoryQuery::parse(Some("from=2021-01-01&calendar=all&benchmark=IDX")).unwrap();
        let curve = curve_of(&history).unwrap();
        let charts = Charts {
            wide: draw(&picture(&history, &curve, "t", false, None), WIDTH, HEIGHT).unwrap(),
            narrow: draw(&picture(&history, &curve, "t", false, None), 400, 520).unwrap(),
        };
        let form = FormValues::of(&non_empty_pairs(Some("from=2021-01-01&calendar=all")));
        let html = render_page(
            "p-1001",
            &form,
            Some("from=2021-01-01&calendar=all"),
            Ok(PageData {
                history: &history,
                query: &q,
                charts: &charts,
                positions: Some(&crate::query::Positions {
                    portfolio_id: "p-1001".into(),
                    date: day("2023-12-29"),
                    market_value: "100.00000000".into(),
                    positions: vec![crate::query::PositionView {
                        symbol: "<ACME>".into(),
                        quantity: "3".into(),
                        cost: "90.00000000".into(),
                        average_cost: "30.00000000".into(),
                        price: "33.5".into(),
                        price_date: Some(day("2023-12-29")),
                        currency: "USD".into(),
                        fx_rate: "1".into(),
                        value: "100.50000000".into(),
                        weight: Some(1.0),
                        unrealized_pnl: "10.50000000".into(),
                    }],
                    cash: vec![],
                    receivable: "0.00000000".into(),
                }),
            }),
        );
        assert!(html.contains("<svg"));
        assert!(!html.contains("<script"));
        assert!(html.contains("sell of &lt;XYZ&gt; exceeds"));
        assert!(html.contains("-12.34%") && html.contains("15.67%") && html.contains("0.81"));
        assert!(html.contains("not recovered yet"));
        assert!(html.contains("Realized P&amp;L"));
        assert!(html.contains("9.12%") && html.contains("8.77%"));
        assert!(html.contains(">Beta<") && html.contains("1.23") && html.contains("31.00%"));
        assert!(html.contains("Held on 2023-12-29") && html.contains("&lt;ACME&gt;"));
        assert!(html.contains("<td class=\"num up\">1.23%*</td>"));
        assert!(html.contains("<td class=\"num down\">-4.56%</td>"));
        assert!(html.contains("<td class=\"num down\">-3.39%*</td>"));
        assert!(html.contains("<td class=\"num\">100.50000000</td>"));
        assert!(html.contains("<td class=\"num\">12.50000000</td>"));
        assert!(html.contains("<td class=\"num\">3.25000000</td>"));
        assert!(html.contains("<option value=\"all\" selected>"));
        assert!(html.contains("value=\"2021-01-01\""));
        assert!(
            html.contains("/api/v1/portfolio/p-1001/nav-history?from=2021-01-01&amp;calendar=all")
        );
        assert!(html
            .contains("/api/v1/portfolio/p-1001/nav-history.svg?from=2021-01-01&amp;calendar=all"));
        dump("page.html", &html);
    }

    /// A month of NAVs starting from W0 = 1.25 (so rebased they start at
    /// 1), and a benchmark index rising 0.5% a day.
    type Series = Vec<(NaiveDate, f64)>;

    fn month_with_benchmark() -> (Series, Series) {
        let start = day("2024-03-01");
        let nav = (0..31u64)
            .map(|i| {
                (
                    start + chrono::Days::new(i),
                    1.25 + 0.01 * (i as f64 / 3.0).sin(),
                )
            })
            .collect();
        let index = (0..31u64)
            .map(|i| (start + chrono::Days::new(i), 1.0 + 0.005 * (i + 1) as f64))
            .collect();
        (nav, index)
    }

    #[test]
    fn rebased_picture_draws_both_lines_from_one_with_a_legend_and_hover() {
        let (nav, index) = month_with_benchmark();
        let base = Base {
            day: day("2024-02-29"),
            w0: 1.25,
            rebased: true,
            benchmark: Some(("IDX", &index)),
        };
        let p = Picture {
            title: "p-1",
            nav: &nav,
            base: Some(base),
        };
        let svg = render(&p, 960, 540).unwrap();
        dump("rebased.svg", &svg);
        // The benchmark is drawn (its colour), and the legend names both.
        assert!(svg.contains("#009E73"), "benchmark line");
        assert!(svg.contains("\nNAV rebased\n</text>") && svg.contains("\nIDX rebased\n</text>"));
        assert!(svg.contains("both = 1 on 2024-02-29"));
        // One hover title per day, the base day first, at 1 for both.
        assert_eq!(svg.matches("<title>").count(), 32, "31 days + the base day");
        assert!(svg.contains(
            "<title>2024-02-29 (the day before the range)\nNAV rebased 1.000000 (recorded 1.250000)\nIDX rebased 1.000000"
        ), "{}", &svg[svg.find("<title>").unwrap()..][..200]);
        // The last day: NAV / W0 and the index as given.
        let last = nav[30].1;
        assert!(svg.contains(&format!(
            "<title>2024-03-31\nNAV rebased {:.6} (recorded {last:.6})\nIDX rebased 1.155000",
            last / 1.25
        )));
        // The drawdown now starts from W0, like the statistic.
        assert!(svg.contains("deepest"));

        // Not rebased: the benchmark starts from W0 instead.
        let plain = render(
            &Picture {
                base: Some(Base {
                    rebased: false,
                    ..base
                }),
                ..p
            },
            960,
            540,
        )
        .unwrap();
        assert!(plain.contains("\nNAV\n</text>") && plain.contains("\nIDX\n</text>"));
        assert!(
            plain.contains("\nIDX 1.443750 (index 1.155000)"),
            "W0 · B/B0"
        );
        assert!(plain.contains("benchmark from the NAV of 2024-02-29"));

        // Without a base: the picture of the API, no legend, no base day.
        let bare = render_svg(&nav, 960, 540, "p-1").unwrap();
        assert!(!bare.contains("#009E73") && !bare.contains("2024-02-29"));
        assert!(bare.contains("Net value (NAV)"));
        assert_eq!(bare.matches("<title>").count(), 31);
    }

    #[test]
    fn compact_picture_is_phone_sized() {
        let (nav, index) = month_with_benchmark();
        let p = Picture {
            title: "p-1 \u{2014} 2024-03-01 to 2024-03-31",
            nav: &nav,
            base: Some(Base {
                day: day("2024-02-29"),
                w0: 1.25,
                rebased: true,
                benchmark: Some(("IDX", &index)),
            }),
        };
        let svg = render(&p, NARROW.0, NARROW.1).unwrap();
        dump("compact.svg", &svg);
        assert!(svg.contains("width=\"360\""));
        assert!(svg.contains("Drawdown \u{2014} deepest"));
        assert!(!svg.contains("below the running peak"), "short captions");
        assert!(svg.contains("both = 1 on 2024-02-29") && svg.contains("\nIDX\n</text>"));
        // Fewer date labels than the wide picture's.
        let years = three_years();
        let labels = |w, h| {
            let svg = render_svg(&years, w, h, "t").unwrap();
            [
                "\nJan ", "\nApr ", "\nJul ", "\nOct ", "\n2022\n", "\n2023\n",
            ]
            .iter()
            .map(|m| svg.matches(m).count())
            .sum::<usize>()
        };
        let (narrow, wide) = (labels(NARROW.0, NARROW.1), labels(WIDTH, HEIGHT));
        assert!(
            (2..=4).contains(&narrow) && wide > narrow,
            "{narrow} vs {wide}"
        );
    }

    #[test]
    fn rebase_parameter() {
        let pairs = |q| non_empty_pairs(Some(q));
        let (r, rest) = take_rebase(pairs("from=2024-01-01&rebase=1&benchmark=IDX"));
        assert_eq!(r, Ok(true));
        assert_eq!(
            serialize_pairs(&rest).as_deref(),
            Some("from=2024-01-01&benchmark=IDX"),
            "the rest is the API's query"
        );
        assert_eq!(take_rebase(pairs("rebase=0")).0, Ok(false));
        assert_eq!(
            take_rebase(pairs("rebase=")).0,
            Ok(false),
            "blank: not given"
        );
        assert_eq!(take_rebase(pairs("to=2024-01-01")).0, Ok(false));
        assert!(take_rebase(pairs("rebase=yes"))
            .0
            .unwrap_err()
            .contains("1 or 0"));
        assert!(take_rebase(pairs("rebase=1&rebase=1"))
            .0
            .unwrap_err()
            .contains("twice"));
    }

    #[test]
    fn lines_table_in_exact_decimals() {
        use crate::query::{Point, PortfolioStatus};
        let point = |d: &str, nav: &str, idx: Option<&str>| Point {
            date: day(d),
            net_value: nav.into(),
            return_rate: "0".into(),
            daily_return: "0".into(),
            market_value: "0".into(),
            cost: "0".into(),
            net_flow: "0".into(),
            profit: "0".into(),
            holdings_value: "0".into(),
            cash: "0".into(),
            receivable: "0".into(),
            income: "0".into(),
            realized_pnl: "0".into(),
            benchmark_index: Some(idx.map(str::to_string)),
        };
        let hist = History {
            portfolio_id: "p".into(),
            from: Some(day("2024-03-01")),
            to: Some(day("2024-03-03")),
            as_of: None,
            status: PortfolioStatus::ok(),
            points: vec![
                point("2024-03-01", "2.100000000000", None),
                point("2024-03-02", "2.200000000000", Some("1.050000000000")),
                point("2024-03-03", "2.500000000000", Some("1.100000000000")),
            ],
            w0: Decimal::new(2, 0),
            statistics: projections::statistics(
                Decimal::ONE,
                day("2024-02-29"),
                &[],
                &projections::StatsQuery::default(),
            ),
            version: 0,
            pending_from: None,
        };
        let mut h = String::new();
        write_lines(&mut h, &hist, true, Some("IDX"));
        assert!(
            h.contains("<th>On 2024-02-29</th><th>On 2024-03-03</th>"),
            "{h}"
        );
        assert!(h.contains("NAV rebased</th><td class=\"num\">1.000000</td><td class=\"num\">1.250000</td><td class=\"num up\">25.00%</td>"), "{h}");
        assert!(h.contains("IDX rebased</th><td class=\"num\">1.000000</td><td class=\"num\">1.100000</td><td class=\"num up\">10.00%</td>"), "{h}");
        assert!(h.contains("(W0 = 2.000000)"));
        let mut h = String::new();
        write_lines(&mut h, &hist, false, Some("IDX"));
        assert!(
            h.contains(">NAV</th><td class=\"num\">2.000000</td><td class=\"num\">2.500000</td>"),
            "{h}"
        );
        assert!(h.contains(">IDX</th><td class=\"num\">2.000000</td><td class=\"num\">2.200000</td><td class=\"num up\">10.00%</td>"), "{h}");
        // Neither rebased nor compared: no table.
        let mut h = String::new();
        write_lines(&mut h, &hist, false, None);
        assert!(h.is_empty());
    }

    #[test]
    fn no_and_one_point_do_not_panic() {
        let empty = render_svg(&[], 960, 540, "empty").unwrap();
        assert!(empty.contains("<svg") && empty.contains("No data"));
        let one = render_svg(&[(day("2024-03-01"), 0.998)], 960, 540, "one").unwrap();
        assert!(one.contains("<svg") && one.contains("2024-03-01"));
        dump("empty.svg", &empty);
        dump("one.svg", &one);
        let start = day("2024-02-26");
        let short: Vec<_> = (0..12u64)
            .map(|i| {
                (
                    start + chrono::Days::new(i),
                    1.0 - 0.002 * (i as f64 - 5.0).abs(),
                )
            })
            .collect();
        dump("short.svg", &render_svg(&short, 960, 540, "short").unwrap());
    }

    #[test]
    fn odd_inputs_do_not_panic() {
        // Flat, unsorted, duplicated, non-finite, tiny and huge sizes.
        let d = day("2024-01-01");
        let flat = [(d + chrono::Days::new(1), 1.0), (d, 1.0), (d, 1.0)];
        assert!(render_svg(&flat, 1, 1, "").unwrap().contains("<svg"));
        let nan = [(d, f64::NAN), (d + chrono::Days::new(1), f64::INFINITY)];
        assert!(render_svg(&nan, 960, 540, "x").unwrap().contains("No data"));
        let two = [(d, 1.0), (d + chrono::Days::new(1), 0.5)];
        assert!(render_svg(&two, 100_000, 100_000, "x")
            .unwrap()
            .contains("<svg"));
        let zero = [(d, 0.0), (d + chrono::Days::new(1), 0.0)];
        assert!(render_svg(&zero, 960, 540, "x").unwrap().contains("<svg"));
    }

    #[test]
    fn thinning_keeps_the_shape_and_the_extremes() {
        let start = day("1925-01-01");
        let mut long: Vec<(NaiveDate, f64)> = (0..40_000u64)
            .map(|i| {
                let t = i as f64;
                (start + chrono::Days::new(i), 2.0 + (t / 500.0).sin())
            })
            .collect();
        long[23_456].1 = 0.01; // a one-day crash
        long[7_777].1 = 9.0; // a one-day spike
        let thin = downsample(&long, MAX_PLOT_POINTS);
        assert!(thin.len() <= MAX_PLOT_POINTS, "{}", thin.len());
        assert!(thin.len() >= MAX_PLOT_POINTS - 2, "{}", thin.len());
        assert_eq!(thin.first(), long.first());
        assert_eq!(thin.last(), long.last());
        assert!(thin.windows(2).all(|w| w[0].0 < w[1].0), "day order");
        assert!(thin.contains(&long[23_456]) && thin.contains(&long[7_777]));
        // Short series are untouched.
        assert_eq!(
            downsample(&long[..100], MAX_PLOT_POINTS),
            long[..100].to_vec()
        );

        // The picture of the long series is bounded and names the crash.
        let svg = render_svg(&long, 960, 540, "long").unwrap();
        assert!(svg.len() < 300_000, "{} bytes", svg.len());
        assert!(svg.contains("deepest -99.89%"), "the trough survives");
    }

    #[tokio::test]
    async fn a_full_pool_answers_503_with_retry_after() {
        let pool = RenderPool::new(1, Duration::from_millis(50));
        let held = pool.slot().await.unwrap();
        assert_eq!(pool.available(), 0);
        let err = pool.slot().await.unwrap_err();
        let resp = err.into_response();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "5");
        assert_eq!(
            resp.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
        // The slot is held until the drawing is done, then freed.
        let n = RenderPool::run(held, || Ok(21 * 2)).await.unwrap();
        assert_eq!(n, 42);
        assert_eq!(pool.available(), 1);
        assert!(pool.slot().await.is_ok());
    }

    #[test]
    fn escapes_html() {
        assert_eq!(
            escape_html(r#"<a href="x">Tom & 'Jerry'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;"
        );
        assert_eq!(escape_html("p-1001"), "p-1001");
    }

    #[test]
    fn page_escapes_what_the_person_typed() {
        let form = FormValues {
            from: "\"><script>alert(1)</script>".into(),
            ..FormValues::default()
        };
        let html = render_page("p-1", &form, Some("from=x"), Err("`from` <bad>"));
        assert!(!html.contains("<script"));
        assert!(html.contains("&lt;script&gt;"));
        assert!(html.contains("`from` &lt;bad&gt;"));
    }

    #[test]
    fn empty_form_fields_are_dropped() {
        let pairs = non_empty_pairs(Some("from=&to=2024-03-04&calendar=all&risk_free=+"));
        assert_eq!(
            serialize_pairs(&pairs).as_deref(),
            Some("to=2024-03-04&calendar=all")
        );
        assert_eq!(serialize_pairs(&non_empty_pairs(Some("from=&to="))), None);
        assert_eq!(serialize_pairs(&non_empty_pairs(None)), None);
        // What remains goes through the strict parser unchanged.
        let q = serialize_pairs(&pairs);
        assert!(HistoryQuery::parse(q.as_deref()).is_ok());
        assert!(HistoryQuery::parse(Some("from=&to=")).is_err());
    }

    #[test]
    fn human_formatting() {
        assert_eq!(pct(-0.123456), "-12.35%");
        assert_eq!(pct(-0.000001), "0.00%");
        assert_eq!(ratio(1.23456), "1.23");
        assert_eq!(opt(None, ratio), "\u{2014}");
        assert_eq!(opt_date(Some(day("2024-03-04"))), "2024-03-04");
        assert_eq!(opt_date(None), "\u{2014}");
    }

    #[test]
    fn date_ticks_are_calendar_aligned() {
        let a = DateAxis::new(day("2021-01-01"), day("2023-12-31"), X_LABELS);
        let t = a.key_points(X_LABELS);
        assert!(!t.is_empty() && t.len() <= X_LABELS);
        assert!(t.iter().all(|d| d.day() == 1), "{t:?}");
        let short = DateAxis::new(day("2024-03-01"), day("2024-03-04"), X_LABELS);
        let t = short.key_points(X_LABELS);
        assert_eq!(t.first(), Some(&day("2024-03-01")));
        assert_eq!(short.label(&t[0]), "2024-03-01");
        assert!(DateAxis::new(day("2024-01-01"), day("2024-01-02"), 3)
            .key_points(0)
            .is_empty());
    }
}
