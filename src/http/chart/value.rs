//! The value chart of a portfolio's page (`view=value`): its market value
//! in money over the range (a solid line), the money put in less the money
//! taken out so far (a dashed step line: what the value is to be compared
//! with), and each day's net flow marked on the value line (▲ money in,
//! ▼ money out, with a `<title>` giving the day and the amount). Written as
//! SVG by hand: one panel, a few dozen elements, no plotters needed. A pure
//! function of the read's points.

use std::fmt::Write as _;

use chrono::NaiveDate;

use super::axis::{write_date_axis, PlotBox};
use super::format::money;
use super::svg::downsample;
use crate::http::html::escape_html;
use crate::query::Point;

/// Most flow markers drawn; beyond it the largest flows are kept (the
/// tables and the CSV have every one).
const MAX_MARKERS: usize = 400;

const VALUE_COLOR: &str = "#0072B2";
const INVESTED_COLOR: &str = "#555555";
const IN_COLOR: &str = "#009E73";
const OUT_COLOR: &str = "#D55E00";

/// One day of the value chart.
#[derive(Debug, Clone, Copy)]
struct Day {
    date: NaiveDate,
    value: f64,
    /// Σ money in − Σ money out so far (value − profit).
    invested: f64,
    flow: rust_decimal::Decimal,
}

fn days_of(points: &[Point]) -> Vec<Day> {
    use rust_decimal::prelude::ToPrimitive;
    use rust_decimal::Decimal;
    points
        .iter()
        .filter_map(|p| {
            let value: Decimal = p.market_value.parse().ok()?;
            let profit: Decimal = p.profit.parse().ok()?;
            Some(Day {
                date: p.date,
                value: value.to_f64()?,
                invested: (value - profit).to_f64()?,
                flow: p.net_flow.parse().ok()?,
            })
        })
        .filter(|d| d.value.is_finite() && d.invested.is_finite())
        .collect()
}

/// A round step of about a fifth of `span`.
fn nice_step(span: f64) -> f64 {
    let raw = (span / 5.0).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 2.5 {
        2.5
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// A y label: whole money with separators, or `82.5k` / `1.2M` when compact.
fn y_label(v: f64, compact: bool) -> String {
    let a = v.abs();
    if compact && a >= 1e6 {
        format!(
            "{}M",
            super::format::fixed(v / 1e6, if a >= 1e7 { 0 } else { 1 })
        )
    } else if compact && a >= 1e3 {
        format!(
            "{}k",
            super::format::fixed(v / 1e3, if a >= 1e4 { 0 } else { 1 })
        )
    } else {
        let d = rust_decimal::Decimal::from_f64_retain(v.round()).unwrap_or_default();
        money(d, "").trim_end().trim_end_matches(".00").to_string()
    }
}

/// The value chart of `points` (a read's), `width` × `height`, money in
/// `currency`. Compact (larger type, fewer labels) below 600 px wide.
pub(super) fn render_value(
    points: &[Point],
    currency: &str,
    title: &str,
    width: u32,
    height: u32,
) -> String {
    let compact = width < 600;
    let (w, h) = (f64::from(width), f64::from(height));
    let font = if compact { 14.0 } else { 13.0 };
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"{font}\">\
         <rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\
         <text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"{}\" fill=\"#282828\">{}</text>",
        w / 2.0,
        if compact { 17 } else { 20 },
        escape_html(title)
    );
    let days = days_of(points);
    if days.len() < 2 {
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#787878\">\
             not enough records in this range to draw a value</text></svg>",
            w / 2.0,
            h / 2.0
        );
        return s;
    }
    let lo = days
        .iter()
        .map(|d| d.value.min(d.invested))
        .fold(f64::INFINITY, f64::min)
        .min(0.0);
    let hi = days
        .iter()
        .map(|d| d.value.max(d.invested))
        .fold(f64::NEG_INFINITY, f64::max);
    let step = nice_step((hi - lo).max(1.0));
    let (y0, y1) = ((lo / step).floor() * step, (hi / step).ceil() * step);
    let left = if compact { 52.0 } else { 96.0 };
    let (top, right, bottom) = (70.0, 16.0, 34.0);
    let plot = Frame {
        x: left,
        y: top,
        w: w - left - right,
        h: h - top - bottom,
        start: days[0].date,
        end: days[days.len() - 1].date,
        y0,
        y1,
    };
    legend(&mut s, currency, compact, top - 22.0, left);
    grid(&mut s, &plot, step, compact);
    lines(&mut s, &plot, &days);
    markers(&mut s, &plot, &days, currency, compact);
    s.push_str("</svg>");
    s
}

