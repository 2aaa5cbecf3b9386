//! The logical transactions of a portfolio as an audit trail
//! (`GET …/transactions`): each with the version in effect and, asked
//! for, every stored version with the revision that superseded it.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, NaiveDate, Utc};
use projections::{Kind, PortfolioId, Transaction};
use serde::Serialize;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::QueryError;
use navd_storage::audit::{PageAsk, StoredVersion};
use navd_storage::Db;

/// One stored version of a transaction, as listed.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct VersionView {
    pub event_id: Uuid,
    /// The event's type (`cancel` for a cancel).
    #[serde(rename = "type")]
    pub kind: String,
    /// 0 for the original.
    pub revision: u32,
    /// The original this version corrects; null for the original.
    pub corrects: Option<Uuid>,
    /// Null for a cancel, which carries no date.
    pub trade_date: Option<NaiveDate>,
    pub received_at: DateTime<Utc>,
    pub topic: Option<String>,
    pub partition: Option<i32>,
    pub offset: Option<i64>,
    /// The event's own fields (symbol, quantity, price, fee, amount, …) as
    /// producers write them; decimals as strings.
    #[schema(value_type = Object)]
    pub fields: Map<String, Value>,
    /// The next higher stored revision (only in `versions`); null for the
    /// highest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<Uuid>,
}

/// A logical transaction: an original and its corrections.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct LogicalTransaction {
    /// The original's event id (what corrections name in `corrects`).
    pub transaction_id: Uuid,
    /// The version in effect; null when the transaction is cancelled.
    pub effective: Option<VersionView>,
    /// With `superseded=true`: every stored version, by revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub versions: Option<Vec<VersionView>>,
}

/// A page of a portfolio's transactions.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct TransactionPage {
    pub portfolio_id: String,
    pub transactions: Vec<LogicalTransaction>,
    /// Cursor for the next page; null on the last page.
    pub next: Option<String>,
}

/// What to list.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TransactionsAsk {
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
    pub after: Option<(NaiveDate, i64)>,
    pub limit: usize,
    pub superseded: bool,
}

/// A page of the logical transactions of `id` by trade date (see the
/// module doc). Cancelled ones are listed only with `superseded`, at the
/// place of their last version that was not a cancel.
pub(crate) async fn read_transactions(
    db: &Db,
    id: &PortfolioId,
    ask: TransactionsAsk,
) -> Result<TransactionPage, QueryError> {
    let failed = QueryError::Failed;
    let mut tx = navd_storage::read_snapshot(db.pool()).await?;
    if !navd_storage::audit::exists(&mut tx, id).await? {
        return Err(QueryError::NotFound);
    }
    let page = PageAsk {
        from: ask.from,
        to: ask.to,
        after: ask.after,
        limit: ask.limit as i64 + 1,
    };
    let effective = navd_storage::audit::effective_page(&mut tx, id, page)
        .await
        .map_err(failed)?;
    let aside = match ask.superseded {
        true => navd_storage::audit::superseded(&mut tx, id)
            .await
            .map_err(failed)?,
        false => Vec::new(),
    };
    let mut keys: Vec<Uuid> = aside.iter().map(|v| v.tx.logical_id()).collect();
    keys.sort();
    keys.dedup();
    let in_effect: HashSet<Uuid> = navd_storage::audit::in_effect(&mut tx, id, &keys)
        .await?
        .into_iter()
        .collect();
    tx.commit().await?;
    Ok(page_of(id, ask, effective, aside, &in_effect))
}

/// Where a listed transaction stands in the log.
type Place = (NaiveDate, i64);

fn page_of(
    id: &PortfolioId,
    ask: TransactionsAsk,
    effective: Vec<StoredVersion>,
    aside: Vec<StoredVersion>,
    in_effect: &HashSet<Uuid>,
) -> TransactionPage {
    let mut groups: HashMap<Uuid, Vec<StoredVersion>> = HashMap::new();
    for v in aside {
        groups.entry(v.tx.logical_id()).or_default().push(v);
    }
    let mut items: Vec<(Place, LogicalTransaction)> = Vec::new();
    for v in effective {
        let key = v.tx.logical_id();
        let place = (v.tx.trade_date, v.tx.seq);
        let others = groups.remove(&key).unwrap_or_default();
        items.push((place, logical(key, Some(v), others, ask.superseded)));
    }
    // Cancelled transactions (no version in effect), at their last dated
    // version, when that lies in the range and after the cursor.
    let in_page = |p: &Place| {
        ask.from.is_none_or(|f| p.0 >= f)
            && ask.to.is_none_or(|t| p.0 <= t)
            && ask.after.is_none_or(|a| *p > a)
    };
    for (key, versions) in groups {
        if in_effect.contains(&key) {
            // Listed where its version in effect is, on another page.
            continue;
        }
        let dated = versions
            .iter()
            .filter(|v| !matches!(v.tx.kind, Kind::Cancel))
            .max_by_key(|v| v.tx.revision());
        let Some(place) = dated.map(|v| (v.tx.trade_date, v.tx.seq)) else {
            continue;
        };
        if in_page(&place) {
            items.push((place, logical(key, None, versions, true)));
        }
    }
    items.sort_by_key(|(p, _)| *p);
    let next = (items.len() > ask.limit).then(|| {
        let (day, seq) = items[ask.limit - 1].0;
        format!("{day}.{seq}")
    });
    items.truncate(ask.limit);
    TransactionPage {
        portfolio_id: id.as_str().to_string(),
        transactions: items.into_iter().map(|(_, t)| t).collect(),
        next,
    }
}

