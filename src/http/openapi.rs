//! The OpenAPI document of the API, generated from the handlers' and types'
//! annotations (utoipa) so it cannot drift from the code; served at
//! `/api/v1/openapi.json`.

use axum::Json;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::admin::{DeadLetterPage, DeadLetterView, ReplayResponse};
use super::error::Problem;
use super::schema::{
    BackfillBody, BackfillResponse, CalculateResponse, DrawdownDoc, HistoryResponse,
    PeriodReturnDoc, PeriodsDoc, StatisticsDoc, TrailingDoc,
};
use crate::query::Point;
use crate::query::PortfolioStatus;

/// What `params::portfolio_id` accepts, as a JSON Schema pattern. Written
/// out literally in each path's `params(...)` (utoipa takes a literal there);
/// `tests/openapi.rs` checks every copy against this one.
pub const PORTFOLIO_ID_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$";

/// What the dead-letter cursor (`after`) accepts.
pub const CURSOR_PATTERN: &str = "^[0-9]{1,18}$";

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let mut http = Http::new(HttpAuthScheme::Bearer);
        http.bearer_format = Some("JWT".into());
        components.add_security_scheme("bearer", SecurityScheme::Http(http));
    }
}

/// Request bodies are optional but, when sent, JSON objects (`params::
/// json_body` refuses `null` and every other non-object). utoipa spells an
/// optional body `Option<T>`, which also makes it nullable; this takes the
/// `null` alternative back out.
struct BodiesAreObjects;

impl Modify for BodiesAreObjects {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{RefOr, Schema};
        let null = serde_json::json!({"type": "null"});
        for item in openapi.paths.paths.values_mut() {
            let ops = [&mut item.post, &mut item.put, &mut item.patch];
            for op in ops.into_iter().flatten() {
                let Some(body) = op.request_body.as_mut() else {
                    continue;
                };
                for content in body.content.values_mut() {
                    let Some(RefOr::T(Schema::OneOf(one))) = &content.schema else {
                        continue;
                    };
                    let rest: Vec<_> = one
                        .items
                        .iter()
                        .filter(|s| serde_json::to_value(s).ok().as_ref() != Some(&null))
                        .cloned()
                        .collect();
                    if let [only] = &rest[..] {
                        content.schema = Some(only.clone());
                    }
                }
            }
        }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "navd",
        description = "Daily NAV history of portfolios: curve, statistics, backfill, calculate, dead letters. \
                       Decimals are JSON strings; errors are application/problem+json (RFC 9457) carrying the \
                       request's id as `request_id`, the value of the `x-request-id` header every response has."
    ),
    paths(
        super::nav::get_history,
        super::nav::get_positions,
        super::explain::explain,
        super::attribution::attribution,
        super::attribution::attribution_csv,
        super::lots::lots,
        super::lots::lots_csv,
        super::lots::realized,
        super::lots::realized_csv,
        super::composite::composite,
        super::composite::composite_csv,
        super::transactions::transactions,
        super::nav::get_history_csv,
        super::nav::list_portfolios,
        super::nav::backfill,
        super::nav::calculate,
        super::chart::svg,
        super::admin::dead_letters,
        super::admin::replay,
        super::stream::stream,
    ),
    components(schemas(
        HistoryResponse,
        Point,
        PortfolioStatus,
        StatisticsDoc,
        PeriodsDoc,
        PeriodReturnDoc,
        DrawdownDoc,
        TrailingDoc,
        crate::query::Positions,
        crate::query::explain::Explanation,
        crate::query::attribution::Attribution,
        crate::query::attribution::AttributionTotal,
        crate::query::attribution::ComponentView,
        crate::query::lots::Lots,
        crate::query::lots::Realized,
        crate::query::audit::TransactionPage,
        crate::query::audit::LogicalTransaction,
        crate::query::audit::VersionView,
        crate::query::explain::ValuationLine,
        crate::query::explain::FlowRateView,
        crate::query::PositionView,
        crate::query::actions::PositionActionView,
        crate::query::actions::ActionEffectView,
        crate::query::actions::ActionCashView,
        crate::query::CashView,
        crate::query::PortfolioPage,
        crate::query::PortfolioSummary,
        BackfillBody,
        BackfillResponse,
        CalculateResponse,
        DeadLetterPage,
        DeadLetterView,
        ReplayResponse,
        Problem
    )),
    modifiers(&BearerAuth, &BodiesAreObjects),
    tags(
        (name = "nav", description = "the NAV curve of a portfolio"),
        (name = "admin", description = "operator endpoints (nav:admin)")
    )
)]
#[derive(Debug)]
pub struct ApiDoc;

/// `GET /api/v1/openapi.json` (public: it holds no data).
pub(crate) async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
