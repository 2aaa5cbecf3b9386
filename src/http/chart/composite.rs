//! The composite page, `GET /composite?portfolios=a,b,c` (docs/valuation.md, "Composites"): the
//! combined curve of several portfolios drawn like a portfolio's page —
//! the same range form, the NAV and drawdown picture (wide and compact),
//! the rolling chart, the statistics, the tear sheet, the monthly returns
//! and the last day's money — from the composite API's own read
//! ([`crate::query::composite::read_composite`]), so the page and
//! `/api/v1/composite/nav-history` always agree.
//!
//! The index reaches it with a plain GET form: a checkbox per portfolio
//! named `portfolios`, so the browser sends `portfolios=a&portfolios=b`;
//! the page joins every `portfolios` value with commas (each may itself be
//! a comma-separated list) and then reads the members exactly as the API
//! does ([`crate::http::composite::parse`]): the same 400 for an empty,
//! malformed, duplicated or over-long list, shown on the page with the
//! form. Every member must be visible to the caller (else 404, the same
//! page whether the member is hidden or unknown, so a hidden portfolio's
//! existence is not told), members in different currencies are a 400, an
//! inconsistent member a 409, each naming the members.

use std::fmt::Write as _;

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Extension;

use super::handlers::{
    curve_of, draw, html_response, non_empty_pairs, picture, serialize_pairs, take_rebase,
};
use super::page::{head, write_form, FormValues, CSS_PAGE};
use super::pool::RenderPool;
use super::rolling::ROLLING_DEFAULT;
use super::svg::{HEIGHT, NARROW, WIDTH};
use super::tables::{opt_date, write_last_day, write_lines, write_periods};
use super::tearsheet::{write_rolling, write_statistics, CSS_TEAR};
use crate::http::auth::SCOPE_READ;
use crate::http::error::ApiError;
use crate::http::guard::PeerAddr;
use crate::http::html::escape_html;
use crate::http::login::PageCaller;
use crate::http::state::AppState;
use crate::query::composite::{read_composite, CompositeFailure};
use crate::query::{History, HistoryQuery, QueryError, State as Status};

/// What the page was asked: the members as typed (for the form), the
/// form's fields, and the rest of the query (for the links).
struct Asked {
    listed: String,
    form: FormValues,
    rest: Vec<(String, String)>,
}

/// Why the page shows no curve: its status and what to say.
type Refusal = (StatusCode, String);

/// `GET /composite?portfolios=a,b,c&from=…`: the members' combined curve
/// as a page (see the module docs). Scope `nav:read` (403 as
/// problem+json, like the portfolio page); everything about the members
/// and the range is answered on the page, with the form.
pub async fn composite_page(
    State(s): State<AppState>,
    PageCaller(caller): PageCaller,
    peer: Option<Extension<PeerAddr>>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    caller.require(SCOPE_READ)?;
    let (asked, parsed) = asked(raw.as_deref());
    let (ids, q) = match parsed {
        Ok(x) => x,
        Err(refusal) => return Ok(refused(&asked, refusal)),
    };
    if let Some(hidden) = ids.iter().find(|id| !caller.may_see(id)) {
        return Ok(refused(&asked, not_found(hidden)));
    }
    let q = HistoryQuery {
        rolling: q.rolling.or(Some(ROLLING_DEFAULT)),
        ..q
    };
    let permit = s.guards.admit_work(&caller, peer)?;
    let slot = RenderPool::global().slot().await?;
    let h = match read_composite(s.engine.db(), &ids, &q, &s.clock).await {
        Ok(h) => h,
        Err(e) => return Ok(refused(&asked, failure(e)?)),
    };
    let currency = crate::query::currency_of(s.engine.db(), &ids[0]).await?;
    let html = RenderPool::run(slot, move || {
        let _permit = permit;
        draw_composite(&asked, &ids, &h, &q, &currency)
    })
    .await?;
    Ok(html_response(StatusCode::OK, html))
}

