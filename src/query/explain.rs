//! Explain a day ([`read_explanation`]): a portfolio's record of one day
//! with the previous day's, the events applied that day in fold order with
//! where each came from, and the valuation inputs — each position's price
//! (its source, date and split factor) and rate (and its date), each cash
//! balance, the receivable and the day's flows — and what each corporate
//! action of the day did to the positions held at its start.
//!
//! The state at the end of the previous day is replayed from the stored
//! log and completed with the stored record's exact value and NAV (as the
//! positions read does); the day itself is folded by the pure crate's
//! [`projections::explain_day`], the day loop's own step.

use chrono::NaiveDate;
use projections::{
    money_text, DayExplanation, DayState, Inconsistency, ReportedStatus, Transaction,
};
use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::actions::ActionEffectView;
use super::{base_currency, CashView, Point, QueryError};
use navd_storage::explain::{DayInputs, Origin, StoredSplit, StoredTransaction};
use navd_storage::{Db, HistoryRow, PortfolioRow};

/// Why a day cannot be explained.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExplainFailure {
    #[error(transparent)]
    Query(#[from] QueryError),
    /// The history is inconsistent on or before the day.
    #[error("{}", .0.detail)]
    Inconsistent(Inconsistency),
}

impl From<sqlx::Error> for ExplainFailure {
    fn from(e: sqlx::Error) -> Self {
        ExplainFailure::Query(e.into())
    }
}

/// One position's valuation on the day, as reported.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ValuationLine {
    pub symbol: String,
    /// `equity`, `option`, `future` or `bond` (the instruments topic's
    /// definition; `equity` when there is none).
    pub kind: String,
    /// The contract multiplier.
    pub multiplier: String,
    /// As held (a split's result keeps its 10 decimal places).
    pub quantity: String,
    /// The price used: the close or trade price times `split_factor`.
    pub price: String,
    /// `close` (the latest close on or before the day) or `trade` (no close
    /// yet: the last trade price); `corporate_action` is reserved for
    /// prices set by corporate actions.
    pub price_source: String,
    /// The date of that close or trade.
    pub price_date: Option<NaiveDate>,
    /// The factor the splits since `price_date` applied (1 without any).
    pub split_factor: String,
    /// The currency of the price.
    pub currency: String,
    /// Units of the portfolio's currency per unit of `currency` on the day.
    pub fx_rate: String,
    /// The date of the rate used; null in the portfolio's own currency.
    pub fx_date: Option<NaiveDate>,
    /// quantity · price · multiplier · fx_rate, in the portfolio's
    /// currency (negative for a short); 0 for a future.
    pub value: String,
    /// A future's quantity · price · multiplier · fx_rate (signed); absent
    /// for anything else.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notional: Option<String>,
    /// A future's variation margin of the day, in the portfolio's currency
    /// (into cash and realized); absent for anything else.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variation_margin: Option<String>,
    /// A bond's quantity · accrued interest per bond in the portfolio's
    /// currency, part of `value` (`price` is its clean price in percent
    /// of face); absent for anything else.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accrued_interest: Option<String>,
    /// A bond's coupon received at the start of the day (quantity ·
    /// coupon), in the portfolio's currency; absent on other days and for
    /// anything else.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coupon: Option<String>,
}

/// A rate the day's flows were converted at (events in another currency
/// without an `fx_rate` of their own).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct FlowRateView {
    pub currency: String,
    pub fx_rate: String,
    pub fx_date: Option<NaiveDate>,
}

