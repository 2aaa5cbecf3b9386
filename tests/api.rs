//! The HTTP API over a real PostgreSQL: the golden book end to end, the
//! operations' semantics, and every 4xx/503 of the contract as problem+json.

mod common;

use common::*;
use navd::clock::Clock;
use reqwest::StatusCode;
use serde_json::{json, Value};

const GOLDEN: &str = "golden-1";

fn admin() -> String {
    token("nav:read nav:write", &["*"])
}

async fn get_json(app: &TestApp, path: &str, tok: &str) -> (StatusCode, Value) {
    let r = app
        .client
        .get(app.url(path))
        .bearer_auth(tok)
        .send()
        .await
        .unwrap();
    let s = r.status();
    (s, r.json().await.unwrap_or(Value::Null))
}

async fn post(app: &TestApp, path: &str, tok: &str, body: Option<Value>) -> reqwest::Response {
    let mut req = app.client.post(app.url(path)).bearer_auth(tok);
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.unwrap()
}

/// Asserts a problem+json response with `status` and returns its body.
async fn problem(r: reqwest::Response, status: StatusCode) -> Value {
    assert_eq!(r.status(), status, "status");
    let ct = r.headers()["content-type"].to_str().unwrap().to_string();
    assert_eq!(ct, "application/problem+json");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["status"], status.as_u16());
    for k in ["type", "title", "detail"] {
        assert!(v[k].is_string(), "problem lacks {k}: {v}");
    }
    v
}

#[tokio::test]
async fn golden_book_through_backfill_and_calculate() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.pool).await;
    let tok = admin();

    let r = post(
        &app,
        "/api/v1/portfolio/golden-1/nav-history/backfill",
        &tok,
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    let b: Value = r.json().await.unwrap();
    assert_eq!(b["from"], "2024-01-02");
    assert_eq!(b["to"], "2024-01-14", "default range ends yesterday");
    assert_eq!(b["days_written"], 13);
    assert_eq!(b["transactions_replayed"], 5);
    assert_eq!(b["status"]["state"], "ok");

    let r = post(
        &app,
        "/api/v1/portfolio/golden-1/nav-history/calculate",
        &tok,
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    let c: Value = r.json().await.unwrap();
    let today = golden()["expected_records"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(c["point"]["date"], "2024-01-15");
    assert_eq!(c["point"]["net_value"], today["net_value"]);
    assert_eq!(c["point"]["profit"], today["profit"]);

    let (s, v) = get_json(&app, "/api/v1/portfolio/golden-1/nav-history", &tok).await;
    assert_eq!(s, 200);
    assert_eq!(v["as_of"], "2024-01-15");
    assert_eq!(v["status"]["state"], "ok");
    assert_golden_points(v["points"].as_array().unwrap());
    // `calculate` answers with the record it folded; it is the one stored,
    // digit for digit.
    assert_eq!(&c["point"], v["points"].as_array().unwrap().last().unwrap());

    for case in golden()["expected_statistics"].as_array().unwrap() {
        let q = &case["query"];
        let mut path = format!(
            "/api/v1/portfolio/{GOLDEN}/nav-history?calendar={}&risk_free={}",
            q["calendar"].as_str().unwrap(),
            q["risk_free"]
        );
        for k in ["from", "to"] {
            if let Some(d) = q[k].as_str() {
                path.push_str(&format!("&{k}={d}"));
            }
        }
        let (s, v) = get_json(&app, &path, &tok).await;
        assert_eq!(s, 200, "{path}");
        assert_stats(&v["statistics"], &case["statistics"]);
    }
}

#[tokio::test]
async fn refresh_worker_builds_the_same_history_as_calculate() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.pool).await;
    navd::projection::worker::refresh_all(&app.pool, app.clock)
        .await
        .unwrap();
    let by_worker = history_table(&app.pool).await;
    let (s, v) = get_json(&app, "/api/v1/portfolio/golden-1/nav-history", &admin()).await;
    assert_eq!(s, 200);
    assert_golden_points(v["points"].as_array().unwrap());

    let r = post(
        &app,
        "/api/v1/portfolio/golden-1/nav-history/calculate",
        &admin(),
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(history_table(&app.pool).await, by_worker);
}

#[tokio::test]
async fn late_events_recompute_to_the_full_fold() {
    // Deliver the golden book in two halves, the second one "late": trades
    // dated in the past and a price correction, with the history already
    // computed in between.
    let app = spawn_app(jwt_auth(), golden_today()).await;
    let g = golden();
    let txs = g["transactions"].as_array().unwrap();
    let prices = g["prices"].as_array().unwrap();
    let wrong_close = json!({"symbol": "A", "date": "2024-01-09", "close": "90"});
    ingest(
        &app.pool,
        &[txs[0].clone(), txs[1].clone()],
        &[prices.clone(), vec![wrong_close]].concat(),
    )
    .await;
    navd::projection::worker::refresh_all(&app.pool, app.clock)
        .await
        .unwrap();
    let (_, v) = get_json(&app, "/api/v1/portfolio/golden-1/nav-history", &admin()).await;
    assert_eq!(v["points"].as_array().unwrap().len(), 14);

    // Correct the price (same symbol/day again) and add the other trades.
    let a_0109 = prices
        .iter()
        .find(|p| p["symbol"] == "A" && p["date"] == "2024-01-09")
        .unwrap();
    let report = ingest(&app.pool, &txs[2..], std::slice::from_ref(a_0109)).await;
    assert_eq!(report.affected, vec!["golden-1".to_string()]);
    let (_, v) = get_json(&app, "/api/v1/portfolio/golden-1/nav-history", &admin()).await;
    assert_eq!(v["status"]["state"], "recomputing");
    assert_eq!(v["status"]["since"], "2024-01-08");

    navd::projection::worker::refresh_all(&app.pool, app.clock)
        .await
        .unwrap();
    let (_, v) = get_json(&app, "/api/v1/portfolio/golden-1/nav-history", &admin()).await;
    assert_eq!(v["status"]["state"], "ok");
    assert_golden_points(v["points"].as_array().unwrap());
    let incremental = history_table(&app.pool).await;
    post(
        &app,
        "/api/v1/portfolio/golden-1/nav-history/calculate",
        &admin(),
        None,
    )
    .await;
    assert_eq!(
        history_table(&app.pool).await,
        incremental,
        "equals a full rebuild"
    );
}

#[tokio::test]
async fn backfill_twice_leaves_an_identical_table() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.pool).await;
    let tok = admin();
    let path = "/api/v1/portfolio/golden-1/nav-history/backfill";
    assert_eq!(post(&app, path, &tok, None).await.status(), 200);
    let first = history_table(&app.pool).await;
    assert_eq!(first.len(), 13);
    assert_eq!(post(&app, path, &tok, None).await.status(), 200);
    assert_eq!(history_table(&app.pool).await, first);

    // A sub-range replaces only its own days.
    let r = post(
        &app,
        path,
        &tok,
        Some(json!({"from": "2024-01-05", "to": "2024-01-06"})),
    )
    .await;
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["days_written"], 2);
    assert_eq!(history_table(&app.pool).await, first);
}

/// The row version (`xmin`) of every stored record: it changes exactly when
/// the row is written again.
async fn row_versions(pool: &sqlx::PgPool) -> std::collections::BTreeMap<(String, String), String> {
    sqlx::query_as::<_, (String, String, String)>(
        "SELECT portfolio_id, day::text, xmin::text FROM portfolio_nav_history",
    )
    .fetch_all(pool)
    .await
    .unwrap()
    .into_iter()
    .map(|(p, d, x)| ((p, d), x))
    .collect()
}