/// The page's query read: the form's values, and the members and the
/// curve's query as the API reads them (or why not).
fn asked(raw: Option<&str>) -> (Asked, Result<(Vec<String>, HistoryQuery), Refusal>) {
    let (rebase, pairs) = take_rebase(non_empty_pairs(raw));
    let (members, rest): (Vec<_>, Vec<_>) = pairs.into_iter().partition(|(k, _)| k == "portfolios");
    let listed = members
        .iter()
        .map(|(_, v)| v.trim())
        .collect::<Vec<_>>()
        .join(",");
    let mut form = FormValues::of(&rest);
    form.rebase = matches!(rebase, Ok(true));
    let mut api: Vec<(String, String)> = Vec::with_capacity(rest.len() + 1);
    if !members.is_empty() {
        api.push(("portfolios".into(), listed.clone()));
    }
    api.extend(rest.iter().cloned());
    let bad = |reason: String| (StatusCode::BAD_REQUEST, reason);
    let parsed = rebase.map_err(bad).and_then(|_| {
        match crate::http::composite::parse(serialize_pairs(&api).as_deref()) {
            Ok(x) => Ok(x),
            Err(ApiError::BadRequest(reason)) => Err(bad(reason)),
            Err(e) => Err(bad(e.to_string())),
        }
    });
    (Asked { listed, form, rest }, parsed)
}

fn not_found(id: &str) -> Refusal {
    (
        StatusCode::NOT_FOUND,
        format!("portfolio `{id}` is unknown or not visible to you"),
    )
}

/// What the page says of a composite the read refused; a failure that is
/// not about the members or the query stays the API's error.
fn failure(e: CompositeFailure) -> Result<Refusal, ApiError> {
    Ok(match e {
        CompositeFailure::Unknown(id) => not_found(&id),
        CompositeFailure::Query(QueryError::NotFound) => (
            StatusCode::NOT_FOUND,
            "a member is unknown (at that instant)".to_string(),
        ),
        CompositeFailure::Query(QueryError::UnknownBenchmark(reason)) => {
            (StatusCode::BAD_REQUEST, reason)
        }
        e @ CompositeFailure::Currencies(_) => (StatusCode::BAD_REQUEST, e.to_string()),
        e @ CompositeFailure::Inconsistent(_) => (
            StatusCode::CONFLICT,
            format!(
                "{e}: its history cannot be added up until the event that broke it is \
                 corrected (open its page to see which)"
            ),
        ),
        CompositeFailure::Query(q) => return Err(q.into()),
    })
}

fn refused(asked: &Asked, (status, reason): Refusal) -> Response {
    html_response(status, render_composite(asked, Err(&reason)))
}

/// A composite's name in its pictures: its members, or how many.
fn name_of(ids: &[String]) -> String {
    if ids.len() <= 3 {
        ids.join(", ")
    } else {
        format!("{} portfolios", ids.len())
    }
}

/// The two pictures of the read, then the page around them.
fn draw_composite(
    asked: &Asked,
    ids: &[String],
    h: &History,
    q: &HistoryQuery,
    currency: &str,
) -> Result<String, ApiError> {
    let curve = curve_of(h)?;
    let bench = q.benchmark.as_ref().map(|b| b.to_string());
    let flags = (asked.form.rebase, bench.as_deref());
    let name = name_of(ids);
    let (wide_title, narrow_title) = match (h.from, h.to) {
        (Some(f), Some(t)) => (
            format!("{name} \u{2014} NAV {f} to {t}"),
            format!("{name} \u{2014} {f} to {t}"),
        ),
        _ => (format!("{name} \u{2014} NAV"), name.clone()),
    };
    let wide = draw(&picture(h, &curve, &wide_title, flags, &[]), WIDTH, HEIGHT)?;
    let narrow = draw(
        &picture(h, &curve, &narrow_title, flags, &[]),
        NARROW.0,
        NARROW.1,
    )?;
    let shown = Shown {
        ids,
        history: h,
        query: q,
        currency,
        charts: (&wide, &narrow),
    };
    Ok(render_composite(asked, Ok(&shown)))
}