/// A logical transaction from its version in effect and the others.
fn logical(
    key: Uuid,
    effective: Option<StoredVersion>,
    others: Vec<StoredVersion>,
    with_versions: bool,
) -> LogicalTransaction {
    let versions = with_versions.then(|| {
        let mut all: Vec<&StoredVersion> = others.iter().chain(effective.as_ref()).collect();
        all.sort_by_key(|v| (v.tx.revision(), v.tx.seq));
        let mut views: Vec<VersionView> = all.iter().map(|v| view(v)).collect();
        for i in 0..views.len().saturating_sub(1) {
            views[i].superseded_by = Some(views[i + 1].event_id);
        }
        views
    });
    LogicalTransaction {
        transaction_id: key,
        effective: effective.as_ref().map(view),
        versions,
    }
}

fn view(v: &StoredVersion) -> VersionView {
    let t = &v.tx;
    VersionView {
        event_id: t.event_id,
        kind: t.kind.name().to_string(),
        revision: t.revision(),
        corrects: t.correction.map(|c| c.corrects),
        trade_date: (!matches!(t.kind, Kind::Cancel)).then_some(t.trade_date),
        received_at: v.origin.received_at,
        topic: v.origin.topic.clone(),
        partition: v.origin.partition,
        offset: v.origin.offset,
        fields: fields_of(t),
        superseded_by: None,
    }
}

/// The lots a disposal names, as producers write them; none: null.
fn picks(lots: &[projections::LotPick]) -> Value {
    if lots.is_empty() {
        Value::Null
    } else {
        json!(lots
            .iter()
            .map(|p| json!({"lot": p.lot, "quantity": p.quantity.normalize().to_string()}))
            .collect::<Vec<_>>())
    }
}

/// The event's own fields as producers write them.
fn fields_of(t: &Transaction) -> Map<String, Value> {
    let d = |x: &rust_decimal::Decimal| Value::from(x.normalize().to_string());
    let mut m = match &t.kind {
        Kind::Buy(tr) | Kind::Sell(tr) => json!({"symbol": tr.symbol.as_str(),
            "quantity": d(&tr.quantity), "price": d(&tr.price), "fee": d(&tr.fee),
            "accrued": tr.accrued.as_ref().map(d), "lots": picks(&tr.lots)}),
        Kind::Deposit { amount } | Kind::Withdrawal { amount } => json!({"amount": d(amount)}),
        Kind::Fee { amount, symbol }
        | Kind::Tax { amount, symbol }
        | Kind::FeeRefund { amount, symbol }
        | Kind::TaxRefund { amount, symbol } => {
            json!({"amount": d(amount), "symbol": symbol.as_ref().map(|s| s.as_str())})
        }
        Kind::Interest { amount, tax } => json!({"amount": d(amount), "tax": d(tax)}),
        Kind::TransferIn {
            symbol,
            quantity,
            price,
            cost,
            acquired_on,
        } => json!({"symbol": symbol.as_str(),
            "quantity": d(quantity), "price": d(price), "cost": cost.as_ref().map(d),
            "acquired_on": acquired_on}),
        Kind::TransferOut {
            symbol,
            quantity,
            price,
            lots,
        } => json!({"symbol": symbol.as_str(),
            "quantity": d(quantity), "price": d(price), "lots": picks(lots)}),
        Kind::Dividend(v) => json!({"symbol": v.symbol.as_str(), "amount": d(&v.amount),
            "tax": d(&v.tax), "fee": d(&v.fee), "pay_date": v.pay_date,
            "reinvest": v.reinvest.map(|r| json!({"quantity": d(&r.quantity), "price": d(&r.price)}))}),
        Kind::PortfolioSettings {
            cash,
            base_currency,
            allow_short,
            lot_method,
        } => json!({"cash": cash.as_str(),
            "base_currency": base_currency.as_ref().map(|c| c.as_str()),
            // Written only when true, as producers usually leave it out.
            "allow_short": allow_short.then_some(true),
            "lot_method": lot_method.keeps_lots().then(|| lot_method.as_str())}),
        Kind::PaymentInLieu {
            symbol,
            amount,
            pay_date,
        } => json!({"symbol": symbol.as_str(), "amount": d(amount), "pay_date": pay_date}),
        Kind::ReturnOfCapital { symbol, amount } => {
            json!({"symbol": symbol.as_str(), "amount": d(amount)})
        }
        Kind::Exercise { symbol, quantity } | Kind::Assignment { symbol, quantity } => {
            json!({"symbol": symbol.as_str(), "quantity": d(quantity)})
        }
        Kind::Cancel => json!({}),
    };
    let m = m.as_object_mut().expect("an object").clone();
    let mut m: Map<String, Value> = m.into_iter().filter(|(_, v)| !v.is_null()).collect();
    if let Some(c) = &t.currency {
        m.insert("currency".into(), Value::from(c.as_str()));
    }
    if let Some(r) = &t.fx_rate {
        m.insert("fx_rate".into(), d(r));
    }
    if let Some(at) = t.occurred_at {
        m.insert("occurred_at".into(), json!(at));
    }
    m
}
