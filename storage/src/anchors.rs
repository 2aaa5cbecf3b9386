//! Anchors: older states a portfolio's fold may resume from
//! (`portfolio_anchors`; docs/design.md, "Anchors").
//!
//! The stored base state is the end of the day before the last record. A
//! refold from an earlier day (a late trade, an amendment, a restated
//! close) cannot use it and replays positions from the history's first day,
//! reading its whole log. An anchor is a past base state, kept when the base
//! state moves into a new month: a refold from day d replays from the
//! newest anchor on or before d−1, reading the log after it only. A refold
//! from day d leaves the states of days before d as they were, so it drops
//! only the anchors after its start; a portfolio keeps those of about the
//! last two months, and the state of every year end its folds passed (so
//! that explaining any day replays a year of log at most).

use std::collections::HashMap;

use chrono::NaiveDate;
use serde_json::value::RawValue;
use sqlx::types::Json;
use sqlx::PgConnection;

/// Anchors older than this many days before a new one are dropped (but
/// for year ends').
pub(crate) const KEEP_DAYS: i32 = 62;

/// The newest anchor of each portfolio of `at` on or before its day, as
/// stored (JSON of a `DayState`).
pub async fn anchors_at(
    conn: &mut PgConnection,
    at: &[(String, NaiveDate)],
) -> sqlx::Result<HashMap<String, Box<RawValue>>> {
    if at.is_empty() {
        return Ok(HashMap::new());
    }
    let ids: Vec<&str> = at.iter().map(|(p, _)| p.as_str()).collect();
    let days: Vec<NaiveDate> = at.iter().map(|(_, d)| *d).collect();
    let rows: Vec<(String, Json<Box<RawValue>>)> = sqlx::query_as(
        "SELECT DISTINCT ON (a.portfolio_id) a.portfolio_id, a.state
           FROM portfolio_anchors a
           JOIN UNNEST($1::text[], $2::date[]) AS u(id, day)
             ON a.portfolio_id = u.id AND a.day <= u.day
          WHERE a.portfolio_id = ANY($1::text[])
          ORDER BY a.portfolio_id, a.day DESC",
    )
    .bind(&ids)
    .bind(&days)
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows.into_iter().map(|(p, Json(s))| (p, s)).collect())
}

/// The anchor `raw` of portfolio `p`, when a fold of `p` may resume from
/// it: not before the history, in the portfolio's current cash mode and
/// base currency (a change of either refolds from D0).
pub fn usable(p: &super::PortfolioRow, raw: &RawValue) -> Option<projections::DayState> {
    let state: projections::DayState = serde_json::from_str(raw.get()).ok()?;
    let before_first = p.first_day.pred_opt()?;
    (state.date >= before_first
        && state.cash_mode == p.cash_mode
        && state.allow_short == p.allow_short
        && state.lot_method == p.lot_method
        && state.base_currency == p.base_currency)
        .then_some(state)
}