/// What the page shows of a read.
struct Shown<'a> {
    ids: &'a [String],
    history: &'a History,
    query: &'a HistoryQuery,
    currency: &'a str,
    /// The wide and the compact picture.
    charts: (&'a str, &'a str),
}

/// The page: heading, the form (keeping the members), then the read or
/// why it cannot be shown.
fn render_composite(asked: &Asked, data: Result<&Shown<'_>, &str>) -> String {
    let mut h = String::with_capacity(64 * 1024);
    let css = [CSS_PAGE, CSS_TEAR, CSS_COMPOSITE].concat();
    head(&mut h, "NAV \u{2014} composite", &css);
    match data {
        Ok(d) => write_heading(&mut h, d),
        Err(_) => h.push_str("<h1>Composite</h1>\n"),
    }
    let hidden = format!(
        "<input type=\"hidden\" name=\"portfolios\" value=\"{}\">",
        escape_html(&asked.listed)
    );
    // A GET form sends its fields, not its action's query: the members go
    // in the hidden field; the action's query serves the "reset" link.
    let members = [("portfolios".to_string(), asked.listed.clone())];
    let action = format!(
        "/composite?{}",
        serialize_pairs(&members).unwrap_or_default()
    );
    write_form(&mut h, &action, &hidden, &asked.form);
    match data {
        Err(reason) => {
            let _ = writeln!(
                h,
                "<div class=\"card error\"><strong>This composite cannot be shown:</strong> {}\
                 <p><a href=\"/\">Choose the portfolios again</a></p></div>",
                escape_html(reason)
            );
        }
        Ok(d) => write_sections(&mut h, asked, d),
    }
    h.push_str("</main>\n</body>\n</html>\n");
    h
}