/// The `portfolios` row of `id` as stored: its version and the transaction
/// that wrote it.
async fn portfolio_row_version(pool: &sqlx::PgPool, id: &str) -> (i64, String) {
    sqlx::query_as("SELECT version, xmin::text FROM portfolios WHERE portfolio_id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// A refold writes only the records whose values change: a `calculate` or a
/// `backfill` of an unchanged log rewrites none, a corrected close rewrites
/// the days it moves and none before, a refold that ends earlier deletes
/// the days past its end; the table always equals a full rebuild.
#[tokio::test]
async fn a_refold_writes_only_the_records_that_change() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.pool).await;
    let calc = "/api/v1/portfolio/golden-1/nav-history/calculate";
    let backfill = "/api/v1/portfolio/golden-1/nav-history/backfill";
    assert_eq!(post(&app, calc, &admin(), None).await.status(), 200);
    let table = history_table(&app.pool).await;
    let versions = row_versions(&app.pool).await;
    assert_eq!(versions.len(), 14);

    for op in [calc, backfill, calc] {
        assert_eq!(post(&app, op, &admin(), None).await.status(), 200);
        assert_eq!(history_table(&app.pool).await, table, "{op}");
        assert_eq!(row_versions(&app.pool).await, versions, "{op} rewrote rows");
    }
    // A `calculate` that changes nothing leaves the portfolio's row as it
    // is: no write, and the read caches' version stands.
    let row = portfolio_row_version(&app.pool, "golden-1").await;
    assert_eq!(post(&app, calc, &admin(), None).await.status(), 200);
    assert_eq!(portfolio_row_version(&app.pool, "golden-1").await, row);
    // Unless the state to resume from is not the one the refold ends
    // with: lost, or the same values at other scales. It is written again.
    let state = |pool: sqlx::PgPool| async move {
        sqlx::query_scalar::<_, Option<String>>(
            "SELECT base_state::text FROM portfolios WHERE portfolio_id = 'golden-1'",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    let kept = state(app.pool.clone()).await;
    assert!(
        kept.as_deref().is_some_and(|s| s.contains("positions")),
        "{kept:?}"
    );
    let mut rescaled: Value = serde_json::from_str(kept.as_deref().unwrap()).unwrap();
    let qty = &mut rescaled["positions"]["A"]["qty"];
    let q = qty.as_str().expect("the state holds A").to_string();
    *qty = json!(if q.contains('.') {
        format!("{q}0")
    } else {
        format!("{q}.0")
    });
    let rescaled = rescaled.to_string();
    for changed in [None, Some(rescaled)] {
        sqlx::query("UPDATE portfolios SET base_state = $1::jsonb WHERE portfolio_id = 'golden-1'")
            .bind(&changed)
            .execute(&app.pool)
            .await
            .unwrap();
        let before = portfolio_row_version(&app.pool, "golden-1").await;
        assert_eq!(post(&app, calc, &admin(), None).await.status(), 200);
        assert_ne!(
            portfolio_row_version(&app.pool, "golden-1").await,
            before,
            "{changed:?}"
        );
        assert_eq!(state(app.pool.clone()).await, kept, "{changed:?}");
    }
    // A record deleted behind navd's back is written again by `calculate`
    // (the stored count differs from the refold's, so the digest is not
    // trusted), and the row moves with it (the read caches must not serve
    // the missing day). So are records added behind its back deleted.
    let delete_day =
        "DELETE FROM portfolio_nav_history WHERE portfolio_id = 'golden-1' AND day = '2024-01-09'";
    let add_day = "INSERT INTO portfolio_nav_history (portfolio_id, day, cost, net_flow, daily_return, nav_exact,
                   market_value_exact, cum_in, cum_out)
            SELECT portfolio_id, '2030-01-01', cost, net_flow, daily_return, nav_exact, market_value_exact,
                   cum_in, cum_out
              FROM portfolio_nav_history WHERE portfolio_id = 'golden-1' AND day = '2024-01-09'";
    for behind_its_back in [delete_day, add_day] {
        sqlx::query(behind_its_back)
            .execute(&app.pool)
            .await
            .unwrap();
        assert_ne!(history_table(&app.pool).await, table, "{behind_its_back}");
        let before = portfolio_row_version(&app.pool, "golden-1").await;
        assert_eq!(post(&app, calc, &admin(), None).await.status(), 200);
        assert_ne!(
            portfolio_row_version(&app.pool, "golden-1").await,
            before,
            "{behind_its_back}"
        );
        assert_eq!(history_table(&app.pool).await, table, "{behind_its_back}");
    }
    // A record edited in place behind navd's back is one `calculate` does
    // not see: it trusts the digest of what navd wrote and reads nothing.
    // A `backfill` reads and compares every record of its range, repairs
    // it, and moves the row.
    sqlx::query("UPDATE portfolio_nav_history SET cost = cost + 1 WHERE portfolio_id = 'golden-1' AND day = '2024-01-09'")
        .execute(&app.pool)
        .await
        .unwrap();
    let edited = history_table(&app.pool).await;
    assert_ne!(edited, table);
    let before = portfolio_row_version(&app.pool, "golden-1").await;
    assert_eq!(post(&app, calc, &admin(), None).await.status(), 200);
    assert_eq!(portfolio_row_version(&app.pool, "golden-1").await, before);
    assert_eq!(history_table(&app.pool).await, edited);
    assert_eq!(post(&app, backfill, &admin(), None).await.status(), 200);
    assert_ne!(portfolio_row_version(&app.pool, "golden-1").await, before);
    assert_eq!(history_table(&app.pool).await, table);
    // The backfill moved the digest by what it read, the edited record
    // included: the next `calculate` finds it does not match, reads once,
    // and sets it from the refold; the one after is quiet again.
    assert_eq!(post(&app, calc, &admin(), None).await.status(), 200);
    assert_eq!(history_table(&app.pool).await, table);
    let row = portfolio_row_version(&app.pool, "golden-1").await;
    assert_eq!(post(&app, calc, &admin(), None).await.status(), 200);
    assert_eq!(portfolio_row_version(&app.pool, "golden-1").await, row);

    // A corrected close of A on 2024-01-09 moves that day and the ones
    // that carry it forward, and nothing before.
    let g = golden();
    let close = g["prices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["symbol"] == "A" && p["date"] == "2024-01-09")
        .unwrap();
    let old: f64 = close["close"].as_str().unwrap().parse().unwrap();
    let corrected = json!({"symbol": "A", "date": "2024-01-09", "close": format!("{}", old + 7.0)});
    ingest(&app.pool, &[], &[corrected]).await;
    navd::projection::worker::refresh_all(&app.pool, app.clock)
        .await
        .unwrap();
    let after = row_versions(&app.pool).await;
    let moved = history_table(&app.pool).await;
    for ((id, d), x) in &versions {
        let rewritten = after.get(&(id.clone(), d.clone())) != Some(x);
        let value_changed = table
            .iter()
            .zip(&moved)
            .any(|(a, b)| a.1.to_string() == *d && a != b);
        assert_eq!(rewritten, value_changed, "{d}: rewritten {rewritten}");
        if d.as_str() < "2024-01-09" {
            assert!(!rewritten, "{d} is before the corrected close");
        }
    }
    assert!(after.iter().any(|(k, x)| versions.get(k) != Some(x)));
    // The worker moved the digest by the days it rewrote; a refold that
    // reads every record and sums them from scratch finds the same one.
    let digest = |pool: sqlx::PgPool| async move {
        sqlx::query_scalar::<_, Option<Vec<u8>>>(
            "SELECT history_digest FROM portfolios WHERE portfolio_id = 'golden-1'",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    let moved_by_worker = digest(app.pool.clone()).await;
    assert_eq!(moved_by_worker.as_ref().map(Vec::len), Some(16));
    sqlx::query("UPDATE portfolios SET history_digest = NULL WHERE portfolio_id = 'golden-1'")
        .execute(&app.pool)
        .await
        .unwrap();
    assert_eq!(post(&app, calc, &admin(), None).await.status(), 200);
    assert_eq!(
        history_table(&app.pool).await,
        moved,
        "equals a full rebuild"
    );
    assert_eq!(digest(app.pool.clone()).await, moved_by_worker);

    // A corrected close refolded by `calculate` alone: the same number of
    // records, other values. Their sum no longer matches the digest, so
    // the records are read and the changed ones written; a backfill, which
    // always reads and compares, then finds nothing left to write.
    let corrected = json!({"symbol": "A", "date": "2024-01-10", "close": format!("{}", old + 3.0)});
    ingest(&app.pool, &[], &[corrected]).await;
    let versions_before = row_versions(&app.pool).await;
    assert_eq!(post(&app, calc, &admin(), None).await.status(), 200);
    let recalculated = history_table(&app.pool).await;
    assert_eq!(recalculated.len(), moved.len());
    assert_ne!(recalculated, moved, "calculate missed the corrected close");
    assert_ne!(digest(app.pool.clone()).await, moved_by_worker);
    let versions_after = row_versions(&app.pool).await;
    assert_eq!(post(&app, backfill, &admin(), None).await.status(), 200);
    assert_eq!(history_table(&app.pool).await, recalculated);
    assert_eq!(row_versions(&app.pool).await, versions_after);
    assert_ne!(versions_after, versions_before);
    let moved = recalculated;

    // A backfill that ends before the last day leaves the days after it.
    let r = post(&app, backfill, &admin(), Some(json!({"to": "2024-01-06"}))).await;
    assert_eq!(r.status(), 200);
    assert_eq!(history_table(&app.pool).await, moved);

    // A late oversell stops the fold: the days from it on are deleted.
    let oversell = json!({"event_id": "10000000-0000-4000-8000-0000000000ff", "type": "sell",
        "portfolio_id": "golden-1", "symbol": "A", "quantity": "1000000", "price": "1",
        "trade_date": "2024-01-10"});
    ingest(&app.pool, &[oversell], &[]).await;
    navd::projection::worker::refresh_all(&app.pool, app.clock)
        .await
        .unwrap();
    let kept: Vec<_> = moved
        .iter()
        .filter(|r| r.1 < common::day("2024-01-10"))
        .cloned()
        .collect();
    assert!(kept.len() < moved.len());
    assert_eq!(history_table(&app.pool).await, kept);
}

/// The bytes navd compares stored records by (`storage::history::pg_numeric`)
/// are exactly what PostgreSQL sends for the decimals the driver wrote:
/// every magnitude, scale and sign a record can hold, zeros included.
#[tokio::test]
async fn numeric_bytes_match_what_postgresql_sends() {
    use rust_decimal::Decimal;
    let (pool, _) = fresh_db().await;
    let mut values: Vec<Decimal> = Vec::new();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for scale in 0..=28u32 {
        for _ in 0..40 {
            // xorshift: mantissas of every length up to 96 bits.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let bits = (x % 96) as u32 + 1;
            let m = ((u128::from(x) << 64 | u128::from(x.rotate_left(17))) >> (128 - bits)) as i128;
            let m = if x % 3 == 0 { -m } else { m };
            values.push(Decimal::from_i128_with_scale(m, scale));
        }
        values.push(Decimal::new(0, scale));
        values.push(Decimal::from_i128_with_scale(
            10i128.pow(scale.min(27)),
            scale,
        ));
    }
    let sent: Vec<Vec<u8>> = sqlx::query_scalar(
        "SELECT numeric_send(v) FROM UNNEST($1::numeric[]) WITH ORDINALITY AS u(v, n) ORDER BY n",
    )
    .bind(&values)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(sent.len(), values.len());
    for (v, s) in values.iter().zip(&sent) {
        let mut ours = Vec::new();
        navd::storage::history::pg_numeric(v, &mut ours);
        assert_eq!(&ours, s, "{v} (scale {})", v.scale());
    }
    // And back: the history reads decode the bytes themselves; they give
    // what the driver gives for the same column, value and scale, for the
    // values above and for numerics PostgreSQL computed (trailing zero
    // digits stripped, scales it chose, results no decimal holds).
    let rows = sqlx::query(
        "SELECT x, numeric_send(x) FROM UNNEST($1::numeric[]) AS u(v),
                LATERAL (VALUES (v), (v * 10000), (round(v, 2)), (trunc(v)), (v / 3), (v * v)) AS c(x)",
    )
    .bind(&values)
    .fetch_all(&pool)
    .await
    .unwrap();
    use sqlx::Row as _;
    let mut unrepresentable = 0;
    for r in &rows {
        let bytes: Vec<u8> = r.get(1);
        let ours = navd::storage::history::decode_numeric(&bytes);
        // The driver panics (an overflowing multiplication) on some values
        // no decimal holds, where it could answer an error: both count as
        // "no decimal".
        let driver = std::panic::catch_unwind(|| r.try_get::<Decimal, _>(0).ok())
            .ok()
            .flatten();
        match driver {
            Some(d) => {
                let ours = ours.unwrap_or_else(|e| panic!("{d}: {e}"));
                assert_eq!((ours, ours.scale()), (d, d.scale()), "{bytes:?}");
            }
            None => {
                assert!(ours.is_err(), "{ours:?} where the driver fails");
                unrepresentable += 1;
            }
        }
    }
    assert!(
        unrepresentable > 0 && unrepresentable < rows.len() / 2,
        "{unrepresentable}"
    );
}

/// Rows navd writes in the binary `COPY` format (how a consumer batch stores
/// its events) are stored exactly as the driver's bound parameters would
/// store them, for every column type the event rows use: texts of any
/// characters, uuids, integers at their limits, dates and instants on both
/// sides of 2000 and at PostgreSQL's limits, decimals of every scale and
/// sign (the scale is kept), and NULL in each. A value PostgreSQL refuses
/// is refused through either path.
/// One row of the `COPY` test's table: an id and a nullable value of each type.
type CopyRow = (
    i32,
    Option<String>,
    Option<uuid::Uuid>,
    Option<i64>,
    Option<i32>,
    Option<chrono::NaiveDate>,
    Option<chrono::DateTime<chrono::Utc>>,
    Option<rust_decimal::Decimal>,
);

#[tokio::test]
async fn copy_rows_are_stored_as_bound_parameters_are() {
    use chrono::{DateTime, NaiveDate, Utc};
    use navd::storage::copy::{copy_in, BinaryRows};
    use rust_decimal::Decimal;
    let (pool, _) = fresh_db().await;
    let mut conn = pool.acquire().await.unwrap();
    for t in ["via_copy", "via_bind"] {
        sqlx::query(&format!(
            "CREATE TEMP TABLE {t} (n int4, a text, b uuid, c int8, d int4, e date,
                                   f timestamptz, g numeric)"
        ))
        .execute(&mut *conn)
        .await
        .unwrap();
    }
    let texts = [
        "",
        "a",
        "ÿ",
        "日本語 ✓",
        "tab\there",
        "line\nbreak",
        "\u{1b}[31m",
        "\u{7f}\u{80}",
        "'quote\" \\back",
        "\u{10ffff}",
    ];
    let day = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).unwrap();
    let dates = [
        day(2000, 1, 1),
        day(1999, 12, 31),
        day(1970, 1, 1),
        day(2026, 11, 23),
        day(-4712, 1, 1),
        NaiveDate::MAX,
        day(1, 1, 1),
        day(2400, 2, 29),
    ];
    let instant = |d: NaiveDate, us: u32| -> DateTime<Utc> {
        d.and_hms_micro_opt(23, 59, 59, us).unwrap().and_utc()
    };
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut rows: Vec<CopyRow> = Vec::new();
    for n in 0..600i32 {
        let r = next();
        let bits = (r % 96) as u32 + 1;
        let m = ((u128::from(r) << 64 | u128::from(r.rotate_left(17))) >> (128 - bits)) as i128;
        let m = if r % 3 == 0 { -m } else { m };
        let decimal = match n % 7 {
            0 => Decimal::new(0, (r % 29) as u32),
            1 => Decimal::MAX,
            2 => Decimal::MIN,
            _ => Decimal::from_i128_with_scale(m, (r % 29) as u32),
        };
        let d = dates[n as usize % dates.len()];
        let null = (n % 11) as usize;
        rows.push((
            n,
            (null != 1).then(|| texts[n as usize % texts.len()].to_string()),
            (null != 2).then(|| uuid::Uuid::from_u64_pair(r, next())),
            (null != 3).then_some([i64::MIN, i64::MAX, 0, -1, r as i64][n as usize % 5]),
            (null != 4).then_some([i32::MIN, i32::MAX, 0, -1, r as i32][n as usize % 5]),
            (null != 5).then_some(d),
            (null != 6).then(|| instant(d, (r % 1_000_000) as u32)),
            (null != 7).then_some(decimal),
        ));
    }
    let mut copy = BinaryRows::new(8);
    for (n, a, b, c, d, e, f, g) in &rows {
        let row = copy.row();
        row.int4(*n).opt_text(a.as_deref());
        match b {
            Some(b) => row.uuid(*b),
            None => row.null(),
        };
        match c {
            Some(c) => row.int8(*c),
            None => row.null(),
        };
        match d {
            Some(d) => row.int4(*d),
            None => row.null(),
        };
        row.opt_date(*e)
            .opt_timestamptz(*f)
            .unwrap()
            .opt_numeric(g.as_ref());
    }
    let stored = copy_in(
        &mut conn,
        "COPY via_copy (n, a, b, c, d, e, f, g) FROM STDIN (FORMAT binary)",
        copy,
    )
    .await
    .unwrap();
    assert_eq!(stored, rows.len() as u64);
    sqlx::query(
        "INSERT INTO via_bind SELECT * FROM UNNEST($1::int4[], $2::text[], $3::uuid[], $4::int8[],
                                                   $5::int4[], $6::date[], $7::timestamptz[], $8::numeric[])",
    )
    .bind(rows.iter().map(|r| r.0).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.2).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.3).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.4).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.5).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.6).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.7).collect::<Vec<_>>())
    .execute(&mut *conn)
    .await
    .unwrap();
    // Row texts (numerics keep their scale in text) and numeric bytes.
    let differing: Vec<(i32, String, String)> = sqlx::query_as(
        "SELECT n, x::text, y::text FROM via_copy x FULL JOIN via_bind y USING (n)
          WHERE x::text IS DISTINCT FROM y::text
             OR numeric_send(x.g) IS DISTINCT FROM numeric_send(y.g)
          ORDER BY 1 LIMIT 5",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    assert!(differing.is_empty(), "{differing:?}");
    // Before PostgreSQL's first day: refused either way, and the
    // connection stays usable after the refused copy.
    let ancient = day(-5000, 1, 1);
    let mut copy = BinaryRows::new(8);
    let row = copy.row();
    row.int4(0).null().null().null().null().date(ancient);
    row.null().null();
    let refused = copy_in(
        &mut conn,
        "COPY via_copy (n, a, b, c, d, e, f, g) FROM STDIN (FORMAT binary)",
        copy,
    )
    .await
    .unwrap_err();
    assert!(refused.to_string().contains("out of range"), "{refused}");
    let bound = sqlx::query("INSERT INTO via_bind (n, e) VALUES (0, $1::date)")
        .bind(ancient)
        .execute(&mut *conn)
        .await
        .unwrap_err();
    assert!(bound.to_string().contains("out of range"), "{bound}");
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM via_copy")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(count, rows.len() as i64);
}

