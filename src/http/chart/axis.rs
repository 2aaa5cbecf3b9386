//! The date x-axis shared by both panels: [`DateAxis`], a plotters
//! [`Ranged`] coordinate whose ticks fall on calendar boundaries (Mondays,
//! first of a month / quarter / year) and whose labels are as precise as
//! the tick spacing needs.

use std::ops::Range;

use chrono::{Datelike, NaiveDate};
use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};

/// How many date labels the x-axis aims for (10 characters each fit well).
pub(super) const X_LABELS: usize = 8;

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
pub(super) struct DateAxis {
    start: NaiveDate,
    end: NaiveDate,
    /// The spacing of the labelled ticks, which decides the label format.
    label_step: Step,
    /// Day labels without the year (`4 Mar`), for a narrow picture whose
    /// title gives the range.
    short: bool,
}

impl DateAxis {
    pub(super) fn new(start: NaiveDate, end: NaiveDate, labels: usize) -> Self {
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

    /// The same axis, with day labels without the year when `short`.
    pub(super) fn short_labels(self, short: bool) -> Self {
        DateAxis { short, ..self }
    }

    /// The labelled ticks, on calendar boundaries (for pictures drawn
    /// without plotters).
    pub(super) fn labelled_ticks(&self) -> Vec<NaiveDate> {
        ticks(self.start, self.end, self.label_step)
    }

    /// The label of a tick, as precise as the tick spacing needs.
    pub(super) fn label(&self, d: &NaiveDate) -> String {
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

/// The plot area of a hand-drawn SVG picture: its box and the dates
/// its width spans.
pub(super) struct PlotBox {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
    pub start: NaiveDate,
    pub end: NaiveDate,
}

impl PlotBox {
    fn px(&self, d: NaiveDate) -> f64 {
        let span = ((self.end - self.start).num_days() as f64).max(1.0);
        self.x + self.w * (d - self.start).num_days() as f64 / span
    }
}

/// Writes the date axis under `b` (a grid line and a label per labelled
/// tick, `label_dy` below the box) and the box's frame.
pub(super) fn write_date_axis(s: &mut String, b: &PlotBox, compact: bool, label_dy: f64) {
    use std::fmt::Write as _;
    let axis = DateAxis::new(b.start, b.end, if compact { 4 } else { 8 }).short_labels(compact);
    for d in axis.labelled_ticks() {
        let x = b.px(d);
        // A label at the right end would be cut by the picture's edge.
        let anchor = if x > b.x + b.w - 40.0 {
            "end"
        } else {
            "middle"
        };
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#eeeeee\"/>\
             <text x=\"{x:.1}\" y=\"{}\" text-anchor=\"{anchor}\" fill=\"#505050\">{}</text>",
            b.y,
            b.y + b.h,
            b.y + b.h + label_dy,
            crate::http::html::escape_html(&axis.label(&d))
        );
    }
    let _ = write!(
        s,
        "<rect x=\"{}\" y=\"{}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#c8c8c8\"/>",
        b.x, b.y, b.w, b.h
    );
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
        let span = ((self.end - self.start).num_days() as f64).max(1.0);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::chart::test_data::day;

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
