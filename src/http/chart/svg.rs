//! Drawing the picture: [`render`] (and [`render_svg`], the plain curve)
//! turns a [`Picture`] into an SVG document with plotters' SVG backend —
//! the NAV panel (optionally rebased, with a benchmark line and a legend),
//! the drawdown panel, and a hover layer with a `<title>` per day —, with
//! [`downsample`] bounding the points drawn, and the picture's sizes,
//! type and colours. Pure functions: no I/O, no async.
//!
//! Text is drawn as SVG `<text>` elements naming a generic font family
//! (`sans-serif`): the viewer's browser picks the font, so no font file or
//! plotters' `ttf` feature is needed on the server.

use std::fmt::Write as _;
use std::ops::Range;

use chrono::NaiveDate;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::{DateAxis, X_LABELS};
use super::format::fixed;
use super::marks::mark_layer;
use super::picture::{prepare, Legend, Picture, Prepared};
use crate::http::html::escape_html;

/// Size of the picture served and inlined (16:9, readable on a laptop).
pub(super) const WIDTH: u32 = 960;
pub(super) const HEIGHT: u32 = 540;

/// Size of the compact picture the page shows on a phone's screen (about
/// its width in CSS pixels, so its type keeps about its size).
pub(super) const NARROW: (u32, u32) = (360, 480);

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
/// [`Base`](super::Base) draws that day too, and then the two agree.)
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
            marks: &[],
        },
        width,
        height,
    )
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
            draw_chart(&root, &prepared, p, &style)
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

/// Draws both panels; answers the hover layer and the ex-date marks (SVG
/// fragments, the marks on top).
fn draw_chart(
    root: &Area<'_>,
    p: &Prepared,
    picture: &Picture<'_>,
    style: &Style,
) -> DrawResult<String> {
    let (title, series) = (picture.title, &p.nav);
    root.fill(&WHITE)?;
    let body = root.titled(title, (FONT, style.title).into_font().color(&TEXT_COLOR))?;
    let (_, h) = body.dim_in_pixel();
    // The curve is what people came for: give it about 60% of the height.
    let (top, bottom) = body.split_vertically(h * 3 / 5);

    let x = DateAxis::new(series[0].0, series[series.len() - 1].0, style.x_labels)
        .short_labels(style.compact);
    let drawdown = Drawdown::of(series);
    let y = NavScale::of(p, style);

    let top = match &p.legend {
        Some(legend) => {
            let (strip, rest) = top.split_vertically(style.caption + 14);
            draw_legend(&strip, legend, style, 10 + y.label_area)?;
            rest
        }
        None => top,
    };
    let nav_chart = draw_nav_panel(&top, p, &x, &y, drawdown.worst, style)?;
    let dd_chart = draw_drawdown_panel(&bottom, &x, &drawdown, y.label_area, style)?;
    let mut layers = hover_layer(p, &drawdown.series, &nav_chart, &dd_chart, y.range.start);
    let (_, ys) = nav_chart.plotting_area().get_pixel_range();
    let (_, dd_ys) = dd_chart.plotting_area().get_pixel_range();
    layers.push_str(&mark_layer(
        picture.marks,
        (series[0].0, series[series.len() - 1].0),
        |d| nav_chart.backend_coord(&(d, y.range.start)).0,
        (ys.start, dd_ys.end),
    ));
    Ok(layers)
}

/// A panel of the picture: dates across, numbers up.
type Panel<'a> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<DateAxis, RangedCoordf64>>;

/// The deepest drawdown: (% below the peak, peak day, trough day).
type Worst = (f64, NaiveDate, NaiveDate);

/// Drawdown in percent by day, and where the deepest one bottoms out,
/// over every point; only the drawing is thinned.
struct Drawdown {
    series: Vec<(NaiveDate, f64)>,
    /// 0 % on the first day when the series never falls.
    worst: Worst,
}

impl Drawdown {
    /// The drawdown of a non-empty day-sorted series.
    fn of(series: &[(NaiveDate, f64)]) -> Self {
        let first = series[0].0;
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
        Drawdown {
            series: drawdown,
            worst,
        }
    }
}

/// The NAV panel's y range and labels, and the room for y labels that both
/// panels take (so their plotting areas line up).
struct NavScale {
    range: Range<f64>,
    /// Decimals of the y labels.
    decimals: usize,
    label_area: u32,
}

impl NavScale {
    fn of(p: &Prepared, style: &Style) -> Self {
        let (lo, hi) = p
            .nav
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
        let range = (lo - span * 0.05)..(hi + span * 0.05);
        let decimals = decimals_for(range.end - range.start);
        let widest = [range.start, range.end]
            .iter()
            .map(|v| format!("{v:.decimals$}"))
            .max_by_key(String::len)
            .unwrap_or_default();
        let label_area = style.y_label_area(&widest).max(style.y_label_area("-100%"));
        NavScale {
            range,
            decimals,
            label_area,
        }
    }
}