#[tokio::test]
async fn oversell_makes_the_history_inconsistent_until_fixed() {
    let app = spawn_app(jwt_auth(), common::day("2024-01-10")).await;
    let buy = json!({"event_id": "10000000-0000-4000-8000-000000000001", "type": "buy",
        "portfolio_id": "p-over", "symbol": "X", "quantity": "5", "price": "10", "trade_date": "2024-01-02"});
    let oversell = json!({"event_id": "10000000-0000-4000-8000-000000000002", "type": "sell",
        "portfolio_id": "p-over", "symbol": "X", "quantity": "8", "price": "11", "trade_date": "2024-01-05"});
    ingest(&app.pool, &[buy, oversell], &[]).await;
    navd::projection::worker::refresh_all(&app.pool, app.clock)
        .await
        .unwrap();

    let (s, v) = get_json(&app, "/api/v1/portfolio/p-over/nav-history", &admin()).await;
    assert_eq!(s, 200);
    assert_eq!(v["status"]["state"], "inconsistent");
    assert_eq!(v["status"]["since"], "2024-01-05");
    assert_eq!(
        v["status"]["event_id"],
        "10000000-0000-4000-8000-000000000002"
    );
    assert_eq!(
        v["points"].as_array().unwrap().len(),
        3,
        "records stop the day before"
    );

    for op in ["backfill", "calculate"] {
        let r = post(
            &app,
            &format!("/api/v1/portfolio/p-over/nav-history/{op}"),
            &admin(),
            None,
        )
        .await;
        let p = problem(r, StatusCode::CONFLICT).await;
        assert!(p["detail"]
            .as_str()
            .unwrap()
            .contains("10000000-0000-4000-8000-000000000002"));
    }

    // A late buy before the sell makes the log consistent again.
    let late = json!({"event_id": "10000000-0000-4000-8000-000000000003", "type": "buy",
        "portfolio_id": "p-over", "symbol": "X", "quantity": "3", "price": "10", "trade_date": "2024-01-03"});
    ingest(&app.pool, &[late], &[]).await;
    navd::projection::worker::refresh_all(&app.pool, app.clock)
        .await
        .unwrap();
    let (_, v) = get_json(&app, "/api/v1/portfolio/p-over/nav-history", &admin()).await;
    assert_eq!(v["status"]["state"], "ok");
    assert_eq!(v["points"].as_array().unwrap().len(), 9);
    assert_eq!(v["points"][8]["market_value"], "0.00000000");
}

#[tokio::test]
async fn every_client_error_is_problem_json() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.pool).await;
    let tok = admin();
    let base = "/api/v1/portfolio/golden-1/nav-history";
    let get = |p: String| {
        let c = app.client.clone();
        let url = app.url(&p);
        let tok = tok.clone();
        async move { c.get(url).bearer_auth(tok).send().await.unwrap() }
    };
    // 400s
    for q in [
        "?from=2024-13-01",
        "?from=20240101",
        "?from=2024-01-10&to=2024-01-02",
        "?calendar=weekly",
        "?risk_free=1.5",
        "?risk_free=abc",
        "?form=2024-01-01",
        "?from=2024-01-01&from=2024-01-02",
    ] {
        problem(get(format!("{base}{q}")).await, StatusCode::BAD_REQUEST).await;
    }
    problem(
        get("/api/v1/portfolio/-bad/nav-history".into()).await,
        StatusCode::BAD_REQUEST,
    )
    .await;
    problem(
        get(format!("/api/v1/portfolio/{}/nav-history", "x".repeat(65))).await,
        StatusCode::BAD_REQUEST,
    )
    .await;
    let r = post(
        &app,
        &format!("{base}/backfill"),
        &tok,
        Some(json!({"from": "2024-01-09", "to": "2024-01-03"})),
    )
    .await;
    problem(r, StatusCode::BAD_REQUEST).await;
    let r = post(
        &app,
        &format!("{base}/backfill"),
        &tok,
        Some(json!({"since": "2024-01-09"})),
    )
    .await;
    problem(r, StatusCode::BAD_REQUEST).await;
    let r = app
        .client
        .post(app.url(&format!("{base}/backfill")))
        .bearer_auth(&tok)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::BAD_REQUEST).await;
    // 404: unknown portfolio, unknown route
    problem(
        get("/api/v1/portfolio/nobody/nav-history".into()).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    problem(
        get("/api/v1/nothing-here".into()).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    let r = post(
        &app,
        "/api/v1/portfolio/nobody/nav-history/backfill",
        &tok,
        None,
    )
    .await;
    problem(r, StatusCode::NOT_FOUND).await;
    // 413 / 415
    let big = format!(
        "{{\"from\": \"2024-01-02\", \"pad\": \"{}\"}}",
        "x".repeat(70 * 1024)
    );
    let r = app
        .client
        .post(app.url(&format!("{base}/backfill")))
        .bearer_auth(&tok)
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::PAYLOAD_TOO_LARGE).await;
    let r = app
        .client
        .post(app.url(&format!("{base}/backfill")))
        .bearer_auth(&tok)
        .header("content-type", "text/plain")
        .body("from=2024-01-02")
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::UNSUPPORTED_MEDIA_TYPE).await;
    // 405 is problem+json too
    let r = app
        .client
        .delete(app.url(base))
        .bearer_auth(&tok)
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::METHOD_NOT_ALLOWED).await;
}

#[tokio::test]
async fn authentication_and_authorization() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.pool).await;
    let base = "/api/v1/portfolio/golden-1/nav-history";

    // 401: none, expired, wrong signature, wrong scheme, garbage
    let r = app.client.get(app.url(base)).send().await.unwrap();
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    problem(r, StatusCode::UNAUTHORIZED).await;
    for bad in [
        token_with(SECRET, "nav:read", &["*"], -3600),
        token_with(
            "another-secret-another-secret-0000",
            "nav:read",
            &["*"],
            600,
        ),
        "not.a.jwt".to_string(),
    ] {
        let r = app
            .client
            .get(app.url(base))
            .bearer_auth(bad)
            .send()
            .await
            .unwrap();
        problem(r, StatusCode::UNAUTHORIZED).await;
    }
    let r = app
        .client
        .get(app.url(base))
        .header("authorization", "Basic dXNlcjpwdw==")
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::UNAUTHORIZED).await;

    // 403: read scope on writes, write scope on admin
    let reader = token("nav:read", &["golden-1"]);
    let (s, _) = get_json(&app, base, &reader).await;
    assert_eq!(s, 200);
    for op in ["backfill", "calculate"] {
        problem(
            post(&app, &format!("{base}/{op}"), &reader, None).await,
            StatusCode::FORBIDDEN,
        )
        .await;
    }
    let writer = token("nav:read nav:write", &["*"]);
    let r = app
        .client
        .get(app.url("/api/v1/admin/dead-letters"))
        .bearer_auth(&writer)
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::FORBIDDEN).await;

    // 404 for a portfolio outside the token's list, on all three, nothing written
    let other = token("nav:read nav:write", &["p-other"]);
    // Both with one request id: a problem body echoes it (`request_id`), and
    // beside it the two answers must be identical.
    let r = app
        .client
        .get(app.url(base))
        .bearer_auth(&other)
        .header("x-request-id", "same-id")
        .send()
        .await
        .unwrap();
    let hidden = problem(r, StatusCode::NOT_FOUND).await;
    let r = app
        .client
        .get(app.url("/api/v1/portfolio/nobody/nav-history"))
        .bearer_auth(&other)
        .header("x-request-id", "same-id")
        .send()
        .await
        .unwrap();
    let unknown = problem(r, StatusCode::NOT_FOUND).await;
    assert_eq!(
        hidden, unknown,
        "hidden and unknown portfolios look the same"
    );
    for op in ["backfill", "calculate"] {
        problem(
            post(&app, &format!("{base}/{op}"), &other, None).await,
            StatusCode::NOT_FOUND,
        )
        .await;
    }
    assert!(history_table(&app.pool).await.is_empty(), "nothing written");

    // nav:admin sees every portfolio and the operator endpoints
    let op = token("nav:admin", &[]);
    let (s, _) = get_json(&app, base, &op).await;
    assert_eq!(s, 200);
    let (s, v) = get_json(&app, "/api/v1/admin/dead-letters", &op).await;
    assert_eq!(s, 200);
    assert_eq!(v["dead_letters"], json!([]));
    assert_eq!(v["next"], Value::Null);
}