/// A day's record and everything it was computed from.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct Explanation {
    pub portfolio_id: String,
    pub date: NaiveDate,
    /// The day's record, as the curve shows it.
    pub record: Point,
    /// The day before's record; null on the history's first day.
    pub previous: Option<Point>,
    /// The events applied on the day, in fold order: splits of held
    /// positions, the corporate actions that touched a held position,
    /// dividends paid (as their dividend event), then the day's effective
    /// transactions; each with `event_id`, `type`, `revision`,
    /// `corrects`, `topic`, `partition`, `offset`, `received_at` and its
    /// own fields.
    #[schema(value_type = Vec<Object>)]
    pub events: Vec<Value>,
    /// The positions at the end of the day; Σ value = the record's
    /// `holdings_value`.
    pub valuation: Vec<ValuationLine>,
    /// The cash balances (none without cash tracking).
    pub cash: Vec<CashView>,
    /// Dividends past their ex-date, not yet paid.
    pub receivable: String,
    /// The day's external flows in and out.
    pub inflow: String,
    pub outflow: String,
    /// The rates the day's flows were converted at, when the events carry
    /// none of their own.
    pub flow_rates: Vec<FlowRateView>,
    /// What each corporate action of the day did to the positions held at
    /// its start, in the order they applied (after the day's splits,
    /// before its dividends and transactions).
    pub corporate_actions: Vec<ActionEffectView>,
}

/// Explains portfolio `id`'s `day` from one consistent snapshot.
#[tracing::instrument(level = "debug", skip_all, fields(portfolio_id = %id))]
pub(crate) async fn read_explanation(
    db: &Db,
    id: &str,
    day: NaiveDate,
    known_at: Option<chrono::DateTime<chrono::Utc>>,
    clock: &crate::clock::Clock,
) -> Result<Explanation, ExplainFailure> {
    let past = super::known::past(known_at, clock);
    // As known at a past instant: the portfolio and its records as the fold
    // of the events stored by then gives them.
    let known = match past {
        None => None,
        Some((at, today)) => {
            let pid = projections::PortfolioId::parse(id).map_err(|_| QueryError::NotFound)?;
            Some(super::known::known_at(db, &pid, at, today, &[]).await?)
        }
    };
    let mut tx = navd_storage::read_snapshot(db.pool()).await?;
    let (p, [record, previous, earlier], anchor) = match &known {
        Some(k) => {
            let row = |d: NaiveDate| k.rows.iter().find(|r| r.record.date == d).cloned();
            (k.portfolio.clone(), three_days(day).map(row), None)
        }
        None => stored_days(&mut tx, id, day).await?,
    };
    if let ReportedStatus::Inconsistent(i) = p.reported_status() {
        if i.day <= day {
            return Err(ExplainFailure::Inconsistent(i));
        }
    }
    let Some(record) = record else {
        return Err(QueryError::NoRecord(no_record(&p, day)).into());
    };
    let cache = db.prices();
    let failed = |e: anyhow::Error| ExplainFailure::Query(QueryError::Failed(e));
    let at = past.map(|(at, _)| at);
    let preloaded = match (known, at) {
        (Some(k), Some(at)) => Some(navd_storage::explain::KnownInputs {
            at,
            versions: k.log,
            book: k.book,
        }),
        _ => None,
    };
    let mut inputs = navd_storage::explain::load_day(&mut tx, id, day, cache, preloaded, anchor)
        .await
        .map_err(failed)?;
    if at.is_none() {
        let base = base_currency(&p, &inputs.book);
        cache
            .add_rates(&mut tx, &mut inputs.book, std::slice::from_ref(&base), day)
            .await
            .map_err(|e| ExplainFailure::Query(e.into()))?;
    }
    tx.commit().await?;
    let span = tracing::Span::current();
    // A replay of the whole log: off the async threads, as curve reads are.
    tokio::task::spawn_blocking(move || {
        let _span = span.enter();
        let points = (
            Point::of(&record, previous.as_ref()),
            previous.as_ref().map(|r| Point::of(r, earlier.as_ref())),
        );
        explain(&p, day, points, previous, inputs)
    })
    .await
    .map_err(|e| QueryError::Failed(e.into()))?
}

/// The day, the one before it and the one before that (whose record gives
/// the previous point's flows).
fn three_days(day: NaiveDate) -> [NaiveDate; 3] {
    let before = day.pred_opt().expect("date in range");
    [day, before, before.pred_opt().expect("date in range")]
}

