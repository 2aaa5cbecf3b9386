//! The rolling chart of a page (docs/valuation.md, "The tear sheet"; `rolling=N`): the annualised
//! volatility (top panel, in %) and Sharpe ratio (bottom panel, with its
//! zero line) of each day's last N sampled returns, drawn under the NAV
//! and drawdown panels. Written as SVG by hand, like the value chart: two
//! panels of one or two lines need no plotters. A pure function of the
//! read's points (their `rolling_volatility` and `rolling_sharpe`).
//!
//! The page asks its read for `rolling=`[`ROLLING_DEFAULT`] unless its
//! address gives another `rolling=N`: 63 sampled returns are about three
//! months of trading days (a quarter of 252), long enough for a stable
//! figure, short enough to show a year's changes.

use std::fmt::Write as _;

use chrono::NaiveDate;

use super::axis::{write_date_axis, PlotBox};
use super::format::fixed;
use super::svg::{downsample, MAX_PLOT_POINTS};
use crate::http::html::escape_html;
use crate::query::Point;

/// The page's window when its address gives none (see the module docs).
pub(super) const ROLLING_DEFAULT: usize = 63;

const VOL_COLOR: &str = "#0072B2";
const SHARPE_COLOR: &str = "#CC79A7";

/// A run of days that have the figure (the first N − 1 days, and a
/// Sharpe ratio of returns that do not vary, have none).
type Run = Vec<(NaiveDate, f64)>;

/// The runs of one figure over the points.
fn runs(points: &[Point], figure: fn(&Point) -> Option<f64>) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    let mut open = false;
    for p in points {
        match figure(p).filter(|v| v.is_finite()) {
            Some(v) => {
                if !open {
                    out.push(Vec::new());
                    open = true;
                }
                if let Some(run) = out.last_mut() {
                    run.push((p.date, v));
                }
            }
            None => open = false,
        }
    }
    out
}

fn volatility(p: &Point) -> Option<f64> {
    p.rolling_volatility.flatten()
}

fn sharpe(p: &Point) -> Option<f64> {
    p.rolling_sharpe.flatten()
}

/// One panel: where it is drawn and what it maps.
struct Panel {
    x: f64,
    y: f64,
    w: f64,
    h: f64,
    start: NaiveDate,
    end: NaiveDate,
    lo: f64,
    hi: f64,
}

impl Panel {
    fn px(&self, d: NaiveDate) -> f64 {
        let span = ((self.end - self.start).num_days() as f64).max(1.0);
        self.x + self.w * (d - self.start).num_days() as f64 / span
    }

    fn py(&self, v: f64) -> f64 {
        self.y + self.h * (1.0 - (v - self.lo) / (self.hi - self.lo).max(f64::MIN_POSITIVE))
    }
}

/// A round step of about a quarter of `span`, and the range it rounds to.
fn scale(lo: f64, hi: f64) -> (f64, f64, f64) {
    let span = (hi - lo).max(1e-9);
    let raw = span / 4.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|f| f * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    ((lo / step).floor() * step, (hi / step).ceil() * step, step)
}

/// The rolling chart, `width` × `height` (compact below 600 px), over the
/// days of `points`; `window` is N, for the titles.
pub(super) fn render_rolling(points: &[Point], window: usize, width: u32, height: u32) -> String {
    let compact = width < 600;
    let (w, h) = (f64::from(width), f64::from(height));
    let font = if compact { 14.0 } else { 13.0 };
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"{font}\">\
         <rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>"
    );
    let vol = runs(points, volatility);
    let shp = runs(points, sharpe);
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return no_data(s, (w, h), window, compact);
    };
    if vol.iter().all(|r| r.len() < 2) {
        return no_data(s, (w, h), window, compact);
    }
    let left = if compact { 46.0 } else { 64.0 };
    let (right, gap) = (14.0, if compact { 62.0 } else { 56.0 });
    let panel_h = (h - 34.0 - 30.0 - gap) / 2.0;
    let frame = |y: f64, values: &[Run], pct: bool| {
        let all = values.iter().flatten().map(|x| x.1);
        let (lo, hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
        // Volatility from 0; the Sharpe ratio with its zero line.
        let (lo, hi) = if lo > hi {
            (0.0, 1.0)
        } else if pct {
            (0.0, hi)
        } else {
            (lo.min(0.0), hi.max(0.0))
        };
        let (lo, hi, step) = scale(lo, hi);
        let p = Panel {
            x: left,
            y,
            w: w - left - right,
            h: panel_h,
            start: first.date,
            end: last.date,
            lo,
            hi,
        };
        (p, step)
    };
    let (top, step_v) = frame(34.0, &vol, true);
    let (bottom, step_s) = frame(34.0 + panel_h + gap, &shp, false);
    // Compact titles fit a phone's 360 px from the picture's left edge.
    let (vol_title, shp_title) = if compact {
        (
            format!("Volatility, last {window} returns (annualised)"),
            format!("Sharpe ratio, last {window} returns"),
        )
    } else {
        (
            format!("Volatility of the last {window} returns (annualised)"),
            format!("Sharpe ratio of the last {window} returns"),
        )
    };
    panel(&mut s, &top, (step_v, true), (&vol_title, compact));
    panel(&mut s, &bottom, (step_s, false), (&shp_title, compact));
    lines(&mut s, &top, &vol, (VOL_COLOR, "volatility", true));
    lines(&mut s, &bottom, &shp, (SHARPE_COLOR, "Sharpe ratio", false));
    s.push_str("</svg>");
    s
}