#[tokio::test]
async fn database_down_is_503_with_retry_after() {
    // A pool pointed at a port where nothing listens.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let pool =
        navd::storage::connect_lazy(&format!("postgres://postgres@127.0.0.1:{port}/x"), 1).unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let state = navd::http::AppState {
        changes: navd::storage::changes::changes_for(&pool),
        guards: Default::default(),
        pool,
        clock: Clock::fixed(golden_today()),
        auth: navd::http::Authenticator::new(&jwt_auth()).unwrap(),
        health: Default::default(),
        wake: Default::default(),
        cache: std::sync::Arc::new(navd::http::cache::ReadCache::new(16 << 20)),
    };
    let (addr, _) = navd::app::start_http(
        state,
        "127.0.0.1:0".parse().unwrap(),
        std::time::Duration::from_secs(10),
        stop.clone(),
    )
    .await
    .unwrap();
    let started = std::time::Instant::now();
    let r = reqwest::Client::new()
        .get(format!(
            "http://{addr}/api/v1/portfolio/golden-1/nav-history"
        ))
        .bearer_auth(admin())
        .send()
        .await
        .unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(8),
        "no hang"
    );
    assert_eq!(r.headers()["retry-after"], "5");
    let p = problem(r, StatusCode::SERVICE_UNAVAILABLE).await;
    assert!(
        !p["detail"].as_str().unwrap().contains("127.0.0.1"),
        "no internals: {p}"
    );
    let r = reqwest::Client::new()
        .get(format!("http://{addr}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    stop.cancel();
}

#[tokio::test]
async fn dead_letters_page_through_with_a_cursor() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    let mut tx = app.pool.begin().await.unwrap();
    let dead: Vec<_> = (0..5)
        .map(|i| navd::storage::DeadLetter {
            source: navd::storage::Source {
                topic: "nav.transactions".into(),
                partition: 1,
                offset: i,
                key: Some(b"p-1".to_vec()),
                payload: if i == 4 {
                    vec![0xff, 0xfe]
                } else {
                    format!("bad {i}").into_bytes()
                },
            },
            reason: format!("reason {i}"),
        })
        .collect();
    navd::storage::insert_dead_letters(&mut tx, &dead)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let op = token("nav:admin", &[]);
    let (s, v) = get_json(&app, "/api/v1/admin/dead-letters?limit=3", &op).await;
    assert_eq!(s, 200);
    let page = v["dead_letters"].as_array().unwrap();
    assert_eq!(page.len(), 3);
    assert_eq!(page[0]["payload"], "bad 0");
    assert_eq!(page[0]["reason"], "reason 0");
    let next = v["next"].as_str().unwrap();
    let (_, v) = get_json(
        &app,
        &format!("/api/v1/admin/dead-letters?limit=3&after={next}"),
        &op,
    )
    .await;
    let page = v["dead_letters"].as_array().unwrap();
    assert_eq!(page.len(), 2);
    assert_eq!(page[1]["payload"], "//4=");
    assert_eq!(page[1]["payload_encoding"], "base64");
    assert_eq!(v["next"], Value::Null);
    let (s, _) = get_json(&app, "/api/v1/admin/dead-letters?limit=5000", &op).await;
    assert_eq!(s, 400);
}

#[tokio::test]
async fn metrics_expose_request_latency_per_route_and_status() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.pool).await;
    let (s, _) = get_json(&app, "/api/v1/portfolio/golden-1/nav-history", &admin()).await;
    assert_eq!(s, 200);
    let (s, _) = get_json(&app, "/api/v1/portfolio/nobody/nav-history", &admin()).await;
    assert_eq!(s, 404);
    let r = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let text = r.text().await.unwrap();
    for needle in [
        "navd_http_request_duration_seconds_bucket{",
        "route=\"/api/v1/portfolio/{id}/nav-history\"",
        "status=\"200\"",
        "status=\"404\"",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
    assert!(!text.contains("golden-1"), "ids never become labels");
}

#[tokio::test]
async fn operator_replay_rebuilds_every_portfolio() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.pool).await;
    navd::projection::worker::refresh_all(&app.pool, app.clock)
        .await
        .unwrap();
    let before = history_table(&app.pool).await;
    // Scramble the stored projection; the replay must restore it.
    sqlx::query("UPDATE portfolio_nav_history SET nav_exact = 0")
        .execute(&app.pool)
        .await
        .unwrap();

    let r = post(&app, "/api/v1/admin/replay", &admin(), None).await;
    problem(r, StatusCode::FORBIDDEN).await;
    let r = post(&app, "/api/v1/admin/replay", &token("nav:admin", &[]), None).await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["portfolios"], 1);
    let (_, v) = get_json(&app, "/api/v1/portfolio/golden-1/nav-history", &admin()).await;
    assert_eq!(v["status"]["state"], "recomputing");
    assert_eq!(v["status"]["since"], "2024-01-02");

    navd::projection::worker::refresh_all(&app.pool, app.clock)
        .await
        .unwrap();
    assert_eq!(history_table(&app.pool).await, before);
}

#[tokio::test]
async fn cached_curve_revalidates_compresses_and_never_goes_stale() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.pool).await;
    navd::projection::worker::refresh_all(&app.pool, app.clock)
        .await
        .unwrap();
    let url = app.url("/api/v1/portfolio/golden-1/nav-history");
    let first = app
        .client
        .get(&url)
        .bearer_auth(admin())
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let etag = first.headers()["etag"].to_str().unwrap().to_string();
    let body: Value = first.json().await.unwrap();

    // Same version: 304 on revalidation, gzip when asked for.
    let r = app
        .client
        .get(&url)
        .bearer_auth(admin())
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
    let r = app
        .client
        .get(&url)
        .bearer_auth(admin())
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-encoding"], "gzip");
    let raw = r.bytes().await.unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&raw[..]), &mut text).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), body);

    // A write of the projection changes the answer at once.
    let late = json!({"event_id": "30000000-0000-4000-8000-000000000001", "type": "buy",
        "portfolio_id": "golden-1", "symbol": "B", "quantity": "1", "price": "55", "trade_date": "2024-01-12"});
    ingest(&app.pool, &[late], &[]).await;
    let r = app
        .client
        .get(&url)
        .bearer_auth(admin())
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "pending status is news");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["status"]["state"], "recomputing");
    navd::projection::worker::refresh_all(&app.pool, app.clock)
        .await
        .unwrap();
    let (_, v) = get_json(&app, "/api/v1/portfolio/golden-1/nav-history", &admin()).await;
    assert_eq!(v["status"]["state"], "ok");
    assert_ne!(
        v["points"][13]["market_value"],
        body["points"][13]["market_value"]
    );
}

/// A cached read costs no database round trip while the change
/// notifications say nothing changed: with `portfolios` locked exclusively
/// (any query of it would wait), cached reads are answered at once. A
/// change committed by another process reaches the cache through its
/// notification alone: once the listener has applied it, the next read is
/// fresh. While nobody listens, reads validate against the database.
#[tokio::test]
async fn cached_reads_skip_the_database_until_a_change_is_notified() {
    let (pool, _) = fresh_db().await;
    ingest_golden(&pool).await;
    navd::projection::worker::refresh_all(&pool, Clock::fixed(golden_today()))
        .await
        .unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let changes = navd::storage::changes::changes_for(&pool);
    let state = navd::http::AppState {
        changes: changes.clone(),
        guards: Default::default(),
        pool: pool.clone(),
        clock: Clock::fixed(golden_today()),
        auth: navd::http::Authenticator::new(&jwt_auth()).unwrap(),
        health: Default::default(),
        wake: Default::default(),
        // Trusted on the notifications alone for the whole test: only they
        // can make a read fresh here.
        cache: std::sync::Arc::new(navd::http::cache::ReadCache::trusting_for(
            16 << 20,
            std::time::Duration::from_secs(3600),
        )),
    };
    let (addr, _) = navd::app::start_http(
        state,
        "127.0.0.1:0".parse().unwrap(),
        std::time::Duration::from_secs(30),
        stop.clone(),
    )
    .await
    .unwrap();
    let url = format!("http://{addr}/api/v1/portfolio/golden-1/nav-history");
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(3))
        .build()
        .unwrap();
    let get = || client.get(&url).bearer_auth(admin()).send();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !changes.is_listening() {
        assert!(
            std::time::Instant::now() < deadline,
            "the listener never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let first: Value = get().await.unwrap().json().await.unwrap();
    assert_eq!(first["status"]["state"], "ok");

    let mut locker = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE portfolios IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *locker)
        .await
        .unwrap();
    for _ in 0..20 {
        let r = get()
            .await
            .expect("answered without waiting for the locked table");
        assert_eq!(r.status(), 200);
        assert_eq!(r.json::<Value>().await.unwrap(), first);
    }
    // A read the cache cannot answer does wait: the lock is real.
    let other = client
        .get(format!("{url}?from=2024-01-03"))
        .bearer_auth(admin())
        .send()
        .await;
    assert!(other.unwrap_err().is_timeout(), "an uncached read waits");
    locker.rollback().await.unwrap();

    // Another process stores a late trade: only its notification can tell.
    let before = changes.seen("golden-1", false);
    let late = json!({"event_id": "30000000-0000-4000-8000-000000000002", "type": "buy",
        "portfolio_id": "golden-1", "symbol": "B", "quantity": "1", "price": "55", "trade_date": "2024-01-12"});
    ingest_elsewhere(&pool, &[late], &[]).await;
    while changes.seen("golden-1", false) == before {
        assert!(
            std::time::Instant::now() < deadline + std::time::Duration::from_secs(10),
            "no notification"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let v: Value = get().await.unwrap().json().await.unwrap();
    assert_eq!(
        v["status"]["state"], "recomputing",
        "fresh after the notification"
    );

    // Not listening: the read goes to the database again (and waits).
    stop.cancel();
    while changes.is_listening() {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(changes.seen("golden-1", false), None);
}

#[tokio::test]
async fn rs256_tokens_with_issuer_and_audience() {
    let public = include_bytes!("../fixtures/jwt/test-rs256-public.pem").to_vec();
    let private = include_bytes!("../fixtures/jwt/test-rs256-private.pem");
    let auth = navd::config::AuthConfig::Jwt(navd::config::JwtConfig {
        key: navd::config::JwtKey::Rs256(public),
        issuer: Some("https://issuer.test".into()),
        audience: Some("navd".into()),
    });
    let app = spawn_app(auth, golden_today()).await;
    ingest_golden(&app.pool).await;
    let sign = |iss: &str, aud: &str| {
        let claims = json!({"scope": "nav:read", "portfolios": ["golden-1"], "iss": iss, "aud": aud,
            "exp": chrono::Utc::now().timestamp() + 600});
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
            &claims,
            &jsonwebtoken::EncodingKey::from_rsa_pem(private).unwrap(),
        )
        .unwrap()
    };
    let base = "/api/v1/portfolio/golden-1/nav-history";
    let (s, _) = get_json(&app, base, &sign("https://issuer.test", "navd")).await;
    assert_eq!(s, 200);
    for bad in [
        sign("https://other.test", "navd"),
        sign("https://issuer.test", "someone-else"),
        // an HS256 token must not pass where RS256 is configured
        token("nav:read", &["*"]),
    ] {
        let r = app
            .client
            .get(app.url(base))
            .bearer_auth(bad)
            .send()
            .await
            .unwrap();
        problem(r, StatusCode::UNAUTHORIZED).await;
    }
}

#[tokio::test]
async fn a_late_trade_before_the_first_day_moves_the_first_day() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    let g = golden();
    let txs = g["transactions"].as_array().unwrap();
    // Everything but the first buy; B's buy on 2024-01-04 becomes D0.
    ingest(&app.pool, &txs[1..], g["prices"].as_array().unwrap()).await;
    navd::projection::worker::refresh_all(&app.pool, app.clock)
        .await
        .unwrap();
    let (_, v) = get_json(&app, "/api/v1/portfolio/golden-1/nav-history", &admin()).await;
    assert_eq!(v["points"][0]["date"], "2024-01-04");
    assert_eq!(
        v["status"]["state"], "inconsistent",
        "sells A it does not hold yet"
    );

    ingest(&app.pool, &txs[..1], &[]).await;
    navd::projection::worker::refresh_all(&app.pool, app.clock)
        .await
        .unwrap();
    let (_, v) = get_json(&app, "/api/v1/portfolio/golden-1/nav-history", &admin()).await;
    assert_eq!(v["status"]["state"], "ok");
    assert_golden_points(v["points"].as_array().unwrap());
}

/// The body of a response in its `Content-Encoding`, decoded.
fn decoded(encoding: Option<&str>, body: &[u8]) -> Value {
    let mut plain = Vec::new();
    match encoding {
        None => plain.extend_from_slice(body),
        Some("gzip") => {
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(body), &mut plain)
                .unwrap();
        }
        Some("br") => brotli::BrotliDecompress(&mut &body[..], &mut plain).unwrap(),
        Some(other) => panic!("unexpected coding {other}"),
    }
    serde_json::from_slice(&plain).expect("JSON once decoded")
}