/// The stored portfolio, its records of [`three_days`] (in one read) and
/// the anchor its day's replay may start from.
async fn stored_days(
    tx: &mut sqlx::PgConnection,
    id: &str,
    day: NaiveDate,
) -> Result<(PortfolioRow, [Option<HistoryRow>; 3], Option<DayState>), ExplainFailure> {
    let p = navd_storage::get_portfolio(&mut *tx, id)
        .await?
        .ok_or(QueryError::NotFound)?;
    let days = three_days(day);
    let rows = navd_storage::load_history(&mut *tx, id, Some(days[2]), Some(day)).await?;
    let row = |d: NaiveDate| rows.iter().find(|r| r.record.date == d).cloned();
    let anchor = anchor_before(tx, &p, day).await?;
    Ok((p, days.map(row), anchor))
}

/// The newest stored anchor of `p` at the end of a day before `day` that
/// a replay may start from: the log before it is then not read. Not one
/// owing a dividend paid on `day`: its ex-date, which finds the dividend
/// among the day's events, is in the log before the anchor.
async fn anchor_before(
    tx: &mut sqlx::PgConnection,
    p: &PortfolioRow,
    day: NaiveDate,
) -> Result<Option<DayState>, ExplainFailure> {
    let before = day.pred_opt().expect("date in range");
    let id = p.portfolio_id.clone();
    let raw = navd_storage::anchors::anchors_at(tx, &[(id, before)]).await?;
    Ok(raw
        .get(&p.portfolio_id)
        .and_then(|r| navd_storage::anchors::usable(p, r))
        .filter(|a| !a.receivables.iter().any(|r| r.pay_date == day)))
}

fn no_record(p: &PortfolioRow, day: NaiveDate) -> String {
    match p.last_day {
        Some(last) => format!(
            "no record on {day}: its records run from {} through {last}",
            p.first_day
        ),
        None => format!("no record on {day}: it has no records yet"),
    }
}

/// The day folded from the replayed previous state, and reported.
fn explain(
    p: &PortfolioRow,
    day: NaiveDate,
    (record, previous_point): (Point, Option<Point>),
    previous: Option<HistoryRow>,
    inputs: DayInputs,
) -> Result<Explanation, ExplainFailure> {
    let failed = |e: anyhow::Error| ExplainFailure::Query(QueryError::Failed(e));
    let book = &inputs.book;
    let base = base_currency(p, book);
    let start = inputs
        .start
        .clone()
        .unwrap_or_else(|| initial_state(p, book, &base));
    let before = day.pred_opt().expect("date in range");
    let mut state = match projections::replay(&start, &inputs.log, book, before) {
        Ok(Ok(state)) => state,
        Ok(Err(i)) => return Err(ExplainFailure::Inconsistent(i)),
        Err(e) => return Err(failed(e.into())),
    };
    // Before the history's first day nothing happens but days passing.
    state.date = state.date.max(before);
    if let Some(prev) = &previous {
        state.market_value = prev.market_value_exact;
        state.nav = prev.nav_exact;
    }
    let mut todays: Vec<&Transaction> = inputs
        .log
        .iter()
        .filter(|t| t.trade_date == day && t.kind.name() != "portfolio_settings")
        .collect();
    todays.sort_by_key(|t| t.fold_key());
    let e = match projections::explain_day(&state, &todays, book) {
        Ok(Ok(Some(e))) => e,
        Ok(Ok(None)) => return Err(QueryError::NoRecord(no_record(p, day)).into()),
        Ok(Err(i)) => return Err(ExplainFailure::Inconsistent(i)),
        Err(e) => return Err(failed(e.into())),
    };
    // The day folded without an inconsistency: its actions apply.
    let effects = match projections::day_actions(&state, book) {
        Ok(Ok(effects)) => effects,
        Ok(Err(i)) => return Err(ExplainFailure::Inconsistent(i)),
        Err(e) => return Err(failed(e.into())),
    };
    let actions = effects
        .iter()
        .map(|x| action_json(x, book, &inputs.action_origins));
    Ok(Explanation {
        portfolio_id: p.portfolio_id.clone(),
        date: day,
        record,
        previous: previous_point,
        events: events_of(
            &e,
            actions.collect(),
            inputs.day_events,
            &inputs.splits,
            day,
        ),
        valuation: e
            .valuation
            .iter()
            .map(|v| line_of(v, &e.variation_margins, &e.coupons))
            .collect(),
        cash: e.cash.iter().map(CashView::of).collect(),
        receivable: money_text(e.receivable),
        inflow: money_text(e.inflow),
        outflow: money_text(e.outflow),
        flow_rates: e
            .flow_rates
            .iter()
            .map(|r| FlowRateView {
                currency: r.currency.to_string(),
                fx_rate: r.fx_rate.normalize().to_string(),
                fx_date: r.fx_date,
            })
            .collect(),
        corporate_actions: effects.iter().map(ActionEffectView::of).collect(),
    })
}

