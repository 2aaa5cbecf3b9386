//! The axum handlers of the pictures and pages — [`svg`]
//! (`GET /api/v1/portfolio/{id}/nav-history.svg`), [`page`]
//! (`GET /portfolio/{id}`) and [`index`] (`GET /`) — and what they share:
//! reading a history's numbers into a [`Picture`], the page's own
//! `rebase=` and blank form fields, and the HTML answer's headers.

use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use chrono::NaiveDate;
use rust_decimal::prelude::ToPrimitive;

use super::assets::{subscribes, PAGE_CSP};
use super::index::{parse_index_query, render_index, PER_PAGE};
use super::marks::{ex_marks, ExMark};
use super::page::{render_page, Charts, FormValues, PageData};
use super::picture::{Base, Picture};
use super::pool::RenderPool;
use super::svg::{render, HEIGHT, NARROW, WIDTH};
use super::value::render_value;
use crate::http::auth::{BrowserCaller, SCOPE_READ};
use crate::http::error::ApiError;
use crate::http::guard::PeerAddr;
use crate::http::login::PageCaller;
use crate::http::params::{self, ParseQuery};
use crate::http::state::AppState;
use crate::query::{read_history, read_positions, History, HistoryQuery, Positions};

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
    params(("id" = String, Path, description = "portfolio id", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", example = "p-1001"), crate::http::schema::HistoryParams),
    responses(
        (status = 200, description = "the NAV curve and its drawdown", body = String, content_type = "image/svg+xml"),
        (status = 400, description = "malformed id, date, range or parameter", body = crate::http::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = crate::http::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = crate::http::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "unknown or hidden portfolio", body = crate::http::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "this caller already has its share (NAVD_HTTP_MISSES_PER_CALLER) of uncached requests in flight; see Retry-After", body = crate::http::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
        (status = 503, description = "database unavailable, request timed out, or too many charts being drawn; see Retry-After", body = crate::http::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
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
    let permit = s.guards.admit_work(&caller, peer)?;
    let slot = RenderPool::global().slot().await?;
    let h = read_history(s.engine.db(), id.as_str(), &q, &s.clock).await?;
    let bench = q.benchmark.as_ref().map(|b| b.to_string());
    let body = RenderPool::run(slot, move || {
        let _permit = permit;
        let curve = curve_of(&h)?;
        draw(
            &picture(&h, &curve, &wide_title(&h), (false, bench.as_deref()), &[]),
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
/// picture, date-range form). Plain HTML without external assets, so it
/// works behind any proxy and prints or screenshots as is; it needs no
/// JavaScript, and with it redraws itself when its history changes (one
/// small script of navd's own, `assets.rs`; not as known at an instant).
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
    let (view, pairs) = take_view(pairs);
    let query = serialize_pairs(&pairs);
    let mut form = FormValues::of(&pairs);
    form.rebase = matches!(rebase, Ok(true));
    form.value_view = matches!(view, Ok(true));
    if let Err(reason) = rebase.and(view) {
        return Ok(refused(id.as_str(), &form, query.as_deref(), &reason));
    }
    let q = match HistoryQuery::parse(query.as_deref()) {
        Ok(q) => q,
        Err(ApiError::BadRequest(reason)) => {
            return Ok(refused(id.as_str(), &form, query.as_deref(), &reason));
        }
        Err(e) => return Err(e),
    };
    // The rolling chart's window, unless the address gives one.
    let q = HistoryQuery {
        rolling: q.rolling.or(Some(super::rolling::ROLLING_DEFAULT)),
        ..q
    };
    let permit = s.guards.admit_work(&caller, peer)?;
    let slot = RenderPool::global().slot().await?;
    let db = s.engine.db();
    let h = match read_history(db, id.as_str(), &q, &s.clock).await {
        Ok(h) => h,
        // A benchmark symbol navd does not know is a typo to fix in place.
        Err(crate::query::QueryError::UnknownBenchmark(reason)) => {
            return Ok(refused(id.as_str(), &form, query.as_deref(), &reason));
        }
        Err(e) => return Err(e.into()),
    };
    // The positions table is a convenience: a range ending where there is
    // no record simply shows none.
    let held = match h.points.last() {
        Some(last) => read_positions(db, id.as_str(), Some(last.date), q.known_at, &s.clock)
            .await
            .ok(),
        None => None,
    };
    let extra = page_extra(&s, id.as_str(), &h, &q).await?;
    let live = subscribes(&q);
    let html = RenderPool::run(slot, move || {
        let _permit = permit;
        draw_page(
            id.as_str(),
            &form,
            query.as_deref(),
            &h,
            &q,
            held.as_ref(),
            &extra,
        )
    })
    .await?;
    let mut resp = html_response(StatusCode::OK, html);
    if live {
        // The page then runs its live update's script (assets.rs).
        resp.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(PAGE_CSP),
        );
    }
    Ok(resp)
}

/// The lots at the range's end and what its year realized, under a lot
/// method (none under `average`, or when a read fails: a convenience, like
/// the positions table).
async fn read_lot_tables(
    s: &AppState,
    id: &str,
    h: &History,
    q: &HistoryQuery,
) -> Option<super::lots::LotTables> {
    use chrono::Datelike;
    let last = h.points.last()?.date;
    let year = chrono::NaiveDate::from_ymd_opt(last.year(), 1, 1)?;
    let db = s.engine.db();
    let range = (Some(year), Some(last));
    let realized = crate::query::lots::read_realized(db, id, range, q.known_at, &s.clock)
        .await
        .ok()
        .filter(|r| r.method != "average")?;
    let lots = crate::query::lots::read_lots(db, id, Some(last), q.known_at, &s.clock)
        .await
        .ok()?;
    Some(super::lots::LotTables { lots, realized })
}

/// The page's answer to a query it cannot show (400): the form as typed,
/// and the reason.
fn refused(id: &str, form: &FormValues, query: Option<&str>, reason: &str) -> Response {
    let html = render_page(id, form, query, Err(reason));
    html_response(StatusCode::BAD_REQUEST, html)
}

/// What a page shows beside the read: the currency of its money, when a
/// benchmark was asked for but has no level on the range, the span of its
/// closes (to say why and which range would draw it), and the ex-dates of
/// the range to mark on the chart.
pub(super) struct PageExtra {
    currency: String,
    bench_span: Option<(NaiveDate, NaiveDate)>,
    marks: Vec<ExMark>,
    movers: Option<crate::query::attribution::Attribution>,
    lots: Option<super::lots::LotTables>,
}

async fn page_extra(
    s: &AppState,
    id: &str,
    h: &History,
    q: &HistoryQuery,
) -> Result<PageExtra, ApiError> {
    let currency = crate::query::currency_of(s.engine.db(), id).await?;
    let undrawn = h
        .statistics
        .benchmark
        .as_ref()
        .is_some_and(|b| b.benchmark_status != "ok");
    let bench_span = match &q.benchmark {
        Some(b) if undrawn => crate::query::close_span(s.engine.db(), b.as_str()).await?,
        _ => None,
    };
    // Like the positions table, the marks are a convenience: a read that
    // fails draws the chart without them.
    let marks = match (h.points.first(), h.points.last()) {
        (Some(first), Some(last)) => {
            let range = (first.date, last.date);
            crate::query::actions::ex_dates(s.engine.db(), id, range, q.known_at, &s.clock)
                .await
                .map(|dates| ex_marks(&dates, &currency))
                .unwrap_or_default()
        }
        _ => Vec::new(),
    };
    let movers = super::movers::read_movers(s, id, h, q).await;
    let lots = read_lot_tables(s, id, h, q).await;
    Ok(PageExtra {
        currency,
        bench_span,
        marks,
        movers,
        lots,
    })
}

/// The page of a read: its two pictures drawn (the unit NAV's, or with
/// `view=value` the value's), then the HTML around them.
fn draw_page(
    id: &str,
    form: &FormValues,
    query: Option<&str>,
    h: &History,
    q: &HistoryQuery,
    held: Option<&Positions>,
    extra: &PageExtra,
) -> Result<String, ApiError> {
    let data = |charts| PageData {
        history: h,
        query: q,
        charts,
        positions: held,
        currency: &extra.currency,
        bench_span: extra.bench_span,
        movers: extra.movers.as_ref(),
        lots: extra.lots.as_ref(),
    };
    if form.value_view {
        let charts = Charts {
            wide: render_value(
                &h.points,
                &extra.currency,
                &value_title(h, true),
                WIDTH,
                HEIGHT,
            ),
            narrow: render_value(
                &h.points,
                &extra.currency,
                &value_title(h, false),
                NARROW.0,
                NARROW.1,
            ),
        };
        return Ok(render_page(id, form, query, Ok(data(&charts))));
    }
    let curve = curve_of(h)?;
    let bench = q.benchmark.as_ref().map(|b| b.to_string());
    let bench = bench.as_deref();
    let charts = Charts {
        wide: draw(
            &picture(
                h,
                &curve,
                &wide_title(h),
                (form.rebase, bench),
                &extra.marks,
            ),
            WIDTH,
            HEIGHT,
        )?,
        narrow: draw(
            &picture(
                h,
                &curve,
                &narrow_title(h),
                (form.rebase, bench),
                &extra.marks,
            ),
            NARROW.0,
            NARROW.1,
        )?,
    };
    Ok(render_page(id, form, query, Ok(data(&charts))))
}

/// The value picture's title (wide: with the range's years).
fn value_title(h: &History, wide: bool) -> String {
    match (h.from, h.to, wide) {
        (Some(f), Some(t), true) => format!("{} \u{2014} value {f} to {t}", h.portfolio_id),
        (Some(f), Some(t), false) => format!("{} \u{2014} {f} to {t}", h.portfolio_id),
        _ => format!("{} \u{2014} value", h.portfolio_id),
    }
}

/// The index page: a dashboard of the portfolios the caller may see (value,
/// returns, status, sparkline), filtered and sorted by its query (`q`,
/// `status`, `sort`, `order`, `page`; blank fields are not given), a page
/// at a time. A query it cannot read answers 400 with the reason above
/// the form.
pub async fn index(
    State(s): State<AppState>,
    PageCaller(caller): PageCaller,
    peer: Option<Extension<PeerAddr>>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    caller.require(SCOPE_READ)?;
    let pairs = non_empty_pairs(raw.as_deref());
    let q = match parse_index_query(&pairs) {
        Ok(q) => q,
        Err(reason) => {
            let q = crate::query::DashboardQuery::default();
            return Ok(html_response(
                StatusCode::BAD_REQUEST,
                render_index(&q, Err(&reason)),
            ));
        }
    };
    let _permit = s.guards.admit_work(&caller, peer)?;
    let d = crate::query::dashboard(s.engine.db(), &q, PER_PAGE, caller.visible()).await?;
    Ok(html_response(StatusCode::OK, render_index(&q, Ok(&d))))
}

/// The numbers a read's pictures are drawn from.
pub(super) struct Curve {
    nav: Vec<(NaiveDate, f64)>,
    /// B_k / B_0 on the days the benchmark has a level.
    bench: Vec<(NaiveDate, f64)>,
    /// W0's day and W0 (none without records).
    base: Option<(NaiveDate, f64)>,
}

pub(super) fn curve_of(h: &History) -> Result<Curve, ApiError> {
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
pub(super) fn picture<'a>(
    h: &History,
    c: &'a Curve,
    title: &'a str,
    (rebased, bench): (bool, Option<&'a str>),
    marks: &'a [ExMark],
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
        marks,
    }
}

/// The wide picture's title: the portfolio and the range shown.
pub(super) fn wide_title(h: &History) -> String {
    match (h.from, h.to) {
        (Some(f), Some(t)) => format!("{} \u{2014} NAV {f} to {t}", h.portfolio_id),
        _ => format!("{} \u{2014} NAV", h.portfolio_id),
    }
}

/// The compact picture's title.
pub(super) fn narrow_title(h: &History) -> String {
    match (h.from, h.to) {
        (Some(f), Some(t)) => format!("{} \u{2014} {f} to {t}", h.portfolio_id),
        _ => h.portfolio_id.clone(),
    }
}

pub(super) fn draw(p: &Picture<'_>, width: u32, height: u32) -> Result<String, ApiError> {
    render(p, width, height).map_err(|e| ApiError::Internal(anyhow::anyhow!(e)))
}

/// Takes the page's own `rebase` out of the query's pairs: `1` draws the
/// range rebased to 1, `0` (or none) as recorded; anything else, or twice,
/// is refused like a bad API parameter.
pub(super) fn take_rebase(
    pairs: Vec<(String, String)>,
) -> (Result<bool, String>, Vec<(String, String)>) {
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

/// Takes the page's own `view` out of the query's pairs: `value` shows
/// the value chart, `nav` (or none) the unit NAV's.
pub(super) fn take_view(
    pairs: Vec<(String, String)>,
) -> (Result<bool, String>, Vec<(String, String)>) {
    let (ours, rest): (Vec<_>, Vec<_>) = pairs.into_iter().partition(|(k, _)| k == "view");
    let view = match ours.as_slice() {
        [] => Ok(false),
        [(_, v)] if v == "value" => Ok(true),
        [(_, v)] if v == "nav" => Ok(false),
        [(_, v)] => Err(format!(
            "`view` must be nav or value, got `{}`",
            projections::echo(v)
        )),
        _ => Err("query parameter `view` given twice".to_string()),
    };
    (view, rest)
}

pub(super) fn html_response(status: StatusCode, html: String) -> Response {
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
            // No script: say so, so an injection could not run one. (The
            // portfolio page that redraws itself allows its one script,
            // from its own origin: `assets::PAGE_CSP`.)
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
pub(super) fn non_empty_pairs(raw: Option<&str>) -> Vec<(String, String)> {
    form_urlencoded::parse(raw.unwrap_or("").as_bytes())
        .filter(|(_, v)| !v.trim().is_empty())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// Re-encodes pairs as a query string; `None` when there are none.
pub(super) fn serialize_pairs(pairs: &[(String, String)]) -> Option<String> {
    if pairs.is_empty() {
        return None;
    }
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    Some(s.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

/// The page as the handler builds it (these use both the handler's steps
/// and the page's rendering, so they live with the handler, which imports
/// the page, never the other way round).
#[cfg(test)]
mod page_tests {
    use super::*;
    use crate::http::chart::page::{render_page, Charts, FormValues, PageData};
    use crate::http::chart::svg::{HEIGHT, WIDTH};
    use crate::http::chart::test_data::{day, dump, three_years};
    use crate::http::params::ParseQuery;
    use projections::Statistics;
    use rust_decimal::Decimal;

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
            })
            .collect();
        let mut status = PortfolioStatus::ok();
        status.state = crate::query::State::Inconsistent;
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
                tear_sheet: Default::default(),
            },
        };
        let q = HistoryQuery::parse(Some("from=2021-01-01&calendar=all&benchmark=IDX")).unwrap();
        let curve = curve_of(&history).unwrap();
        let charts = Charts {
            wide: draw(
                &picture(&history, &curve, "t", (false, None), &[]),
                WIDTH,
                HEIGHT,
            )
            .unwrap(),
            narrow: draw(
                &picture(&history, &curve, "t", (false, None), &[]),
                400,
                520,
            )
            .unwrap(),
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
                currency: "USD",
                bench_span: None,
                movers: None,
                lots: None,
                positions: Some(&crate::query::Positions {
                    portfolio_id: "p-1001".into(),
                    date: day("2023-12-29"),
                    market_value: "100.00000000".into(),
                    positions: vec![crate::query::PositionView {
                        symbol: "<ACME>".into(),
                        kind: "equity".into(),
                        multiplier: "1".into(),
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
                        expiry: None,
                        notional: None,
                        accrued_interest: None,
                        next_coupon: None,
                        actions: vec![],
                    }],
                    cash: vec![],
                    receivable: "0.00000000".into(),
                    corporate_actions: vec![],
                }),
            }),
        );
        assert!(html.contains("<svg"));
        // One script only: the live update's, from navd itself.
        assert_eq!(html.matches("<script").count(), 1);
        assert!(html.contains("<script src=\"/assets/live-"));
        assert!(html.contains("data-stream=\"/api/v1/portfolio/"));
        assert!(html.contains("sell of &lt;XYZ&gt; exceeds"));
        assert!(html.contains("-12.34%") && html.contains("15.67%") && html.contains("0.81"));
        assert!(html.contains("not recovered yet"));
        assert!(html.contains("Realized P&amp;L"));
        assert!(html.contains("9.12%") && html.contains("8.77%"));
        assert!(html.contains(">Beta<") && html.contains("1.23") && html.contains("31.00%"));
        assert!(html.contains("Held on 2023-12-29") && html.contains("&lt;ACME&gt;"));
        assert!(html.contains("<td class=\"num up\" data-m=\"Nov\">1.23%*</td>"));
        assert!(html.contains("<td class=\"num down\" data-m=\"Dec\">-4.56%</td>"));
        assert!(html.contains("<td class=\"num down yr\" data-m=\"Year\">-3.39%*</td>"));
        // What to do about the inconsistency, and the last consistent day.
        assert!(html.contains("What to do:"));
        assert!(html.contains("href=\"/api/v1/admin/dead-letters\""));
        assert!(html.contains("href=\"/portfolio/p-1001?to=2023-01-31\""));
        // Money for people: separators, 2 decimals, the currency.
        assert!(html.contains("<td class=\"num\">100.50 USD</td>"));
        assert!(html.contains("<td class=\"num\">12.50 USD</td>"));
        assert!(html.contains("<td class=\"num\">3.25 USD</td>"));
        assert!(
            html.contains("<td class=\"num\">33.50 USD</td>"),
            "price in its currency"
        );
        assert!(html.contains("<option value=\"all\" selected>"));
        assert!(html.contains("value=\"2021-01-01\""));
        assert!(
            html.contains("/api/v1/portfolio/p-1001/nav-history?from=2021-01-01&amp;calendar=all")
        );
        assert!(html
            .contains("/api/v1/portfolio/p-1001/nav-history.svg?from=2021-01-01&amp;calendar=all"));
        dump("page.html", &html);
    }
}