#[tokio::test]
async fn codings_follow_the_clients_preference_and_brotli_never_delays_an_answer() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.pool).await;
    navd::projection::worker::refresh_all(&app.pool, app.clock)
        .await
        .unwrap();
    let get = |path: &'static str, accept: Option<&'static str>| {
        let app = &app;
        async move {
            let mut req = app.client.get(app.url(path)).bearer_auth(admin());
            if let Some(a) = accept {
                req = req.header("accept-encoding", a);
            }
            let r = req.send().await.unwrap();
            assert_eq!(r.status(), 200, "{accept:?}");
            assert_eq!(r.headers()["vary"], "accept-encoding");
            let enc = r
                .headers()
                .get("content-encoding")
                .map(|v| v.to_str().unwrap().to_string());
            let body = r.bytes().await.unwrap();
            (enc, body)
        }
    };
    let path = "/api/v1/portfolio/golden-1/nav-history";
    let (enc, body) = get(path, None).await;
    assert_eq!(enc, None);
    let plain = decoded(None, &body);
    assert_golden_points(plain["points"].as_array().unwrap());

    // A browser's header on an entry with no brotli copy yet: gzip at
    // once, brotli once it is made.
    let browser = Some("gzip, deflate, br, zstd");
    let (enc, body) = get(path, browser).await;
    assert_eq!(enc.as_deref(), Some("gzip"), "brotli is not waited for");
    assert_eq!(decoded(enc.as_deref(), &body), plain);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (enc, body) = get(path, browser).await;
        if enc.as_deref() == Some("br") {
            assert_eq!(decoded(enc.as_deref(), &body), plain);
            break;
        }
        assert_eq!(enc.as_deref(), Some("gzip"));
        assert!(
            std::time::Instant::now() < deadline,
            "no brotli copy after 10 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    // Every copy made now: each client gets what it prefers.
    for (accept, want) in [
        (Some("gzip"), Some("gzip")),
        (Some("x-gzip"), Some("gzip")),
        (Some("gzip;q=0"), None),
        (Some("gzip;q=0, *"), Some("br")),
        (Some("*"), Some("br")),
        (Some("*;q=0"), None),
        (Some("identity;q=1, gzip;q=0.5, br;q=0.9"), None),
        (Some("br;q=0.5, gzip"), Some("gzip")),
        (Some("br, gzip;q=0.8, identity;q=0.1"), Some("br")),
        (Some("br"), Some("br")),
        (Some("deflate"), None),
        (Some("gzip;q=2"), None),
    ] {
        let (enc, body) = get(path, accept).await;
        assert_eq!(enc.as_deref(), want, "{accept:?}");
        assert_eq!(decoded(enc.as_deref(), &body), plain, "{accept:?}");
    }

    // A miss whose client takes brotli alone waits for it; one taking
    // gzip gets gzip on the miss itself. (Another range: other entries.)
    for (path, accept, want) in [
        (
            "/api/v1/portfolio/golden-1/nav-history?from=2024-01-03",
            "br, identity;q=0",
            "br",
        ),
        (
            "/api/v1/portfolio/golden-1/nav-history?from=2024-01-04",
            "gzip",
            "gzip",
        ),
    ] {
        let (enc, body) = get(path, Some(accept)).await;
        assert_eq!(enc.as_deref(), Some(want), "{path} {accept}");
        let v = decoded(enc.as_deref(), &body);
        assert!(!v["points"].as_array().unwrap().is_empty());
        assert_eq!(
            v["points"][0]["date"].as_str().unwrap(),
            &path[path.len() - 10..]
        );
    }
}

#[tokio::test]
async fn bodies_must_be_json_objects() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.pool).await;
    for op in ["backfill", "calculate"] {
        for body in [
            r#"["2024-01-02", "2024-01-05"]"#,
            "[]",
            "null",
            "\"2024-01-02\"",
            "7",
            "true",
        ] {
            let r = app
                .client
                .post(app.url(&format!("/api/v1/portfolio/golden-1/nav-history/{op}")))
                .bearer_auth(admin())
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            let p = problem(r, StatusCode::BAD_REQUEST).await;
            assert!(
                p["detail"].as_str().unwrap().contains("JSON object"),
                "{op} {body}: {p}"
            );
        }
    }
    assert!(history_table(&app.pool).await.is_empty(), "nothing written");
}

#[tokio::test]
async fn a_backfill_with_nothing_in_range_says_so() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.pool).await;
    let path = "/api/v1/portfolio/golden-1/nav-history/backfill";
    assert_eq!(post(&app, path, &admin(), None).await.status(), 200);
    let before = history_table(&app.pool).await;
    // Before the first day (2024-01-02), and after today (2024-01-15).
    for body in [
        json!({"to": "2023-12-31"}),
        json!({"from": "2023-01-01", "to": "2024-01-01"}),
        json!({"from": "2024-02-01"}),
        json!({"from": "2024-03-01", "to": "2024-03-31"}),
    ] {
        let r = post(&app, path, &admin(), Some(body.clone())).await;
        assert_eq!(r.status(), 200, "{body}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["from"], Value::Null, "{body}: {v}");
        assert_eq!(v["to"], Value::Null, "{body}: {v}");
        assert_eq!(v["days_written"], 0, "{body}: {v}");
    }
    assert_eq!(history_table(&app.pool).await, before, "nothing changed");
    // A range that overlaps keeps its clamped ends, in order.
    let r = post(
        &app,
        path,
        &admin(),
        Some(json!({"from": "2023-06-01", "to": "2024-06-01"})),
    )
    .await;
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (v["from"].as_str(), v["to"].as_str()),
        (Some("2024-01-02"), Some("2024-01-15"))
    );
}

/// The portfolio list shows what the token may see, by id, a page at a
/// time, with each portfolio's status, first and last record and NAV; a
/// token limited to some portfolios never sees the others.
#[tokio::test]
async fn portfolio_list_pages_and_hides() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    let g = golden();
    let base_tx = g["transactions"][0].clone();
    let mut txs = vec![];
    for (i, id) in ["pl-a", "pl-b", "pl-c"].iter().enumerate() {
        let mut t = base_tx.clone();
        t["portfolio_id"] = json!(id);
        t["event_id"] = json!(format!("00000000-0000-4000-9300-{i:012}"));
        txs.push(t);
    }
    ingest(&app.pool, &txs, g["prices"].as_array().unwrap()).await;
    let tok = admin();
    for id in ["pl-a", "pl-b", "pl-c"] {
        let r = post(
            &app,
            &format!("/api/v1/portfolio/{id}/nav-history/calculate"),
            &tok,
            None,
        )
        .await;
        assert_eq!(r.status(), 200);
    }

    let (s, v) = get_json(&app, "/api/v1/portfolios?limit=2", &tok).await;
    assert_eq!(s, 200, "{v}");
    let page = v["portfolios"].as_array().unwrap();
    assert_eq!(page.len(), 2);
    assert_eq!(page[0]["portfolio_id"], "pl-a");
    assert_eq!(page[1]["portfolio_id"], "pl-b");
    assert_eq!(v["next"], "pl-b");
    let first = base_tx["trade_date"].as_str().unwrap();
    assert_eq!(page[0]["first_day"], first);
    assert_eq!(page[0]["last_day"], "2024-01-15");
    assert_eq!(page[0]["status"]["state"], "ok");
    let (_, curve) = get_json(&app, "/api/v1/portfolio/pl-a/nav-history", &tok).await;
    let last = curve["points"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(page[0]["net_value"], last["net_value"]);
    let (_, v) = get_json(&app, "/api/v1/portfolios?limit=2&after=pl-b", &tok).await;
    let page = v["portfolios"].as_array().unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0]["portfolio_id"], "pl-c");
    assert!(v["next"].is_null());

    // A token for pl-c alone sees pl-c alone.
    let limited = token("nav:read", &["pl-c"]);
    let (s, v) = get_json(&app, "/api/v1/portfolios", &limited).await;
    assert_eq!(s, 200);
    let ids: Vec<&str> = v["portfolios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["portfolio_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["pl-c"]);
    // Bad paging is a 400; no nav:read is a 403.
    for q in ["limit=0", "limit=1001", "limit=x", "after=%20bad"] {
        let (s, _) = get_json(&app, &format!("/api/v1/portfolios?{q}"), &tok).await;
        assert_eq!(s, 400, "{q}");
    }
    let (s, _) = get_json(&app, "/api/v1/portfolios", &token("nav:write", &["*"])).await;
    assert_eq!(s, 403);
}