/// The line of `v`, with its variation margin of the day among `margins`
/// (a future's, 0 when it paid none).
fn line_of(
    v: &projections::ValuedPosition,
    margins: &[(projections::Symbol, Decimal)],
    coupons: &[(projections::Symbol, Decimal)],
) -> ValuationLine {
    let coupon = coupons
        .iter()
        .find(|(s, _)| *s == v.symbol)
        .map(|(_, c)| *c);
    let margin = margins
        .iter()
        .find(|(s, _)| *s == v.symbol)
        .map(|(_, m)| *m);
    ValuationLine {
        symbol: v.symbol.to_string(),
        kind: v.kind.to_string(),
        multiplier: v.multiplier.normalize().to_string(),
        quantity: v.quantity.to_string(),
        price: v.price.normalize().to_string(),
        price_source: v.price_source.as_str().to_string(),
        price_date: v.price_date,
        split_factor: v.split_factor.normalize().to_string(),
        currency: v.currency.to_string(),
        fx_rate: v.fx_rate.normalize().to_string(),
        fx_date: v.fx_date,
        value: money_text(v.value),
        notional: v.notional.map(money_text),
        variation_margin: v.notional.map(|_| money_text(margin.unwrap_or_default())),
        accrued_interest: v.accrued_interest.map(money_text),
        coupon: coupon.map(money_text),
    }
}

/// The day's events in fold order: the splits the fold applied to held
/// positions, the corporate actions that touched one (`actions`, already
/// in order), the dividends it paid (ex-date before the day; one paid on
/// its ex-date is listed once, as the day's transaction), then the day's
/// transactions.
fn events_of(
    e: &DayExplanation,
    actions: Vec<Value>,
    mut stored: Vec<StoredTransaction>,
    splits: &[StoredSplit],
    day: NaiveDate,
) -> Vec<Value> {
    let mut out: Vec<Value> = splits
        .iter()
        .filter(|s| e.splits.iter().any(|(sym, _, _)| sym.as_str() == s.symbol))
        .map(split_json)
        .collect();
    out.extend(actions);
    stored.retain(|s| s.tx.kind.name() != "portfolio_settings");
    stored.sort_by_key(|s| (s.tx.trade_date == day, s.tx.fold_key()));
    out.extend(stored.iter().map(transaction_json));
    out
}

fn split_json(s: &StoredSplit) -> Value {
    let mut m = head(s.event_id, "split", 0, None, &s.origin);
    m.insert("symbol".into(), json!(s.symbol));
    m.insert("ex_date".into(), json!(s.ex_date));
    m.insert("numerator".into(), json!(s.numerator));
    m.insert("denominator".into(), json!(s.denominator));
    Value::Object(m)
}