/// Rewrites the anchors of a refold, in one statement:
///
/// - drops each portfolio of `starts`' anchors dated after its day (a
///   refold from there may have changed them; `None`: all of them), but
///   those `keeps` names again — so a refold of an unchanged log writes no
///   anchor at all;
/// - keeps `keeps` (portfolio, the state's day, the state), and drops each
///   portfolio's anchors older than [`KEEP_DAYS`] before a new one, except
///   those of year ends (31 December), kept for as long as they stand.
///
/// The deletes never touch a key `keeps` writes, so the three parts of the
/// statement (which see one snapshot) never meet on a row.
pub async fn sync_anchors(
    conn: &mut PgConnection,
    starts: &[(&str, Option<NaiveDate>)],
    keeps: &[(&str, NaiveDate, &RawValue)],
) -> sqlx::Result<()> {
    if starts.is_empty() && keeps.is_empty() {
        return Ok(());
    }
    if let Some(id) = one_portfolio(starts, keeps) {
        let start = starts.first().map(|(_, d)| *d);
        return sync_one(conn, id, start, keeps).await;
    }
    let ids: Vec<&str> = starts.iter().map(|(p, _)| *p).collect();
    let days: Vec<Option<NaiveDate>> = starts.iter().map(|(_, d)| *d).collect();
    let kept_ids: Vec<&str> = keeps.iter().map(|(p, _, _)| *p).collect();
    let kept_days: Vec<NaiveDate> = keeps.iter().map(|(_, d, _)| *d).collect();
    let states: Vec<Json<&RawValue>> = keeps.iter().map(|(_, _, s)| Json(*s)).collect();
    // Each delete repeats its set of portfolios as `= ANY`, where Citus
    // prunes shards (docs/scaling.md).
    sqlx::query(
        "WITH dropped AS (
             DELETE FROM portfolio_anchors a
              USING UNNEST($1::text[], $2::date[]) AS u(id, day)
              WHERE a.portfolio_id = u.id AND (u.day IS NULL OR a.day > u.day)
                AND a.portfolio_id = ANY($1::text[])
                AND NOT EXISTS (SELECT 1 FROM UNNEST($3::text[], $4::date[]) AS k(id, day)
                                 WHERE k.id = a.portfolio_id AND k.day = a.day)),
         aged AS (
             DELETE FROM portfolio_anchors a
              USING UNNEST($3::text[], $4::date[]) AS u(id, day)
              WHERE a.portfolio_id = u.id AND a.day < u.day - $6::int4
                AND NOT (extract(month FROM a.day) = 12 AND extract(day FROM a.day) = 31)
                AND a.portfolio_id = ANY($3::text[])
                AND NOT EXISTS (SELECT 1 FROM UNNEST($3::text[], $4::date[]) AS k(id, day)
                                 WHERE k.id = a.portfolio_id AND k.day = a.day))
         INSERT INTO portfolio_anchors (portfolio_id, day, state)
         SELECT * FROM UNNEST($3::text[], $4::date[], $5::jsonb[])
         ON CONFLICT (portfolio_id, day) DO UPDATE SET state = excluded.state
          WHERE portfolio_anchors.state IS DISTINCT FROM excluded.state",
    )
    .bind(&ids)
    .bind(&days)
    .bind(&kept_ids)
    .bind(&kept_days)
    .bind(&states)
    .bind(KEEP_DAYS)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Whether [`sync_anchors`] would leave one portfolio's anchors as they
/// are, `stored` being them as read under its lock (day, state): `start`
/// its entry of `starts` if it has one, `keeps` its (day, state) pairs.
/// The statement's rules, in the same order: nothing it drops (after the
/// start, or aged, and not kept) is stored, and every kept state is
/// stored as it is (compared as JSON values, so a state `jsonb` prints its
/// own way is still the same one).
pub fn unchanged(
    stored: &[(NaiveDate, serde_json::Value)],
    start: Option<Option<NaiveDate>>,
    keeps: &[(NaiveDate, &RawValue)],
) -> bool {
    let aged_before = keeps
        .iter()
        .map(|(d, _)| *d)
        .max()
        .and_then(|n| n.checked_sub_days(chrono::Days::new(KEEP_DAYS as u64)));
    let drops = |day: NaiveDate| {
        let after_start = start.is_some_and(|s| s.is_none_or(|s| day > s));
        let aged = aged_before.is_some_and(|a| day < a && !projections::is_year_end(day));
        !keeps.iter().any(|(k, _)| *k == day) && (after_start || aged)
    };
    if stored.iter().any(|(day, _)| drops(*day)) {
        return false;
    }
    // A portfolio stores one anchor a day (the table's key).
    keeps.iter().all(|(day, state)| {
        stored.iter().find(|(d, _)| d == day).is_some_and(|(_, s)| {
            serde_json::from_str::<serde_json::Value>(state.get()).is_ok_and(|v| v == *s)
        })
    })
}