fn no_data(mut s: String, (w, h): (f64, f64), window: usize, compact: bool) -> String {
    let _ = write!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#787878\">\
         fewer than {window} returns{}: no rolling figures</text></svg>",
        w / 2.0,
        h / 2.0,
        if compact { "" } else { " in this range" }
    );
    s
}

/// A panel's title, grid, labels and frame.
fn panel(s: &mut String, p: &Panel, (step, pct): (f64, bool), (title, compact): (&str, bool)) {
    let _ = write!(
        s,
        "<text x=\"{}\" y=\"{}\" fill=\"#282828\" font-weight=\"600\">{}</text>",
        if compact { 8.0 } else { p.x },
        p.y - 10.0,
        escape_html(title)
    );
    let mut v = p.lo;
    while v <= p.hi + step / 2.0 {
        let y = p.py(v);
        let label = if pct {
            format!("{}%", fixed(v * 100.0, if step < 0.01 { 1 } else { 0 }))
        } else {
            fixed(v, if step < 1.0 { 1 } else { 0 })
        };
        let stroke = if v.abs() < step / 1e6 && !pct {
            "#9a9a9a"
        } else {
            "#e6e6e6"
        };
        let _ = write!(
            s,
            "<line x1=\"{}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"{stroke}\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#505050\">{}</text>",
            p.x,
            p.x + p.w,
            p.x - 6.0,
            y + 4.0,
            escape_html(&label)
        );
        v += step;
    }
    let frame = PlotBox {
        x: p.x,
        y: p.y,
        w: p.w,
        h: p.h,
        start: p.start,
        end: p.end,
    };
    write_date_axis(s, &frame, compact, 18.0);
}

/// The figure's runs as lines, with its last value as a hover title.
fn lines(s: &mut String, p: &Panel, runs: &[Run], (color, what, pct): (&str, &str, bool)) {
    for run in runs {
        let mut pts = String::new();
        for (d, v) in downsample(run, MAX_PLOT_POINTS) {
            let _ = write!(pts, "{:.1},{:.1} ", p.px(d), p.py(v));
        }
        let Some((day, v)) = run.last() else {
            continue;
        };
        let value = if pct {
            format!("{}%", fixed(v * 100.0, 2))
        } else {
            fixed(*v, 2)
        };
        let _ = write!(
            s,
            "<polyline class=\"rolling\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" \
             points=\"{}\"><title>{}</title></polyline>",
            pts.trim_end(),
            escape_html(&format!("{what} {value} on {day}"))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::chart::test_data::{day, dump};

    fn point(i: u64, vol: Option<f64>, sharpe: Option<f64>) -> Point {
        Point {
            date: day("2024-01-01") + chrono::Days::new(i),
            net_value: "1".into(),
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
            inflow: "0".into(),
            outflow: "0".into(),
            long_value: "0".into(),
            short_value: "0".into(),
            futures_notional: "0".into(),
            gross_exposure: "0".into(),
            net_exposure: "0".into(),
            leverage: None,
            accrued_interest: "0".into(),
            benchmark_index: None,
            rolling_volatility: Some(vol),
            rolling_sharpe: Some(sharpe),
        }
    }

    #[test]
    fn both_panels_with_the_gaps_left_open() {
        let pts: Vec<Point> = (0..120)
            .map(|i| {
                let t = i as f64;
                let vol = (i >= 62).then_some(0.1 + t / 1000.0);
                // No Sharpe ratio on days 80 … 89 (flat returns).
                let sharpe = (i >= 62 && !(80..90).contains(&i)).then_some(1.5 - t / 50.0);
                point(i, vol, sharpe)
            })
            .collect();
        let svg = render_rolling(&pts, 63, 960, 320);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("Volatility of the last 63 returns (annualised)"));
        assert!(svg.contains("Sharpe ratio of the last 63 returns"));
        assert_eq!(
            svg.matches("<polyline").count(),
            3,
            "one vol run, two Sharpe runs"
        );
        assert!(
            svg.contains("<title>volatility 21.90% on 2024-04-29</title>"),
            "{svg}"
        );
        assert!(
            svg.contains("<title>Sharpe ratio -0.88 on 2024-04-29</title>"),
            "{svg}"
        );
        dump("rolling.svg", &svg);
        let compact = render_rolling(&pts, 63, 360, 380);
        assert!(compact.contains("width=\"360\""));
        let none = render_rolling(&pts[..50], 63, 960, 320);
        assert!(none.contains("fewer than 63 returns"));
    }

    #[test]
    fn round_scales() {
        assert_eq!(scale(0.0, 0.37), (0.0, 0.4, 0.1));
        assert_eq!(scale(-1.2, 2.3), (-2.0, 3.0, 1.0));
    }
}
