//! What the portfolio page says when it cannot show everything asked
//! for, and what to do about it: an inconsistent history (which event,
//! what fixes it, where to look), a benchmark with no level on the range
//! (why, and a range that would draw it), a range with too few records.

use std::fmt::Write as _;

use chrono::NaiveDate;

use super::tables::opt_date;
use crate::http::html::escape_html;
use crate::query::{History, PortfolioStatus};

/// A link to the portfolio's page with `query` (the API's) changed by
/// `set` (a `None` value drops the parameter), with the page's own
/// `rebase=1` and `view=value` as `(rebase, value_view)` say; escaped for
/// an attribute.
pub(super) fn page_link(
    id: &str,
    query: Option<&str>,
    set: &[(&str, Option<String>)],
    (rebase, value_view): (bool, bool),
) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if !set.iter().any(|(name, _)| *name == k) {
            s.append_pair(&k, &v);
        }
    }
    for (k, v) in set {
        if let Some(v) = v {
            s.append_pair(k, v);
        }
    }
    if rebase {
        s.append_pair("rebase", "1");
    }
    if value_view {
        s.append_pair("view", "value");
    }
    let q = s.finish();
    escape_html(&if q.is_empty() {
        format!("/portfolio/{id}")
    } else {
        format!("/portfolio/{id}?{q}")
    })
}

/// The inconsistency banner: what is wrong, since when, and what to do.
pub(super) fn write_inconsistency(h: &mut String, id: &str, st: &PortfolioStatus) {
    let detail = st.detail.as_deref().unwrap_or("no detail recorded");
    let event = st
        .event_id
        .map(|e| format!(" (event <code>{}</code>)", escape_html(&e.to_string())))
        .unwrap_or_default();
    let since = opt_date(st.since);
    let _ = write!(
        h,
        "<div class=\"card error advice\"><strong>Inconsistent history</strong> since {since}{event}: \
         {}.<p>Records from {since} on are neither shown nor stored until the events are \
         consistent again; navd recomputes them by itself as soon as they are.</p>\
         <p><strong>What to do:</strong></p><ul>",
        escape_html(detail)
    );
    if detail.contains(" rate on or before ") {
        let _ = write!(
            h,
            "<li>Publish the missing exchange rate on the rates topic (<code>nav.fx</code> by \
             default), dated {since} or earlier.</li>"
        );
    } else if detail.contains("exceeds the position") {
        let who = if st.event_id.is_some() {
            "That event"
        } else {
            "The event"
        };
        let _ = write!(
            h,
            "<li>{who} sells or transfers out more than was held on {since}: publish the buy \
             or <code>transfer_in</code> it relies on, dated on or before {since}; if {} was \
             sent by mistake, or with a wrong quantity, cancel or amend it (a \
             <code>cancel</code>, or a corrected version with <code>corrects</code> and \
             <code>revision</code>).</li>",
            who.to_lowercase()
        );
        if detail.contains("allow_short") {
            h.push_str(
                "<li>If the account sells short, its settings need <code>allow_short: \
                 true</code> (a <code>portfolio_settings</code> event with <code>cash: \
                 tracked</code>): a short sale is then valued, not refused.</li>",
            );
        }
        h.push_str(
            "<li>If that buy was sent, it may have been refused: look for it among the dead \
             letters, <a href=\"/api/v1/admin/dead-letters\">/api/v1/admin/dead-letters</a> \
             (scope <code>nav:admin</code>), where each refusal names the field at fault.</li>",
        );
    } else if detail.contains("overflow") {
        h.push_str(
            "<li>A value left the range of exact decimals: look for an amount, price or \
             quantity with far too many digits in the events of that day.</li>",
        );
    } else {
        h.push_str(
            "<li>Publish the event that makes the day consistent (the detail above names \
             what is missing).</li>",
        );
    }
    if let Some(day) = st.since.and_then(|d| d.pred_opt()) {
        let href = escape_html(&format!("/portfolio/{id}?to={day}"));
        let _ = write!(
            h,
            "<li><a href=\"{href}\">The page up to {day}</a>, the last consistent day: what \
             was held then.</li>"
        );
    }
    h.push_str("</ul></div>\n");
}