/// The heading with the status, the range, and the members (each links to
/// its own page).
fn write_heading(h: &mut String, d: &Shown<'_>) {
    let state = d.history.status.state.as_str();
    let _ = writeln!(
        h,
        "<h1>Composite of {} portfolio{} <span class=\"badge {state}\">{state}</span></h1>",
        d.ids.len(),
        if d.ids.len() == 1 { "" } else { "s" }
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
    h.push_str("<div class=\"card members\"><strong>Members:</strong> ");
    for (i, id) in d.ids.iter().enumerate() {
        let id = escape_html(id);
        let _ = write!(
            h,
            "{}<a href=\"/portfolio/{id}\">{id}</a>",
            if i == 0 { "" } else { ", " }
        );
    }
    h.push_str(
        "<p class=\"sub\">Each day the members' values, money in and money out are added up \
         and the NAV follows from the sums, as for one portfolio; a member counts from its \
         first day, its first money as money in.</p></div>\n",
    );
    if d.history.status.state == Status::Recomputing {
        let _ = writeln!(
            h,
            "<div class=\"card notice\">A late event is being folded into a member: records \
             from {} on may still change.</div>",
            opt_date(d.history.status.since)
        );
    }
}

/// The picture, the rolling chart, the statistics and the tear sheet, the
/// monthly returns, the last day's money, and the range in other forms.
fn write_sections(h: &mut String, asked: &Asked, d: &Shown<'_>) {
    let label = "NAV curve and drawdown";
    let _ = writeln!(
        h,
        "<div class=\"card chart\">\n<div class=\"tools\"><a class=\"toggle\" href=\"{}\">{}</a></div>\n\
         <div class=\"wide\" role=\"img\" aria-label=\"{label}\">{}</div>\n\
         <div class=\"narrow\" role=\"img\" aria-label=\"{label}\">{}</div>",
        escape_html(&page_href(asked, d.ids, !asked.form.rebase)),
        if asked.form.rebase {
            "Show the NAV as recorded"
        } else {
            "Rebase the range to 1"
        },
        d.charts.0,
        d.charts.1
    );
    let bench = d.query.benchmark.as_ref().map(|b| b.as_str());
    write_lines(h, d.history, asked.form.rebase, bench);
    h.push_str("</div>\n");
    write_rolling(h, &d.history.points, d.query.rolling);
    write_statistics(h, &d.history.statistics, d.query);
    write_periods(h, &d.history.statistics.periods);
    if let Some(last) = d.history.points.last() {
        write_last_day(h, last, d.currency);
    }
    let api = api_query(asked, d.ids);
    let _ = writeln!(
        h,
        "<div class=\"card links\"><a href=\"{}\">JSON of this range</a>\
         <a href=\"{}\">CSV of this range</a><a href=\"/\">All portfolios</a></div>",
        escape_html(&format!("/api/v1/composite/nav-history?{api}")),
        escape_html(&format!("/api/v1/composite/nav-history.csv?{api}")),
    );
}

/// The API's query of the page's read: the members (their ids need no
/// escaping, so the list stays readable), then the rest as given.
fn api_query(asked: &Asked, ids: &[String]) -> String {
    let mut q = format!("portfolios={}", ids.join(","));
    if let Some(rest) = serialize_pairs(&asked.rest) {
        q.push('&');
        q.push_str(&rest);
    }
    q
}

/// This page again, rebased or not.
fn page_href(asked: &Asked, ids: &[String], rebase: bool) -> String {
    let mut href = format!("/composite?{}", api_query(asked, ids));
    if rebase {
        href.push_str("&rebase=1");
    }
    href
}

/// The members' card: ids wrap anywhere rather than widen the page.
const CSS_COMPOSITE: &str = ".members{overflow-wrap:anywhere}.members p{margin:6px 0 0}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_from_checkboxes_or_a_list() {
        let (a, r) = asked(Some(
            "portfolios=p-1&portfolios=p-2%2Cp-3&from=2024-01-01&rebase=1",
        ));
        let (ids, q) = r.unwrap();
        assert_eq!(ids, ["p-1", "p-2", "p-3"]);
        assert_eq!(q.from.unwrap().to_string(), "2024-01-01");
        assert!(a.form.rebase);
        assert_eq!(a.listed, "p-1,p-2,p-3");
        assert_eq!(
            api_query(&a, &ids),
            "portfolios=p-1,p-2,p-3&from=2024-01-01"
        );
        assert_eq!(
            page_href(&a, &ids, true),
            "/composite?portfolios=p-1,p-2,p-3&from=2024-01-01&rebase=1"
        );
    }

    #[test]
    fn the_api_refusals() {
        let why = |q: &str| asked(Some(q)).1.unwrap_err();
        assert_eq!(why("").0, StatusCode::BAD_REQUEST);
        assert!(
            why("").1.contains("`portfolios` is required"),
            "{}",
            why("").1
        );
        assert!(why("portfolios=a&portfolios=a")
            .1
            .contains("`a` is listed twice"));
        assert!(why("portfolios=a,,b").1.contains("is not a portfolio id"));
        let many = (0..1001)
            .map(|i| format!("p{i}"))
            .collect::<Vec<_>>()
            .join(",");
        assert!(why(&format!("portfolios={many}"))
            .1
            .contains("at most 1000"));
        assert!(why("portfolios=a&from=x").1.contains("from"));
        assert!(why("portfolios=a&rebase=2")
            .1
            .contains("`rebase` must be 1 or 0"));
        let html = render_composite(&asked(Some("portfolios=a,<b>")).0, Err("why <not>"));
        assert!(html.contains("value=\"a,&lt;b&gt;\"") && html.contains("why &lt;not&gt;"));
        assert!(!html.contains("<b>"));
    }
}
