//! The page explaining one day (`GET /portfolio/{id}/explain/{date}`): the
//! JSON of `…/nav-history/{date}/explain` written for people — the record
//! beside the previous day's, the events applied that day, each position's
//! price and rate with where they came from, the cash, the flows — with
//! links to the days around it. `GET /portfolio/{id}/explain?date=` (the
//! portfolio page's form) sends the browser to the day's page.

use std::fmt::Write as _;

use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use chrono::{Duration, NaiveDate};
use serde_json::Value;

use super::handlers::html_response;
use super::page::head;
use crate::http::auth::SCOPE_READ;
use crate::http::error::ApiError;
use crate::http::guard::PeerAddr;
use crate::http::html::escape_html;
use crate::http::login::PageCaller;
use crate::http::params;
use crate::http::state::AppState;
use crate::query::explain::{read_explanation, Explanation};

/// The page's own rules.
const CSS: &str = ".ev td{font-size:.9em}.muted{color:#666}";

/// The record's fields in the order the page lists them.
const FIELDS: [&str; 12] = [
    "market_value",
    "holdings_value",
    "cash",
    "receivable",
    "net_flow",
    "daily_return",
    "net_value",
    "return_rate",
    "cost",
    "profit",
    "income",
    "realized_pnl",
];

/// `GET /portfolio/{id}/explain?date=YYYY-MM-DD`: to the day's page.
pub async fn explain_form(
    PageCaller(caller): PageCaller,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_READ, id.as_str())?;
    let q = params::query(raw.as_deref(), &["date"])?;
    let v = q
        .get("date")
        .ok_or_else(|| ApiError::BadRequest("which day? `date=YYYY-MM-DD`".into()))?;
    let day = params::date("date", v)?;
    let to = format!("/portfolio/{id}/explain/{day}");
    Ok((
        StatusCode::SEE_OTHER,
        [(
            header::LOCATION,
            HeaderValue::from_str(&to).map_err(|e| ApiError::Internal(e.into()))?,
        )],
    )
        .into_response())
}

/// `GET /portfolio/{id}/explain/{date}`: the day explained, as HTML. A
/// day that cannot be explained (no record, an inconsistent history) is a
/// page saying why, with the status the API gives.
pub async fn explain_page(
    State(s): State<AppState>,
    PageCaller(caller): PageCaller,
    peer: Option<Extension<PeerAddr>>,
    Path((id, date)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_READ, id.as_str())?;
    let day = params::date("date", &date)?;
    let _permit = s.guards.admit_work(&caller, peer)?;
    let mut h = String::with_capacity(16 << 10);
    head(&mut h, &format!("{id} on {day}"), CSS);
    let status = match read_explanation(s.engine.db(), id.as_str(), day, None, &s.clock).await {
        Ok(e) => {
            write_explanation(&mut h, &e);
            StatusCode::OK
        }
        Err(failure) => {
            let e = ApiError::from(failure);
            if matches!(e, ApiError::NotFound | ApiError::Internal(_)) {
                return Err(e);
            }
            write_nav(&mut h, id.as_str(), day);
            let _ = write!(
                h,
                "<div class=\"card\"><h2>This day cannot be explained</h2><p>{}</p></div>",
                escape_html(&e.to_string())
            );
            e.status()
        }
    };
    h.push_str("</main>\n</body>\n</html>\n");
    Ok(html_response(status, h))
}

/// Links to the portfolio, the days before and after, and the JSON.
fn write_nav(h: &mut String, id: &str, day: NaiveDate) {
    let id_e = escape_html(id);
    let day_link = |d: Option<NaiveDate>, label: &str| match d {
        Some(d) => format!("<a href=\"/portfolio/{id_e}/explain/{d}\">{label}</a>"),
        None => String::new(),
    };
    let _ = writeln!(
        h,
        "<h1>{id_e} on {day}</h1>\n<div class=\"card links\"><a href=\"/portfolio/{id_e}\">\
         The portfolio</a>{}{}<a href=\"/api/v1/portfolio/{id_e}/nav-history/{day}/explain\">\
         JSON of this day</a></div>",
        day_link(
            day.checked_sub_signed(Duration::days(1)),
            "← The day before"
        ),
        day_link(day.checked_add_signed(Duration::days(1)), "The day after →"),
    );
}