/// The curve as CSV: a header, then each point's fields as the JSON has
/// them; hidden portfolios stay 404.
#[tokio::test]
async fn curve_as_csv_matches_the_json() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.pool).await;
    let tok = admin();
    let r = post(
        &app,
        "/api/v1/portfolio/golden-1/nav-history/calculate",
        &tok,
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    let (_, json) = get_json(
        &app,
        "/api/v1/portfolio/golden-1/nav-history?from=2024-01-03",
        &tok,
    )
    .await;
    let r = app
        .client
        .get(app.url("/api/v1/portfolio/golden-1/nav-history.csv?from=2024-01-03"))
        .bearer_auth(&tok)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/csv; charset=utf-8");
    assert!(r.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .contains("golden-1-nav-history.csv"));
    let text = r.text().await.unwrap();
    let lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(header[0], "date");
    let points = json["points"].as_array().unwrap();
    assert_eq!(lines.len(), points.len() + 1);
    for (line, p) in lines[1..].iter().zip(points) {
        for (name, value) in header.iter().zip(line.split(',')) {
            assert_eq!(p[*name], *value, "{name} of {}", p["date"]);
        }
    }
    let hidden = token("nav:read", &["someone-else"]);
    let r = app
        .client
        .get(app.url("/api/v1/portfolio/golden-1/nav-history.csv"))
        .bearer_auth(&hidden)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

/// The index page lists the portfolios the token may see, each linking to
/// its page, and no other.
#[tokio::test]
async fn index_page_lists_what_the_token_may_see() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    let g = golden();
    let mut txs = vec![];
    for (i, id) in ["ix-a", "ix-b"].iter().enumerate() {
        let mut t = g["transactions"][0].clone();
        t["portfolio_id"] = json!(id);
        t["event_id"] = json!(format!("00000000-0000-4000-9400-{i:012}"));
        txs.push(t);
    }
    ingest(&app.pool, &txs, g["prices"].as_array().unwrap()).await;
    for id in ["ix-a", "ix-b"] {
        let r = post(
            &app,
            &format!("/api/v1/portfolio/{id}/nav-history/calculate"),
            &admin(),
            None,
        )
        .await;
        assert_eq!(r.status(), 200);
    }
    let page = |tok: String| {
        let app = &app;
        async move {
            let r = app
                .client
                .get(app.url("/"))
                .bearer_auth(tok)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            assert!(r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html"));
            r.text().await.unwrap()
        }
    };
    let all = page(admin()).await;
    assert!(
        all.contains("<a href=\"/portfolio/ix-a\">ix-a</a>"),
        "{all}"
    );
    assert!(all.contains("<a href=\"/portfolio/ix-b\">ix-b</a>"));
    assert!(all.contains("2024-01-15"));
    let one = page(token("nav:read", &["ix-b"])).await;
    assert!(one.contains("ix-b") && !one.contains("ix-a"), "{one}");
}

/// A benchmark read is cached like any other, and a new close of the
/// benchmark makes the next read fresh (its price version is part of the
/// validator).
#[tokio::test]
async fn a_benchmark_close_refreshes_cached_reads() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.pool).await;
    let bm = |d: &str, c: &str| json!({"symbol": "BMK", "date": d, "close": c});
    ingest(
        &app.pool,
        &[],
        &[bm("2024-01-01", "100"), bm("2024-01-10", "110")],
    )
    .await;
    let tok = admin();
    let r = post(
        &app,
        "/api/v1/portfolio/golden-1/nav-history/calculate",
        &tok,
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    let path = "/api/v1/portfolio/golden-1/nav-history?benchmark=BMK";
    let (s, v) = get_json(&app, path, &tok).await;
    assert_eq!(s, 200, "{v}");
    assert!((v["statistics"]["benchmark_total_return"].as_f64().unwrap() - 0.1).abs() < 1e-12);
    assert_eq!(v["points"][0]["benchmark_index"], "1.000000000000");
    let (_, again) = get_json(&app, path, &tok).await;
    assert_eq!(again, v, "served from the cache, unchanged");
    ingest(&app.pool, &[], &[bm("2024-01-12", "121")]).await;
    let (_, fresh) = get_json(&app, path, &tok).await;
    assert!(
        (fresh["statistics"]["benchmark_total_return"]
            .as_f64()
            .unwrap()
            - 0.21)
            .abs()
            < 1e-12,
        "{}",
        fresh["statistics"]
    );
    // A benchmark quoted in EUR is converted at each day's rate: a rate
    // that arrives later changes the answer, cached or not.
    let eur = |d: &str, c: &str| json!({"symbol": "BME", "date": d, "close": c, "currency": "EUR"});
    ingest(
        &app.pool,
        &[],
        &[eur("2024-01-01", "100"), eur("2024-01-12", "100")],
    )
    .await;
    let rate = |d: &str, r: &str| {
        let v = json!({"from": "EUR", "to": "USD", "date": d, "rate": r});
        (
            projections::parse_fx(v.to_string().as_bytes()).unwrap(),
            navd::storage::Source::direct(0, v.to_string().into_bytes()),
        )
    };
    let store_rates = |rates: Vec<_>| async {
        let mut tx = app.pool.begin().await.unwrap();
        navd::storage::ingest(
            &mut tx,
            navd::storage::IngestBatch {
                rates,
                ..Default::default()
            },
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        // What the consumer does after its commit (other processes learn
        // it from the notification).
        navd::storage::changes::changes_for(&app.pool).prices_changed();
    };
    store_rates(vec![rate("2023-12-01", "1.1")]).await;
    let path_eur = "/api/v1/portfolio/golden-1/nav-history?benchmark=BME";
    let (_, flat) = get_json(&app, path_eur, &tok).await;
    assert!(
        flat["statistics"]["benchmark_total_return"]
            .as_f64()
            .unwrap()
            .abs()
            < 1e-12
    );
    store_rates(vec![rate("2024-01-12", "1.21")]).await;
    let (_, moved) = get_json(&app, path_eur, &tok).await;
    assert!(
        (moved["statistics"]["benchmark_total_return"]
            .as_f64()
            .unwrap()
            - 0.1)
            .abs()
            < 1e-12,
        "a later rate must reach a cached benchmark read: {}",
        moved["statistics"]
    );
    // Without a benchmark: no benchmark fields at all.
    let (_, plain) = get_json(&app, "/api/v1/portfolio/golden-1/nav-history", &tok).await;
    assert!(plain["statistics"].get("beta").is_none());
    assert!(plain["points"][0].get("benchmark_index").is_none());
    let (s, _) = get_json(
        &app,
        "/api/v1/portfolio/golden-1/nav-history?benchmark=a%20b",
        &tok,
    )
    .await;
    assert_eq!(s, 400);
    // The page: the benchmark's rows, or the form with the reason.
    for (q, status, want) in [
        ("?benchmark=BMK", 200, ">Beta<"),
        ("?benchmark=NOPE", 400, "unknown benchmark `NOPE`"),
    ] {
        let r = app
            .client
            .get(app.url(&format!("/portfolio/golden-1{q}")))
            .bearer_auth(&tok)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), status, "{q}");
        let html = r.text().await.unwrap();
        assert!(html.contains(want) && html.contains("<form"), "{q}: {html}");
    }
}

/// A refresh group reads a few portfolios' transactions and records from a
/// day on. Those reads join the group's keys to the whole table by a range;
/// with no statistics yet (right after a catch-up or a purge, until
/// autovacuum's first ANALYZE) PostgreSQL hashed the keys against a
/// sequential scan of the whole table — 180 ms a group in the freshness
/// bench. Each range read of a group must use the index, before the tables
/// are analyzed and after.
#[tokio::test]
async fn group_reads_use_the_index_with_or_without_statistics() {
    use chrono::NaiveDate;
    // Single-node PostgreSQL even when the suite runs on Citus: the check
    // reads the table's scan counters and plans, which on a coordinator
    // describe the empty shell of a distributed table (its shards, and
    // their plans, are on the workers).
    let (pool, _) = fresh_single_db().await;
    let mut conn = pool.acquire().await.unwrap();
    let stmts = [
        "ALTER TABLE transactions SET (autovacuum_enabled = false)",
        "ALTER TABLE portfolio_nav_history SET (autovacuum_enabled = false)",
        "INSERT INTO transactions (portfolio_id, event_id, kind, symbol, quantity, price, fee,
                                   trade_date, fingerprint)
         SELECT 'p-' || p, gen_random_uuid(), 'buy', 'S', 1, 1, 0, DATE '2020-01-01' + d, 'f'
           FROM generate_series(1, 2000) p, generate_series(0, 49) d",
        "INSERT INTO portfolio_nav_history (portfolio_id, day, cost, net_flow, daily_return,
                nav_exact, market_value_exact, cum_in, cum_out)
         SELECT 'p-' || p, DATE '2020-01-01' + d, 1, 0, 0, 1, 1, 1, 0
           FROM generate_series(1, 2000) p, generate_series(0, 49) d",
    ];
    for s in stmts {
        sqlx::query(s).execute(&mut *conn).await.unwrap();
    }
    let last = NaiveDate::from_ymd_opt(2020, 1, 1).unwrap() + chrono::Days::new(49);
    let group: Vec<String> = (1..=32).map(|p| format!("p-{}", p * 61)).collect();
    let mut stored = Vec::new();
    for d in 0..50 {
        let day = NaiveDate::from_ymd_opt(2020, 1, 1).unwrap() + chrono::Days::new(d);
        let at: Vec<(String, NaiveDate)> = group.iter().map(|p| (p.clone(), day)).collect();
        stored.extend(
            navd::storage::history_rows_at(&mut conn, &at)
                .await
                .unwrap(),
        );
    }
    assert_eq!(stored.len(), 32 * 50);
    for analyzed in [false, true] {
        if analyzed {
            sqlx::query("ANALYZE transactions, portfolio_nav_history")
                .execute(&mut *conn)
                .await
                .unwrap();
        }
        let (never,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM pg_class
              WHERE relname IN ('transactions', 'portfolio_nav_history') AND reltuples < 0",
        )
        .fetch_one(&mut *conn)
        .await
        .unwrap();
        assert_eq!(
            never,
            if analyzed { 0 } else { 2 },
            "statistics as intended"
        );
        // The day's fold of a group, and a group folding from D0. Without
        // statistics the planner guesses that 32 portfolios are a sixth of
        // any table: the D0 read may then scan (a planner's
        // guess, bounded by autovacuum's first ANALYZE, and left to it).
        let d0 = NaiveDate::from_ymd_opt(2019, 12, 31).unwrap();
        let froms = if analyzed {
            vec![last.pred_opt().unwrap(), d0]
        } else {
            vec![last.pred_opt().unwrap()]
        };
        for from in froms {
            let mut tx = pool.begin().await.unwrap();
            let wanted: Vec<(String, Option<NaiveDate>)> =
                group.iter().map(|p| (p.clone(), Some(from))).collect();
            let logs = navd::storage::load_transactions_many(&mut tx, &wanted, last)
                .await
                .unwrap();
            let days = (last - from).num_days() as usize;
            assert_eq!(logs.len(), 32);
            assert!(
                logs.values().all(|l| l.len() == days),
                "each log from {from}"
            );
            let after: Vec<navd::storage::Span> = group
                .iter()
                .map(|p| navd::storage::Span {
                    portfolio_id: p.clone(),
                    after: from,
                    digest: None,
                    whole: false,
                })
                .collect();
            // The stored rows again: the read finds each one unchanged and
            // nothing is written.
            let same: Vec<(&str, &navd::storage::HistoryRow)> = stored
                .iter()
                .filter(|(_, r)| r.record.date > from)
                .map(|(p, r)| (p.as_str(), r))
                .collect();
            assert_eq!(same.len(), 32 * days);
            navd::storage::replace_history_many(&mut tx, &after, &same)
                .await
                .unwrap();
            let scans: Vec<(String, i64, i64, i64)> = sqlx::query_as(
                "SELECT relname::text, seq_scan, idx_scan, n_tup_ins + n_tup_upd + n_tup_del
                   FROM pg_stat_xact_user_tables
                  WHERE relname IN ('transactions', 'portfolio_nav_history') ORDER BY relname",
            )
            .fetch_all(&mut *tx)
            .await
            .unwrap();
            assert_eq!(scans.len(), 2);
            for (table, seq, idx, written) in &scans {
                assert_eq!(
                    *seq, 0,
                    "{table} scanned whole (analyzed: {analyzed}, from {from}; {idx} index scans)"
                );
                assert_eq!(*written, 0, "{table}: every stored row was found unchanged");
            }
            tx.rollback().await.unwrap();
        }
    }
}

