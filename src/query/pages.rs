//! Small reads the portfolio page needs beside the curve: the currency
//! its money is shown in, and where a benchmark's closes begin (to say why
//! its line cannot be drawn on a range, and which range it can).

use chrono::NaiveDate;

use super::QueryError;
use navd_storage::Db;

/// A portfolio's base currency as its pages show money in: its settings',
/// else the deployment's default.
pub(crate) async fn currency_of(db: &Db, id: &str) -> Result<String, QueryError> {
    let mut conn = db.pool().acquire().await?;
    let p = navd_storage::get_portfolio(&mut conn, id)
        .await?
        .ok_or(QueryError::NotFound)?;
    Ok(p.base_currency.map_or_else(
        || db.prices().default_currency().to_string(),
        |c| c.to_string(),
    ))
}

/// The day of a symbol's first and last close (none: it has none).
pub(crate) async fn close_span(
    db: &Db,
    symbol: &str,
) -> Result<Option<(NaiveDate, NaiveDate)>, QueryError> {
    let mut conn = db.pool().acquire().await?;
    let wanted = [symbol.to_string()];
    let series = navd_storage::prices::series(&mut conn, &wanted).await?;
    Ok(series.get(symbol).and_then(|s| {
        let first = s.closes.first()?.0;
        Some((first, s.closes.last()?.0))
    }))
}