fn write_explanation(h: &mut String, e: &Explanation) {
    write_nav(h, &e.portfolio_id, e.date);
    let record = serde_json::to_value(&e.record).unwrap_or_default();
    let previous = serde_json::to_value(&e.previous).unwrap_or_default();
    h.push_str(
        "<div class=\"card scroll\"><h2>The record</h2><table><tr><th>Field</th>\
         <th>The day before</th><th>This day</th></tr>\n",
    );
    for f in FIELDS {
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\">{f}</th><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            text(&previous[f]),
            text(&record[f])
        );
    }
    let _ = writeln!(
        h,
        "<tr><th scope=\"row\">inflow / outflow</th><td></td><td class=\"num\">{} / {}</td></tr>\
         </table></div>",
        escape_html(&e.inflow),
        escape_html(&e.outflow)
    );
    write_events(h, &e.events);
    write_valuation(h, e);
}

/// The events in fold order, each with its place in the log and its own
/// fields.
fn write_events(h: &mut String, events: &[Value]) {
    h.push_str(
        "<div class=\"card scroll ev\"><h2>Events applied, in order</h2><table><tr><th>Type</th>\
         <th>Fields</th><th>Event</th><th>Revision</th><th>From</th><th>Received</th></tr>\n",
    );
    if events.is_empty() {
        h.push_str("<tr><td colspan=\"6\">none: prices alone moved the day</td></tr>\n");
    }
    const HEAD: [&str; 9] = [
        "event_id",
        "type",
        "revision",
        "corrects",
        "topic",
        "partition",
        "offset",
        "received_at",
        "portfolio_id",
    ];
    for v in events {
        let fields: Vec<String> = v
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| !HEAD.contains(&k.as_str()))
            .map(|(k, x)| format!("{k}: {}", text(x)))
            .collect();
        let revision = match &v["corrects"] {
            Value::String(c) => format!("{} (corrects {})", text(&v["revision"]), escape_html(c)),
            _ => text(&v["revision"]),
        };
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\">{}</th><td>{}</td><td class=\"muted\">{}</td><td>{revision}</td>\
             <td class=\"muted\">{} {}/{}</td><td class=\"muted\">{}</td></tr>",
            text(&v["type"]),
            fields.join(", "),
            text(&v["event_id"]),
            text(&v["topic"]),
            text(&v["partition"]),
            text(&v["offset"]),
            text(&v["received_at"]),
        );
    }
    h.push_str("</table></div>\n");
}

/// Each position with its price and rate and where they came from; the
/// cash balances, the receivable.
fn write_valuation(h: &mut String, e: &Explanation) {
    h.push_str(
        "<div class=\"card scroll\"><h2>How the holdings were valued</h2><table><tr>\
         <th>Symbol</th><th>Quantity</th><th>Price</th><th>Source</th><th>Split factor</th>\
         <th>Rate</th><th>Value</th></tr>\n",
    );
    for l in &e.valuation {
        let date = l.price_date.map(|d| format!(" of {d}")).unwrap_or_default();
        let rate = match l.fx_date {
            Some(d) => format!("{} (of {d})", escape_html(&l.fx_rate)),
            None => escape_html(&l.fx_rate),
        };
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\">{}</th><td class=\"num\">{}</td><td class=\"num\">{} {}</td>\
             <td>{}{date}</td><td class=\"num\">{}</td><td class=\"num\">{rate}</td>\
             <td class=\"num\">{}</td></tr>",
            escape_html(&l.symbol),
            escape_html(&l.quantity),
            escape_html(&l.price),
            escape_html(&l.currency),
            escape_html(&l.price_source),
            escape_html(&l.split_factor),
            escape_html(&l.value),
        );
    }
    if e.valuation.is_empty() {
        h.push_str("<tr><td colspan=\"7\">nothing held</td></tr>\n");
    }
    for c in &e.cash {
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\">Cash {}</th><td class=\"num\">{}</td><td></td><td></td><td></td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape_html(&c.currency),
            escape_html(&c.amount),
            escape_html(&c.fx_rate),
            escape_html(&c.value),
        );
    }
    let _ = writeln!(
        h,
        "<tr><th scope=\"row\">Receivable</th><td colspan=\"5\"></td><td class=\"num\">{}</td>\
         </tr></table></div>",
        escape_html(&e.receivable)
    );
}

/// A JSON value as escaped text (strings without their quotes; null as a
/// dash).
fn text(v: &Value) -> String {
    match v {
        Value::Null => "–".to_string(),
        Value::String(s) => escape_html(s),
        other => escape_html(&other.to_string()),
    }
}