/// Records new to the history go in by binary `COPY`, records that differ
/// by an upsert: either way a record reads back as written, scale for
/// scale (writing it again is then found unchanged and writes nothing),
/// and a replace writes exactly the difference.
#[tokio::test]
async fn history_records_read_back_as_written_whether_copied_or_upserted() {
    use chrono::NaiveDate;
    use navd::storage::HistoryRow;
    use rust_decimal::Decimal;
    // Single-node PostgreSQL even when the suite runs on Citus: the exact
    // write counts come from `pg_stat_xact_user_tables`, which on a
    // coordinator counts nothing (the rows go to shards on the workers).
    // On Citus, both write paths are checked through the Kafka tests,
    // whose tables are compared with single-node PostgreSQL's.
    let (pool, _) = fresh_single_db().await;
    // Magnitudes, scales and signs a record can hold, trailing zeros kept.
    let tricky = [
        Decimal::ZERO,
        Decimal::new(0, 8),
        Decimal::new(12_3450, 4),
        Decimal::new(-1, 28),
        Decimal::MAX,
        Decimal::MIN,
        Decimal::from_i128_with_scale(-79_228_162_514_264_337_593_543_950_335, 28),
        Decimal::new(10_000, 0),
        Decimal::new(-99_999_999, 2),
        Decimal::new(1, 10),
        Decimal::new(7, 0),
    ];
    // The stored values as they come; the four reported values the table
    // derives from the exact ones (net value, return rate, market value,
    // profit) are what the fold's record gives once rounded, and the fold
    // never stores a record whose derivation overflows.
    let record = |day: u64, salt: usize| {
        let v = |field: usize| tricky[(day as usize * 3 + field * 7 + salt) % tricky.len()];
        let nav = Some(v(7))
            .filter(|n| n.checked_sub(Decimal::ONE).is_some())
            .unwrap_or(Decimal::ONE);
        let value = v(8);
        let (cum_in, cum_out) = Some((v(9), v(10)))
            .filter(|(i, o)| {
                value
                    .checked_add(*o)
                    .and_then(|s| s.checked_sub(*i))
                    .is_some()
            })
            .unwrap_or((Decimal::ZERO, Decimal::ZERO));
        let reported = projections::DailyRecord {
            date: NaiveDate::from_ymd_opt(2021, 3, 1).unwrap() + chrono::Days::new(day),
            market_value: value,
            cost: v(1),
            net_flow: v(2),
            daily_return: v(3),
            net_value: nav,
            return_rate: nav - Decimal::ONE,
            profit: value + cum_out - cum_in,
            cum_in,
            cum_out,
            holdings_value: v(11),
            cash: v(12),
            receivable: v(13),
            income: v(14),
            realized_pnl: v(15),
        }
        .rounded();
        HistoryRow {
            record: projections::DailyRecord {
                cost: v(1),
                net_flow: v(2),
                daily_return: v(3),
                holdings_value: v(11),
                cash: v(12),
                receivable: v(13),
                income: v(14),
                realized_pnl: v(15),
                ..reported
            },
            nav_exact: nav,
            market_value_exact: value,
        }
    };
    let from = NaiveDate::from_ymd_opt(2021, 3, 1).unwrap();
    let to = from + chrono::Days::new(99);
    // Days 0–59 first; then 30–89 with 40–49 changed: 30 deleted, 30 new,
    // 10 updated, 20 unchanged.
    let first: Vec<HistoryRow> = (0..60).map(|d| record(d, 0)).collect();
    let second: Vec<HistoryRow> = (30..90)
        .map(|d| record(d, if (40..50).contains(&d) { 1 } else { 0 }))
        .collect();
    for (rows, want) in [
        (&first, (60, 0, 0)),
        (&first, (0, 0, 0)),
        (&second, (30, 10, 30)),
        (&second, (0, 0, 0)),
    ] {
        // The view also counts earlier transactions of the session whose
        // figures are not yet reported: the difference is this one's.
        const WRITES: &str = "SELECT n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_xact_user_tables
                               WHERE relname = 'portfolio_nav_history'";
        let mut tx = pool.begin().await.unwrap();
        let before: (i64, i64, i64) = sqlx::query_as(WRITES).fetch_one(&mut *tx).await.unwrap();
        navd::storage::replace_history(&mut tx, "p-copy", from, Some(to), rows, None)
            .await
            .unwrap();
        let after: (i64, i64, i64) = sqlx::query_as(WRITES).fetch_one(&mut *tx).await.unwrap();
        assert_eq!(
            (after.0 - before.0, after.1 - before.1, after.2 - before.2),
            want,
            "inserted, updated, deleted"
        );
        tx.commit().await.unwrap();
        let mut conn = pool.acquire().await.unwrap();
        let back = navd::storage::load_history(&mut conn, "p-copy", None, None)
            .await
            .unwrap();
        assert_eq!(&back, rows);
        // Scale for scale, as text: 12.3450 is not 12.345.
        let texts: Vec<String> = sqlx::query_scalar(
            "SELECT concat_ws(' ', cost, net_flow, daily_return, nav_exact, market_value_exact,
                              cum_in, cum_out, holdings_value, cash, receivable, income,
                              realized_pnl)
               FROM portfolio_nav_history WHERE portfolio_id = 'p-copy' ORDER BY day",
        )
        .fetch_all(&mut *conn)
        .await
        .unwrap();
        // What the same decimals read back as when bound as parameters
        // (the upsert's path): PostgreSQL's text of each.
        let mut want_texts = Vec::new();
        for r in rows.iter() {
            let c = &r.record;
            let values = vec![
                c.cost,
                c.net_flow,
                c.daily_return,
                r.nav_exact,
                r.market_value_exact,
                c.cum_in,
                c.cum_out,
                c.holdings_value,
                c.cash,
                c.receivable,
                c.income,
                c.realized_pnl,
            ];
            let text: String = sqlx::query_scalar("SELECT array_to_string($1::numeric[], ' ')")
                .bind(values)
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            want_texts.push(text);
        }
        assert_eq!(texts, want_texts);
    }
}

/// Exact records (as the fold makes them) with values at the edges of what
/// the reported values derived from them must get right: a NAV of 28
/// significant digits, ties at the last reported place (half-even, not half
/// away from zero), negative values and negative values that round to zero,
/// a value of 24 integer digits, and profits whose `V + Σ Out` a decimal
/// must round to fit its 96-bit mantissa (28 to 29 significant digits),
/// where `V − Σ In + Σ Out` gives another number, or does not, where the
/// other order rounds. Return rate and
/// profit are computed with the fold's operations in its order
/// (`projections/src/fold.rs`, the end of a day's step); then the golden
/// book's own records from the fold.
fn edge_records() -> Vec<projections::DailyRecord> {
    use chrono::NaiveDate;
    use rust_decimal::Decimal;
    let d = |s: &str| s.parse::<Decimal>().unwrap();
    // (NAV, V, Σ In, Σ Out)
    let cases = [
        ("1.234567890123456789012345678", "100", "100", "0"),
        ("7.922816251426433759354395033", "1", "0", "0"),
        ("0.0000000000000000000000000001", "1", "0", "0"),
        ("123456789012345678.9012345678", "1", "0", "0"),
        ("1.0000000000005", "1", "0", "0"),
        ("1.0000000000015", "1", "0", "0"),
        ("1.0000000000025", "1", "0", "0"),
        ("0.9999999999995", "1", "0", "0"),
        ("-0.0000000000005", "1", "0", "0"),
        ("-2.0000000000015", "1", "0", "0"),
        ("1", "2.000000005", "0", "0"),
        ("1", "2.000000015", "0", "0"),
        ("1", "-1.000000025", "0", "0"),
        ("1", "-0.000000005", "0", "0"),
        ("1", "10", "20.000000015", "0"),
        ("1", "10", "0.000000005", "9.99999999"),
        ("1", "999999999998000000000001", "0", "0"),
        // V + Σ Out past the mantissa (rounded to 7 places), V − Σ In not.
        (
            "1",
            "12345678901234567890.12345678",
            "800000000000000000000",
            "800000000000000000000",
        ),
        // V + Σ Out exact, V − Σ In past the mantissa.
        (
            "1",
            "-12345678901234567890.12345677",
            "800000000000000000000",
            "800000000000000000000",
        ),
        (
            "1.000000000000000000000000001",
            "79228162514264337593.54395033",
            "0.000000005",
            "0.00000001",
        ),
    ];
    let mut records: Vec<projections::DailyRecord> = cases
        .iter()
        .enumerate()
        .map(|(i, (nav, value, cum_in, cum_out))| {
            let (nav, value, cum_in, cum_out) = (d(nav), d(value), d(cum_in), d(cum_out));
            projections::DailyRecord {
                date: NaiveDate::from_ymd_opt(2022, 1, 1).unwrap() + chrono::Days::new(i as u64),
                market_value: value,
                cost: d("0.000000025"),
                net_flow: d("-0.000000005"),
                daily_return: d("0.0000000000005"),
                net_value: nav,
                return_rate: nav.checked_sub(Decimal::ONE).unwrap(),
                profit: value
                    .checked_add(cum_out)
                    .and_then(|s| s.checked_sub(cum_in))
                    .unwrap(),
                holdings_value: value,
                cash: Decimal::ZERO,
                receivable: Decimal::ZERO,
                income: d("1.000000015"),
                realized_pnl: d("-3.5"),
                cum_in,
                cum_out,
            }
        })
        .collect();
    // The golden book's records, as the fold computes them (NAVs of 28
    // significant digits out of its divisions), after the edges.
    let g = golden();
    let txs: Vec<_> = g["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut t = projections::parse_transaction(v.to_string().as_bytes()).unwrap();
            t.seq = i as i64;
            t
        })
        .collect();
    let prices: Vec<_> = g["prices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| projections::parse_price(v.to_string().as_bytes()).unwrap())
        .collect();
    let today = g["today"].as_str().unwrap().parse().unwrap();
    let folded = projections::fold(&txs, &projections::PriceBook::from_prices(&prices), today)
        .unwrap()
        .records;
    assert!(!folded.is_empty());
    let after = records.last().unwrap().date;
    records.extend(folded.into_iter().filter(|r| r.date > after));
    records
}