/// The action event behind `effect` (the version in effect, from the
/// book) as its producer wrote it, with where it came from; an action
/// event is never a correction (revision 0). An origin missing from
/// `origins` (the event stored after the snapshot's book was read) leaves
/// it unknown rather than failing the day.
fn action_json(
    effect: &projections::ActionEffect,
    book: &projections::PriceBook,
    origins: &std::collections::HashMap<uuid::Uuid, Origin>,
) -> Value {
    let unknown = Origin {
        topic: None,
        partition: None,
        offset: None,
        received_at: chrono::DateTime::UNIX_EPOCH,
    };
    let origin = origins.get(&effect.event_id).unwrap_or(&unknown);
    let mut m = head(effect.event_id, effect.kind.name(), 0, None, origin);
    let Some(a) = book.actions().find(|a| a.event_id == effect.event_id) else {
        return Value::Object(m);
    };
    m.insert("symbol".into(), json!(a.symbol.as_str()));
    m.insert("ex_date".into(), json!(a.ex_date));
    if let Some(new) = &a.new_symbol {
        m.insert("new_symbol".into(), json!(new.as_str()));
        m.insert("numerator".into(), json!(a.numerator));
        m.insert("denominator".into(), json!(a.denominator));
    }
    m.insert(
        "cost_allocation".into(),
        json!(a.cost_allocation.normalize().to_string()),
    );
    let decimals = [("cash", a.cash), ("price", a.price)];
    for (k, v) in decimals {
        if let Some(v) = v {
            m.insert(k.into(), json!(v.normalize().to_string()));
        }
    }
    if let Some(c) = &a.currency {
        m.insert("currency".into(), json!(c.as_str()));
    }
    Value::Object(m)
}

/// A stored transaction as its producer wrote it, with its place in the
/// log and its correction fields (`revision` 0 and `corrects` null for an
/// original).
fn transaction_json(s: &StoredTransaction) -> Value {
    let t = &s.tx;
    let (revision, corrects) = t
        .correction
        .map_or((0, None), |c| (c.revision, Some(c.corrects)));
    let mut m = head(t.event_id, t.kind.name(), revision, corrects, &s.origin);
    m.insert("portfolio_id".into(), json!(t.portfolio_id.as_str()));
    m.insert("trade_date".into(), json!(t.trade_date));
    if let Some(at) = t.occurred_at {
        m.insert("occurred_at".into(), json!(at));
    }
    if let Value::Object(fields) = serde_json::to_value(&t.kind).unwrap_or_default() {
        for (k, v) in fields {
            if k != "type" && !v.is_null() {
                m.entry(k).or_insert(v);
            }
        }
    }
    if let Some(c) = &t.currency {
        m.insert("currency".into(), json!(c.as_str()));
    }
    if let Some(r) = t.fx_rate {
        m.insert("fx_rate".into(), json!(r.normalize().to_string()));
    }
    Value::Object(m)
}

fn head(
    event_id: uuid::Uuid,
    kind: &str,
    revision: u32,
    corrects: Option<uuid::Uuid>,
    o: &Origin,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("event_id".into(), json!(event_id));
    m.insert("type".into(), json!(kind));
    m.insert("revision".into(), json!(revision));
    m.insert("corrects".into(), json!(corrects));
    m.insert("topic".into(), json!(o.topic));
    m.insert("partition".into(), json!(o.partition));
    m.insert("offset".into(), json!(o.offset));
    m.insert("received_at".into(), json!(o.received_at));
    m
}

/// The state before `p`'s first day, in its base currency (`None` when it
/// is the book's default) and with its settings.
fn initial_state(
    p: &PortfolioRow,
    book: &projections::PriceBook,
    base: &projections::Currency,
) -> DayState {
    let mut s = DayState::initial_for(
        p.first_day,
        p.cash_mode,
        (base != book.default_currency()).then(|| base.clone()),
    );
    s.allow_short = p.allow_short;
    s.lot_method = p.lot_method;
    s
}