/// The plotting area and what it maps.
struct Frame {
    x: f64,
    y: f64,
    w: f64,
    h: f64,
    start: NaiveDate,
    end: NaiveDate,
    y0: f64,
    y1: f64,
}

impl Frame {
    fn px(&self, d: NaiveDate) -> f64 {
        let span = ((self.end - self.start).num_days() as f64).max(1.0);
        self.x + self.w * (d - self.start).num_days() as f64 / span
    }

    fn py(&self, v: f64) -> f64 {
        self.y + self.h * (1.0 - (v - self.y0) / (self.y1 - self.y0).max(f64::MIN_POSITIVE))
    }
}

fn legend(s: &mut String, currency: &str, compact: bool, y: f64, x: f64) {
    let (value, invested) = if compact {
        (format!("Value ({currency})"), "Net invested")
    } else {
        (
            format!("Market value ({currency})"),
            "Net invested: money in \u{2212} money out",
        )
    };
    let _ = write!(
        s,
        "<g class=\"legend\"><line x1=\"{x}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{VALUE_COLOR}\" stroke-width=\"3\"/>\
         <text x=\"{}\" y=\"{}\" fill=\"#282828\">{}</text>",
        x + 22.0,
        x + 28.0,
        y + 4.0,
        escape_html(&value)
    );
    let x2 = x + if compact { 118.0 } else { 190.0 };
    let _ = write!(
        s,
        "<line x1=\"{x2}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{INVESTED_COLOR}\" stroke-width=\"2\" stroke-dasharray=\"5 4\"/>\
         <text x=\"{}\" y=\"{}\" fill=\"#282828\">{}</text>",
        x2 + 22.0,
        x2 + 28.0,
        y + 4.0,
        escape_html(invested)
    );
    if !compact {
        let x3 = x2 + 290.0;
        let _ = write!(
            s,
            "<path d=\"M{x3} {} l5 -9 l5 9 z\" fill=\"{IN_COLOR}\"/><text x=\"{}\" y=\"{}\" fill=\"#282828\">money in</text>\
             <path d=\"M{} {} l5 9 l5 -9 z\" fill=\"{OUT_COLOR}\"/><text x=\"{}\" y=\"{}\" fill=\"#282828\">money out</text>",
            y + 4.0,
            x3 + 15.0,
            y + 4.0,
            x3 + 90.0,
            y - 5.0,
            x3 + 105.0,
            y + 4.0
        );
    }
    s.push_str("</g>");
}

fn grid(s: &mut String, f: &Frame, step: f64, compact: bool) {
    let mut v = f.y0;
    while v <= f.y1 + step / 2.0 {
        let y = f.py(v);
        let _ = write!(
            s,
            "<line x1=\"{}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#e6e6e6\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#505050\">{}</text>",
            f.x,
            f.x + f.w,
            f.x - 6.0,
            y + 4.0,
            escape_html(&y_label(v, compact))
        );
        v += step;
    }
    let frame = PlotBox {
        x: f.x,
        y: f.y,
        w: f.w,
        h: f.h,
        start: f.start,
        end: f.end,
    };
    write_date_axis(s, &frame, compact, 20.0);
}

fn polyline(f: &Frame, series: &[(NaiveDate, f64)]) -> String {
    let mut pts = String::new();
    for (d, v) in downsample(series, super::svg::MAX_PLOT_POINTS) {
        let _ = write!(pts, "{:.1},{:.1} ", f.px(d), f.py(v));
    }
    pts.trim_end().to_string()
}