/// What the page asked for that it cannot draw: the page's link (id, the
/// API's query, its own `(rebase, value_view)`), the read, and for a
/// benchmark asked for, the days of its first and last close.
pub(super) struct Asked<'a> {
    pub(super) id: &'a str,
    pub(super) query: Option<&'a str>,
    pub(super) flags: (bool, bool),
    pub(super) history: &'a History,
    pub(super) benchmark: Option<&'a str>,
    pub(super) bench_span: Option<(NaiveDate, NaiveDate)>,
}

/// Why part of what was asked is not drawn, with a way to what can be.
pub(super) fn write_undrawn(h: &mut String, a: &Asked<'_>) {
    let (id, query, flags) = (a.id, a.query, a.flags);
    let n = a.history.points.len();
    if n < 2 {
        let last = a
            .history
            .as_of
            .map(|l| format!(" The portfolio's records run through {l}."))
            .unwrap_or_else(|| " The portfolio has no records yet.".to_string());
        let _ = writeln!(
            h,
            "<div class=\"card notice\"><strong>Nothing to draw:</strong> this range holds {n} \
             record(s), and a curve needs two.{last} <a href=\"{}\">Show the whole history</a>.</div>",
            page_link(id, query, &[("from", None), ("to", None)], flags)
        );
        return;
    }
    let (Some(sym), Some(b)) = (a.benchmark, &a.history.statistics.benchmark) else {
        return;
    };
    if b.benchmark_status == "ok" || flags.1 {
        return;
    }
    let base = a.history.points[0]
        .date
        .pred_opt()
        .unwrap_or(NaiveDate::MIN);
    let _ = write!(
        h,
        "<div class=\"card notice\"><strong>The {sym} line cannot be drawn on this range:</strong> {}.",
        escape_html(&b.benchmark_status)
    );
    match a.bench_span {
        Some((first, _)) if first > base => {
            let from = first.succ_opt().unwrap_or(first);
            let to = a.history.to.filter(|t| *t >= from).map(|t| t.to_string());
            let _ = write!(
                h,
                " Its closes start on {first}, after {base} (the day before the range, which \
                 both lines start from), so there is no level to compare with. \
                 <a href=\"{}\">Show the range from {from}</a>, the first day it can be drawn from.",
                page_link(
                    id,
                    query,
                    &[("from", Some(from.to_string())), ("to", to)],
                    flags
                )
            );
        }
        _ => h.push_str(
            " Rebasing draws the NAV alone until the benchmark has a level on the day \
             before the range.",
        ),
    }
    h.push_str("</div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::State;

    fn advice(detail: &str) -> String {
        let st = PortfolioStatus {
            state: State::Inconsistent,
            since: NaiveDate::from_ymd_opt(2024, 3, 6),
            event_id: None,
            detail: Some(detail.to_string()),
        };
        let mut h = String::new();
        write_inconsistency(&mut h, "p-1", &st);
        h
    }

    /// An oversell's advice points at the missing buy and at cancel and
    /// amend (events can be corrected); a tracked book's short sale also
    /// at `allow_short`, which a securities-only book cannot have.
    #[test]
    fn an_oversell_is_fixed_by_the_missing_event_a_correction_or_allow_short() {
        let tracked =
            advice("sell of 8 NAS exceeds the position of 5 (a short sale needs allow_short)");
        let none = advice("sell of 12 ASN exceeds the position of 10");
        for h in [&tracked, &none] {
            assert!(h.contains("<code>cancel</code>"), "{h}");
            assert!(h.contains("<code>corrects</code>"), "{h}");
            assert!(h.contains("transfer_in</code> it relies on"), "{h}");
            assert!(!h.contains("never edited"), "{h}");
        }
        assert!(tracked.contains("allow_short: true"), "{tracked}");
        assert!(!none.contains("allow_short"), "{none}");
    }
}