/// The fields of a record by name, in declaration order.
fn record_fields(r: &projections::DailyRecord) -> [(&'static str, rust_decimal::Decimal); 14] {
    [
        ("market_value", r.market_value),
        ("cost", r.cost),
        ("net_flow", r.net_flow),
        ("daily_return", r.daily_return),
        ("net_value", r.net_value),
        ("return_rate", r.return_rate),
        ("profit", r.profit),
        ("holdings_value", r.holdings_value),
        ("cash", r.cash),
        ("receivable", r.receivable),
        ("income", r.income),
        ("realized_pnl", r.realized_pnl),
        ("cum_in", r.cum_in),
        ("cum_out", r.cum_out),
    ]
}

/// The table stores the exact values and derives the reported net value,
/// return rate, market value and profit when a record is read: each must be
/// the fold's own reported value, `DailyRecord::rounded()` of the exact
/// record, field by field, whether the record was copied or upserted. A
/// value that rounds to zero reads back as a stored zero did (no sign, scale
/// 0: PostgreSQL has no negative zero), every other one at the scale
/// `rounded()` gives it.
#[tokio::test]
async fn derived_history_values_are_the_folds_own_rounded_ones() {
    use navd::storage::HistoryRow;
    use projections::{round_money, DailyRecord};
    let exact = edge_records();
    // The cases tell the fold's order of the profit's operations from
    // another one's: this test fails if the derivation takes another.
    let other_order = |r: &DailyRecord| {
        r.market_value
            .checked_sub(r.cum_in)
            .and_then(|s| s.checked_add(r.cum_out))
            .map(round_money)
    };
    assert!(
        exact
            .iter()
            .filter(|r| other_order(r) != Some(r.rounded().profit))
            .count()
            >= 2,
        "profits that only the fold's order gets right"
    );
    let (pool, _) = fresh_db().await;
    let from = exact[0].date;
    let to = exact.last().unwrap().date;
    let rows: Vec<HistoryRow> = exact.iter().map(HistoryRow::of).collect();
    // Other values for the same days first: the records then go in by the
    // upsert, and by COPY for the other portfolio.
    let others: Vec<HistoryRow> = exact
        .iter()
        .map(|r| {
            HistoryRow::of(&DailyRecord {
                net_value: r.net_value + rust_decimal::Decimal::ONE,
                cum_in: r.cum_in + rust_decimal::Decimal::ONE,
                ..r.clone()
            })
        })
        .collect();
    let mut tx = pool.begin().await.unwrap();
    navd::storage::replace_history(&mut tx, "p-upserted", from, Some(to), &others, None)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    for pid in ["p-copied", "p-upserted"] {
        let mut tx = pool.begin().await.unwrap();
        navd::storage::replace_history(&mut tx, pid, from, Some(to), &rows, None)
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
    let mut conn = pool.acquire().await.unwrap();
    for pid in ["p-copied", "p-upserted"] {
        let back = navd::storage::load_history(&mut conn, pid, None, None)
            .await
            .unwrap();
        assert_eq!(back.len(), exact.len(), "{pid}");
        for (b, e) in back.iter().zip(&exact) {
            let rounded = e.rounded();
            assert_eq!(b.record.date, rounded.date, "{pid}");
            for ((name, got), (_, want)) in record_fields(&b.record)
                .into_iter()
                .zip(record_fields(&rounded))
            {
                let at = format!("{pid}: {name} of {} (exact {e:?})", e.date);
                assert_eq!(got, want, "{at}");
                if want.is_zero() {
                    assert!(got.scale() == 0 && !got.is_sign_negative(), "{at}: {got:?}");
                } else {
                    assert_eq!(got.scale(), want.scale(), "{at}: {got:?}");
                }
            }
            assert_eq!(b.nav_exact, e.net_value, "{pid}: nav_exact of {}", e.date);
            assert_eq!(
                b.market_value_exact, e.market_value,
                "{pid}: market_value_exact of {}",
                e.date
            );
            assert_eq!(b, &HistoryRow::of(e), "{pid}");
        }
    }
}

/// A database whose history was written under the schema with the reported
/// columns (every migration before 20261126000001) migrates without loss:
/// each record reads back as the old schema read it — the same values, the
/// same reported texts, byte for byte — and the portfolio list's last NAV
/// is the stored one.
#[tokio::test]
async fn history_written_with_the_reported_columns_migrates_without_loss() {
    use navd::query::Point;
    use navd::storage::HistoryRow;
    use rust_decimal::Decimal;
    use sqlx::Row;
    const NEW: i64 = 20261126000001;
    let (pool, _) = empty_single_db().await;
    // The migrations before this one, applied as sqlx does (checksums and
    // all): the full set then applies this one and the later ones.
    let dir = tempfile::tempdir().unwrap();
    for m in navd::storage::MIGRATOR.iter().filter(|m| m.version < NEW) {
        let name = format!("{}_{}.sql", m.version, m.description.replace(' ', "_"));
        std::fs::write(dir.path().join(name), m.sql.as_bytes()).unwrap();
    }
    let old = sqlx::migrate::Migrator::new(dir.path()).await.unwrap();
    assert!(navd::storage::MIGRATOR.iter().any(|m| m.version == NEW));
    old.run(&pool).await.unwrap();

    // Records as the old writer stored them: the rounded record's values
    // and the exact ones, sixteen columns.
    let exact = edge_records();
    let last = exact.last().unwrap().date;
    let mut conn = pool.acquire().await.unwrap();
    for (pid, rows) in [("p-old", &exact[..]), ("p-short", &exact[..3])] {
        for e in rows {
            let r = HistoryRow::of(e);
            let c = &r.record;
            sqlx::query(
                "INSERT INTO portfolio_nav_history (portfolio_id, day, market_value, cost,
                        net_flow, daily_return, net_value, return_rate, profit, nav_exact,
                        market_value_exact, cum_in, cum_out, holdings_value, cash, receivable,
                        income, realized_pnl)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
                         $17, $18)",
            )
            .bind(pid)
            .bind(c.date)
            .bind(c.market_value)
            .bind(c.cost)
            .bind(c.net_flow)
            .bind(c.daily_return)
            .bind(c.net_value)
            .bind(c.return_rate)
            .bind(c.profit)
            .bind(r.nav_exact)
            .bind(r.market_value_exact)
            .bind(c.cum_in)
            .bind(c.cum_out)
            .bind(c.holdings_value)
            .bind(c.cash)
            .bind(c.receivable)
            .bind(c.income)
            .bind(c.realized_pnl)
            .execute(&mut *conn)
            .await
            .unwrap();
        }
        let last = rows.last().unwrap().date;
        sqlx::query(
            "INSERT INTO portfolios (portfolio_id, first_day, last_day) VALUES ($1, $2, $3)",
        )
        .bind(pid)
        .bind(rows[0].date)
        .bind(last)
        .execute(&mut *conn)
        .await
        .unwrap();
    }
    // What the old schema's reads gave: the sixteen columns as the driver
    // decodes them.
    let read_old = |r: sqlx::postgres::PgRow| {
        let v = |i: usize| r.get::<Decimal, _>(i);
        HistoryRow {
            record: projections::DailyRecord {
                date: r.get(0),
                market_value: v(1),
                cost: v(2),
                net_flow: v(3),
                daily_return: v(4),
                net_value: v(5),
                return_rate: v(6),
                profit: v(7),
                cum_in: v(10),
                cum_out: v(11),
                holdings_value: v(12),
                cash: v(13),
                receivable: v(14),
                income: v(15),
                realized_pnl: v(16),
            },
            nav_exact: v(8),
            market_value_exact: v(9),
        }
    };
    let before: Vec<HistoryRow> = sqlx::query(
        "SELECT day, market_value, cost, net_flow, daily_return, net_value, return_rate, profit,
                nav_exact, market_value_exact, cum_in, cum_out, holdings_value, cash, receivable,
                income, realized_pnl
           FROM portfolio_nav_history WHERE portfolio_id = 'p-old' ORDER BY day",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap()
    .into_iter()
    .map(read_old)
    .collect();
    assert_eq!(before.len(), exact.len());
    let navs_before: Vec<(String, Decimal)> = sqlx::query_as(
        "SELECT h.portfolio_id, h.net_value FROM portfolio_nav_history h
           JOIN portfolios p ON p.portfolio_id = h.portfolio_id AND h.day = p.last_day
          ORDER BY 1",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    drop(conn);

    navd::storage::migrate(&pool).await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let columns: Vec<String> = sqlx::query_scalar(
        "SELECT column_name::text FROM information_schema.columns
          WHERE table_name = 'portfolio_nav_history' ORDER BY ordinal_position",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    for gone in ["net_value", "market_value", "return_rate", "profit"] {
        assert!(!columns.iter().any(|c| c == gone), "{gone} in {columns:?}");
    }
    assert_eq!(columns.len(), 2 + 12 + 1, "{columns:?}");
    let after = navd::storage::load_history(&mut conn, "p-old", None, Some(last))
        .await
        .unwrap();
    assert_eq!(after.len(), before.len());
    for (a, b) in after.iter().zip(&before) {
        let at = b.record.date;
        for ((name, got), (_, was)) in record_fields(&a.record)
            .into_iter()
            .zip(record_fields(&b.record))
        {
            assert_eq!(
                (got, got.scale(), got.is_sign_negative()),
                (was, was.scale(), was.is_sign_negative()),
                "{name} of {at}"
            );
        }
        assert_eq!(
            (a.nav_exact, a.market_value_exact),
            (b.nav_exact, b.market_value_exact),
            "{at}"
        );
        assert_eq!(Point::from(a), Point::from(b), "the reported texts of {at}");
    }
    let page = navd::storage::portfolios::portfolios_page(&mut conn, "", 10, None)
        .await
        .unwrap();
    let navs_after: Vec<(String, Decimal)> = page
        .into_iter()
        .map(|(p, _, nav)| (p.portfolio_id, nav.unwrap()))
        .collect();
    assert_eq!(navs_after.len(), navs_before.len());
    for ((p, now), (q, was)) in navs_after.iter().zip(&navs_before) {
        assert_eq!(p, q);
        assert_eq!(
            (projections::ratio_text(*now), now.scale()),
            (projections::ratio_text(*was), was.scale()),
            "{p}"
        );
    }
}

/// The price cache reads a changed series again only from the day its
/// change starts, and answers exactly what the table holds: after a new
/// day's close, a corrected old close, a close quoted in another currency,
/// one batch writing an old and a new day, a split, and two changes between
/// its looks. Each look is compared with an uncached read of the same
/// window, and the rows it read are counted.
#[tokio::test]
async fn a_cached_series_rereads_from_the_changed_day_and_matches_the_table() {
    use navd::storage::price_cache::PriceCache;
    let (pool, _) = fresh_db().await;
    let cache = PriceCache::new(1_000_000);
    let syms = vec!["PCA".to_string(), "PCB".to_string()];
    let start = day("2024-01-01");
    let d = |i: u64| start + chrono::Days::new(i);
    let px =
        |s: &str, i: u64, c: String| json!({"symbol": s, "date": d(i).to_string(), "close": c});
    let mut closes = Vec::new();
    for i in 0..500 {
        closes.push(px("PCA", i, format!("{}.25", 100 + i)));
        closes.push(px("PCB", i, format!("{}.5", 40 + i % 7)));
    }
    ingest(&pool, &[], &closes).await;
    let stored = |s: &'static str, from: u64| {
        let pool = pool.clone();
        async move {
            let n: i64 =
                sqlx::query_scalar("SELECT count(*) FROM prices WHERE symbol = $1 AND day >= $2")
                    .bind(s)
                    .bind(d(from))
                    .fetch_one(&pool)
                    .await
                    .unwrap();
            n as u64
        }
    };
    // One look: every window the check uses answers as an uncached read
    // does; returns the closes the look read from the table.
    let look = || {
        let (pool, cache, syms) = (pool.clone(), &cache, syms.clone());
        async move {
            let mut conn = pool.acquire().await.unwrap();
            let before = cache.closes_loaded();
            for (after, through) in [
                (d(0) - chrono::Days::new(30), d(900)),
                (d(9), d(12)),
                (d(700), d(800)),
            ] {
                let cached = cache.book(&mut conn, &syms, after, through).await.unwrap();
                let direct = PriceCache::new(0)
                    .book(&mut conn, &syms, after, through)
                    .await
                    .unwrap();
                assert_eq!(
                    format!("{cached:?}"),
                    format!("{direct:?}"),
                    "{after}..{through}"
                );
            }
            cache.closes_loaded() - before
        }
    };
    assert_eq!(look().await, 1000, "the first look reads both series");
    assert_eq!(look().await, 0, "nothing changed: nothing read");

    ingest(
        &pool,
        &[],
        &[px("PCA", 500, "700".into()), px("PCB", 500, "41".into())],
    )
    .await;
    assert_eq!(look().await, 2, "a new day's close reads one row a series");

    ingest(&pool, &[], &[px("PCA", 9, "1.5".into())]).await;
    assert_eq!(
        look().await,
        stored("PCA", 9).await,
        "a correction reads from its day"
    );

    let eur = json!({"symbol": "PCB", "date": d(501).to_string(), "close": "9", "currency": "EUR"});
    ingest(&pool, &[], &[eur]).await;
    assert_eq!(look().await, 1, "a quoted close is read with its currency");

    // One batch, an old day and a new one: read from the older.
    ingest(
        &pool,
        &[],
        &[px("PCB", 502, "43".into()), px("PCB", 100, "44".into())],
    )
    .await;
    assert_eq!(look().await, stored("PCB", 100).await);

    // A split changes no close but the series' splits: read whole.
    let split = json!({"event_id": "00000000-0000-4000-9002-000000000001", "type": "split",
        "symbol": "PCA", "ex_date": d(300).to_string(), "numerator": 2, "denominator": 1});
    let raw = serde_json::to_vec(&split).unwrap();
    let mut b = batch_of(&[], &[]);
    b.splits.push((
        projections::parse_split(&raw).unwrap(),
        navd::storage::Source::direct(0, raw),
    ));
    let mut tx = pool.begin().await.unwrap();
    navd::storage::ingest(&mut tx, b).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(look().await, stored("PCA", 0).await, "after a split");

    // Two changes between looks: the cache is two versions behind.
    ingest(&pool, &[], &[px("PCB", 503, "45".into())]).await;
    ingest(&pool, &[], &[px("PCB", 504, "46".into())]).await;
    assert_eq!(look().await, stored("PCB", 0).await, "two versions behind");
    assert_eq!(look().await, 0);
}