fn lines(s: &mut String, f: &Frame, days: &[Day]) {
    // The invested line moves only on flow days: a step, drawn as the
    // previous level up to each flow day.
    let mut invested = Vec::with_capacity(days.len() * 2);
    for (i, d) in days.iter().enumerate() {
        if i > 0 && d.invested != days[i - 1].invested {
            invested.push((d.date, days[i - 1].invested));
        }
        invested.push((d.date, d.invested));
    }
    let value: Vec<_> = days.iter().map(|d| (d.date, d.value)).collect();
    let _ = write!(
        s,
        "<polyline class=\"invested\" fill=\"none\" stroke=\"{INVESTED_COLOR}\" stroke-width=\"2\" \
         stroke-dasharray=\"5 4\" points=\"{}\"/>\
         <polyline class=\"value\" fill=\"none\" stroke=\"{VALUE_COLOR}\" stroke-width=\"2.5\" points=\"{}\"/>",
        polyline(f, &invested),
        polyline(f, &value)
    );
}

fn markers(s: &mut String, f: &Frame, days: &[Day], currency: &str, compact: bool) {
    let mut flows: Vec<&Day> = days.iter().filter(|d| !d.flow.is_zero()).collect();
    if flows.len() > MAX_MARKERS {
        flows.sort_by_key(|d| std::cmp::Reverse(d.flow.abs()));
        flows.truncate(MAX_MARKERS);
    }
    let r = if compact { 6.0 } else { 5.0 };
    for d in flows {
        let (x, y) = (f.px(d.date), f.py(d.value));
        let (shape, color, what) = if d.flow > rust_decimal::Decimal::ZERO {
            (
                format!(
                    "M{:.1} {:.1} l{r} {} l{} 0 z",
                    x - r,
                    y + r,
                    -2.0 * r,
                    2.0 * r
                ),
                IN_COLOR,
                "money in",
            )
        } else {
            (
                format!(
                    "M{:.1} {:.1} l{r} {} l{} 0 z",
                    x - r,
                    y - r,
                    2.0 * r,
                    2.0 * r
                ),
                OUT_COLOR,
                "money out",
            )
        };
        let _ = write!(
            s,
            "<path class=\"flow\" d=\"{shape}\" fill=\"{color}\" stroke=\"#ffffff\" stroke-width=\"1\">\
             <title>{}</title></path>",
            escape_html(&format!(
                "{}: {what} {} (value {})",
                d.date,
                money(d.flow.abs(), currency),
                money(
                    rust_decimal::Decimal::from_f64_retain(d.value).unwrap_or_default(),
                    currency
                )
            ))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::chart::test_data::{day, dump};

    fn point(d: &str, value: &str, profit: &str, flow: &str) -> Point {
        Point {
            date: day(d),
            net_value: "1".into(),
            return_rate: "0".into(),
            daily_return: "0".into(),
            market_value: value.into(),
            cost: "0".into(),
            net_flow: flow.into(),
            profit: profit.into(),
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
            rolling_volatility: None,
            rolling_sharpe: None,
        }
    }

    #[test]
    fn value_invested_and_flows() {
        let pts = vec![
            point("2024-01-01", "1000.00000000", "0", "1000.00000000"),
            point("2024-01-02", "1010.00000000", "10.00000000", "0"),
            point("2024-01-03", "1512.00000000", "12.00000000", "500.00000000"),
            point("2024-01-04", "1300.00000000", "0.00000000", "-200.00000000"),
        ];
        let svg = render_value(&pts, "EUR", "p \u{2014} value", 960, 540);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("class=\"value\""));
        assert!(svg.contains("class=\"invested\""));
        assert_eq!(svg.matches("class=\"flow\"").count(), 3, "{svg}");
        assert!(svg.contains("<title>2024-01-03: money in 500.00 EUR (value 1,512.00 EUR)</title>"));
        assert!(
            svg.contains("<title>2024-01-04: money out 200.00 EUR (value 1,300.00 EUR)</title>")
        );
        assert!(svg.contains("Market value (EUR)"));
        dump("value.svg", &svg);
        let compact = render_value(&pts, "EUR", "p", 360, 480);
        assert!(compact.contains("Value (EUR)") && compact.contains("width=\"360\""));
        let none = render_value(&pts[..1], "EUR", "p", 960, 540);
        assert!(none.contains("not enough records"));
    }

    #[test]
    fn labels_and_steps() {
        assert_eq!(nice_step(1000.0), 200.0);
        assert_eq!(nice_step(12.0), 2.5);
        assert_eq!(y_label(82000.0, false), "82,000");
        assert_eq!(y_label(82500.0, true), "82k");
        assert_eq!(y_label(1_250_000.0, true), "1.2M");
        assert_eq!(y_label(1500.0, true), "1.5k");
    }
}