/// The top panel: the NAV (and the benchmark, dashed), the reference line
/// at 1 when it is in range, and dots on the deepest drawdown's peak and
/// trough.
fn draw_nav_panel<'a>(
    area: &Area<'a>,
    p: &Prepared,
    x: &DateAxis,
    y: &NavScale,
    worst: Worst,
    style: &Style,
) -> DrawResult<Panel<'a>> {
    let series = &p.nav;
    let label_font = (FONT, style.label).into_font().color(&TEXT_COLOR);
    let axis_desc = (FONT, 14).into_font().color(&TEXT_COLOR);
    let caption = (FONT, style.caption).into_font().color(&TEXT_COLOR);
    let mut builder = ChartBuilder::on(area);
    if p.legend.is_none() {
        builder.caption("Net value (NAV)", caption);
    }
    let mut nav_chart = builder
        .margin_left(10)
        .margin_right(style.margin_right)
        .margin_top(5)
        // No date labels here: the bottom panel carries them, and the
        // vertical grid lines of both panels line up on the same days.
        .x_label_area_size(0)
        .y_label_area_size(y.label_area)
        .build_cartesian_2d(x.clone(), y.range.clone())?;
    let nav_decimals = y.decimals;
    let nav_label = |v: &f64| format!("{v:.nav_decimals$}");
    let mut mesh = nav_chart.configure_mesh();
    mesh.x_labels(style.x_labels)
        .y_labels(6)
        .y_label_formatter(&nav_label)
        .label_style(label_font)
        .axis_desc_style(axis_desc)
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
    let (first, last) = (series[0].0, series[series.len() - 1].0);
    // The starting value 1 is the natural reference for a NAV.
    if y.range.start < 1.0 && 1.0 < y.range.end {
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
    mark_deepest(&mut nav_chart, series, worst)?;
    Ok(nav_chart)
}

/// Dots on the NAV where the deepest drawdown peaks and bottoms out.
fn mark_deepest(
    nav_chart: &mut Panel<'_>,
    series: &[(NaiveDate, f64)],
    worst: Worst,
) -> DrawResult {
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
    Ok(())
}

/// The bottom panel: the drawdown as an area below 0, captioned with the
/// deepest, and the date labels of both panels.
fn draw_drawdown_panel<'a>(
    area: &Area<'a>,
    x: &DateAxis,
    drawdown: &Drawdown,
    label_area: u32,
    style: &Style,
) -> DrawResult<Panel<'a>> {
    let worst = drawdown.worst;
    let label_font = (FONT, style.label).into_font().color(&TEXT_COLOR);
    let axis_desc = (FONT, 14).into_font().color(&TEXT_COLOR);
    let caption = (FONT, style.caption).into_font().color(&TEXT_COLOR);
    let floor = (worst.0 * 1.1).min(-1.0);
    let y_dd = floor..(-floor * 0.04);
    let dd_decimals = if -floor >= 5.0 { 0 } else { 1 };
    let mut dd_chart = ChartBuilder::on(area)
        .caption(drawdown_caption(worst, style.compact), caption)
        .margin_left(10)
        .margin_right(style.margin_right)
        .margin_bottom(5)
        .x_label_area_size(if style.compact { 30 } else { 40 })
        .y_label_area_size(label_area)
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
            downsample(&drawdown.series, MAX_PLOT_POINTS),
            0.0,
            DD_COLOR.mix(0.25),
        )
        .border_style(DD_COLOR.stroke_width(1)),
    )?;
    Ok(dd_chart)
}

/// The drawdown panel's caption, short when compact.
fn drawdown_caption(worst: Worst, compact: bool) -> String {
    match (worst.0 < 0.0, compact) {
        (true, false) => format!(
            "Drawdown (% below the running peak) \u{2014} deepest {:.2}% on {}",
            worst.0, worst.2
        ),
        (true, true) => format!("Drawdown \u{2014} deepest {:.2}%", worst.0),
        (false, false) => {
            "Drawdown (% below the running peak) \u{2014} none in this range".to_string()
        }
        (false, true) => "Drawdown \u{2014} none".to_string(),
    }
}

/// The hover layer: a transparent column per day (or group of days) over
/// both panels, with the day's values as its `<title>`.
fn hover_layer(
    p: &Prepared,
    drawdown: &[(NaiveDate, f64)],
    nav_chart: &Panel<'_>,
    dd_chart: &Panel<'_>,
    y_start: f64,
) -> String {
    let series = &p.nav;
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
        .map(|&i| nav_chart.backend_coord(&(series[i].0, y_start)).0)
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
    layer
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::chart::picture::Base;
    use crate::http::chart::test_data::{day, dump, three_years};

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
            marks: &[],
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
        // An ex-date in the range is marked over both panels, on top.
        let marks = [super::super::marks::ExMark {
            day: day("2024-03-15"),
            lines: vec!["split 2:1 of X".into()],
        }];
        let marked = render(&Picture { marks: &marks, ..p }, 960, 540).unwrap();
        dump("marked.svg", &marked);
        assert_eq!(marked.matches("<g class=\"ex\"").count(), 1);
        let at = marked
            .find("<title>2024-03-15\nsplit 2:1 of X</title>")
            .unwrap();
        assert!(at > marked.rfind("<g class=\"hv\"").unwrap());

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
            marks: &[],
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
}
