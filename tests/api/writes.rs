//! Writes and operator actions: backfill, calculate and the refresh worker
//! building the golden book's history, late events and oversells, what a
//! refold rewrites, empty backfill ranges, the admin replay, dead letters
//! and the metrics endpoint.

use crate::common::{self, *};
use crate::support::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

#[tokio::test]
async fn golden_book_through_backfill_and_calculate() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.db).await;
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
    ingest_golden(&app.db).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
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
        &app.db,
        &[txs[0].clone(), txs[1].clone()],
        &[prices.clone(), vec![wrong_close]].concat(),
    )
    .await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    let (_, v) = get_json(&app, "/api/v1/portfolio/golden-1/nav-history", &admin()).await;
    assert_eq!(v["points"].as_array().unwrap().len(), 14);

    // Correct the price (same symbol/day again) and add the other trades.
    let a_0109 = prices
        .iter()
        .find(|p| p["symbol"] == "A" && p["date"] == "2024-01-09")
        .unwrap();
    let report = ingest(&app.db, &txs[2..], std::slice::from_ref(a_0109)).await;
    assert_eq!(report.affected, vec!["golden-1".to_string()]);
    let (_, v) = get_json(&app, "/api/v1/portfolio/golden-1/nav-history", &admin()).await;
    assert_eq!(v["status"]["state"], "recomputing");
    assert_eq!(v["status"]["since"], "2024-01-08");

    navd::projection::worker::refresh_all(&app.db, app.clock)
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
    ingest_golden(&app.db).await;
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
    ingest_golden(&app.db).await;
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
    ingest(&app.db, &[], &[corrected]).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
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
    ingest(&app.db, &[], &[corrected]).await;
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
    ingest(&app.db, &[oversell], &[]).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
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

#[tokio::test]
async fn oversell_makes_the_history_inconsistent_until_fixed() {
    let app = spawn_app(jwt_auth(), common::day("2024-01-10")).await;
    let buy = json!({"event_id": "10000000-0000-4000-8000-000000000001", "type": "buy",
        "portfolio_id": "p-over", "symbol": "X", "quantity": "5", "price": "10", "trade_date": "2024-01-02"});
    let oversell = json!({"event_id": "10000000-0000-4000-8000-000000000002", "type": "sell",
        "portfolio_id": "p-over", "symbol": "X", "quantity": "8", "price": "11", "trade_date": "2024-01-05"});
    ingest(&app.db, &[buy, oversell], &[]).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
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
    ingest(&app.db, &[late], &[]).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    let (_, v) = get_json(&app, "/api/v1/portfolio/p-over/nav-history", &admin()).await;
    assert_eq!(v["status"]["state"], "ok");
    assert_eq!(v["points"].as_array().unwrap().len(), 9);
    assert_eq!(v["points"][8]["market_value"], "0.00000000");
}

#[tokio::test]
async fn dead_letters_page_through_with_a_cursor() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    let mut tx = app.pool.begin().await.unwrap();
    let dead: Vec<_> = (0..5)
        .map(|i| navd_storage::DeadLetter {
            source: navd_storage::Source {
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
    navd_storage::insert_dead_letters(&mut tx, &dead)
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
    ingest_golden(&app.db).await;
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
    ingest_golden(&app.db).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
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

    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    assert_eq!(history_table(&app.pool).await, before);
}

#[tokio::test]
async fn a_late_trade_before_the_first_day_moves_the_first_day() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    let g = golden();
    let txs = g["transactions"].as_array().unwrap();
    // Everything but the first buy; B's buy on 2024-01-04 becomes D0.
    ingest(&app.db, &txs[1..], g["prices"].as_array().unwrap()).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    let (_, v) = get_json(&app, "/api/v1/portfolio/golden-1/nav-history", &admin()).await;
    assert_eq!(v["points"][0]["date"], "2024-01-04");
    assert_eq!(
        v["status"]["state"], "inconsistent",
        "sells A it does not hold yet"
    );

    ingest(&app.db, &txs[..1], &[]).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    let (_, v) = get_json(&app, "/api/v1/portfolio/golden-1/nav-history", &admin()).await;
    assert_eq!(v["status"]["state"], "ok");
    assert_golden_points(v["points"].as_array().unwrap());
}

#[tokio::test]
async fn a_backfill_with_nothing_in_range_says_so() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.db).await;
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

/// `calculate` builds its point from the records its refold made, the day
/// before's included: on D0 (no record before it) and on the day after,
/// the point is the stored curve's last point, digit for digit, its
/// day's flows included.
#[tokio::test]
async fn calculate_points_on_d0_and_the_day_after_match_the_curve() {
    for today in ["2024-01-02", "2024-01-03"] {
        let app = spawn_app(jwt_auth(), day(today)).await;
        ingest_golden(&app.db).await;
        let tok = admin();
        let r = post(
            &app,
            "/api/v1/portfolio/golden-1/nav-history/calculate",
            &tok,
            None,
        )
        .await;
        assert_eq!(r.status(), 200, "{today}");
        let c: Value = r.json().await.unwrap();
        assert_eq!(c["point"]["date"], today);
        let (s, v) = get_json(&app, "/api/v1/portfolio/golden-1/nav-history", &tok).await;
        assert_eq!(s, 200);
        let points = v["points"].as_array().unwrap();
        assert_eq!(points.last().unwrap()["date"], today);
        assert_eq!(&c["point"], points.last().unwrap(), "{today}");
    }
}