/// The one portfolio `starts` and `keeps` are all about, if so.
fn one_portfolio<'a>(
    starts: &[(&'a str, Option<NaiveDate>)],
    keeps: &[(&'a str, NaiveDate, &RawValue)],
) -> Option<&'a str> {
    let mut ids = starts
        .iter()
        .map(|(p, _)| *p)
        .chain(keeps.iter().map(|(p, _, _)| *p));
    let first = ids.next()?;
    (starts.len() <= 1 && ids.all(|p| p == first)).then_some(first)
}

/// [`sync_anchors`] of one portfolio (a `calculate`, a `backfill`, a
/// refresh of a lone portfolio), written so that every part names its
/// portfolio by `=`: Citus sends each part to the portfolio's shard alone,
/// where the arrays of the general statement made it plan an `INSERT …
/// SELECT` through the coordinator (~3 ms against ~1 ms a `calculate`,
/// docs/scaling.md). `start`: `Some(day)` drops the anchors after `day`
/// (`Some(None)`: all of them); `None` drops none but the aged.
async fn sync_one(
    conn: &mut PgConnection,
    id: &str,
    start: Option<Option<NaiveDate>>,
    keeps: &[(&str, NaiveDate, &RawValue)],
) -> sqlx::Result<()> {
    let kept_days: Vec<NaiveDate> = keeps.iter().map(|(_, d, _)| *d).collect();
    let newest = kept_days.iter().max().copied();
    let mut q = sqlx::QueryBuilder::<sqlx::Postgres>::new("");
    if !keeps.is_empty() {
        q.push("WITH gone AS (");
    }
    // The aged: older than KEEP_DAYS before the newest kept anchor (the
    // general statement's per-anchor test, for one portfolio), but year
    // ends.
    q.push("DELETE FROM portfolio_anchors a WHERE a.portfolio_id = ")
        .push_bind(id)
        .push("::text AND a.day <> ALL(")
        .push_bind(&kept_days)
        .push("::date[]) AND ((")
        .push_bind(start.is_some())
        .push("::bool AND (")
        .push_bind(start.flatten())
        .push("::date IS NULL OR a.day > ")
        .push_bind(start.flatten())
        .push("::date)) OR (a.day < ")
        .push_bind(newest)
        .push("::date - ")
        .push_bind(KEEP_DAYS)
        .push("::int4 AND NOT (extract(month FROM a.day) = 12 AND extract(day FROM a.day) = 31)))");
    if !keeps.is_empty() {
        q.push(") INSERT INTO portfolio_anchors (portfolio_id, day, state) ");
        q.push_values(keeps, |mut row, (p, d, s)| {
            row.push_bind(*p)
                .push_unseparated("::text")
                .push_bind(*d)
                .push_unseparated("::date")
                .push_bind(Json(*s))
                .push_unseparated("::jsonb");
        });
        q.push(
            " ON CONFLICT (portfolio_id, day) DO UPDATE SET state = excluded.state
               WHERE portfolio_anchors.state IS DISTINCT FROM excluded.state",
        );
    }
    // One text per count of anchors: a handful of shapes, prepared once each.
    q.build().execute(&mut *conn).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw() -> Box<RawValue> {
        serde_json::value::to_raw_value(&serde_json::json!({})).unwrap()
    }

    fn d(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    fn state(qty: &str) -> Box<RawValue> {
        serde_json::value::to_raw_value(&serde_json::json!({"cash": "1.50", "qty": qty})).unwrap()
    }

    /// As `jsonb` gives a state back: its own key order and spacing.
    fn stored(day: &str, qty: &str) -> (NaiveDate, serde_json::Value) {
        let text = format!(r#"{{"qty": "{qty}", "cash": "1.50"}}"#);
        (d(day), serde_json::from_str(&text).unwrap())
    }

    #[test]
    fn anchors_are_unchanged_only_when_the_statement_would_write_nothing() {
        let (y1, y2) = (state("10"), state("20"));
        let keeps = [(d("2023-12-31"), &*y1), (d("2024-12-31"), &*y2)];
        let both = [stored("2023-12-31", "10"), stored("2024-12-31", "20")];
        let before = Some(Some(d("2023-05-01")));
        assert!(
            unchanged(&both, before, &keeps),
            "the same, printed as jsonb does"
        );
        assert!(unchanged(&both, None, &keeps));
        assert!(unchanged(&[], before, &[]), "none stored, none kept");

        // A kept state that differs, or is not stored yet.
        let other = [stored("2023-12-31", "11"), stored("2024-12-31", "20")];
        assert!(!unchanged(&other, before, &keeps));
        assert!(!unchanged(&both[..1], before, &keeps));
        let scaled = [stored("2023-12-31", "10.0"), stored("2024-12-31", "20")];
        assert!(!unchanged(&scaled, before, &keeps), "digit for digit");

        // An anchor not kept: dropped after the start (all of them when
        // the start is `None`), kept before it unless aged.
        let month = stored("2024-11-30", "19");
        let with_month = [both[0].clone(), month.clone(), both[1].clone()];
        assert!(!unchanged(&with_month, before, &keeps));
        assert!(!unchanged(&with_month, Some(None), &keeps));
        assert!(unchanged(&with_month, Some(Some(d("2024-11-30"))), &keeps));
        assert!(
            unchanged(&with_month, None, &keeps),
            "not aged: within 62 days"
        );
        let old = [stored("2024-10-29", "18"), both[1].clone()];
        let last = [keeps[1]];
        assert!(
            !unchanged(&old, None, &last),
            "aged: over 62 days before the newest kept"
        );
        let on_the_day = [(d("2024-12-31"), &*y2)];
        let not_aged = [stored("2024-10-30", "18"), stored("2024-12-31", "20")];
        assert!(
            unchanged(&not_aged, None, &on_the_day),
            "exactly 62 days: kept"
        );
        assert!(
            unchanged(&both, None, &last),
            "an old year end is never aged"
        );
        // A year end is 31 December: neither another 31st nor another
        // day of December.
        let y3 = state("30");
        let later = [(d("2025-03-05"), &*y3)];
        for other in ["2024-10-31", "2024-12-15"] {
            let aged = [stored(other, "18"), stored("2025-03-05", "30")];
            assert!(!unchanged(&aged, None, &later), "{other} is aged");
        }
        let year_end = [stored("2024-12-31", "18"), stored("2025-03-05", "30")];
        assert!(unchanged(&year_end, None, &later));
        assert!(
            !unchanged(&both, Some(None), &last),
            "but dropped after the start"
        );
        // Nothing kept: nothing ages.
        assert!(unchanged(&old, None, &[]));
    }

    #[test]
    fn the_one_portfolio_form_is_taken_only_for_one_portfolio() {
        let d = NaiveDate::from_ymd_opt(2024, 12, 31).unwrap();
        let s = raw();
        let keep = |p| (p, d, &*s);
        assert_eq!(one_portfolio(&[("a", None)], &[keep("a")]), Some("a"));
        assert_eq!(one_portfolio(&[], &[keep("a"), keep("a")]), Some("a"));
        assert_eq!(one_portfolio(&[("a", Some(d))], &[]), Some("a"));
        assert_eq!(one_portfolio(&[("a", None)], &[keep("b")]), None);
        assert_eq!(one_portfolio(&[], &[keep("a"), keep("b")]), None);
        assert_eq!(one_portfolio(&[("a", None), ("b", None)], &[]), None);
        // One portfolio named twice among the starts: the general
        // statement, which takes each start as given.
        assert_eq!(one_portfolio(&[("a", None), ("a", Some(d))], &[]), None);
        assert_eq!(one_portfolio(&[], &[]), None);
    }
}
