//! One portfolio's trouble, or one writer in flight, never holds up the
//! rest: values at the edges of the decimal range in several portfolios of
//! one refresh group do not stop the others (the operator endpoints answer
//! 409 problem+json for the failed ones, never 500), and storing a batch
//! does not wait for a refresh that has written and not yet committed.

mod common;

use chrono::NaiveDate as Date;
use common::*;
use serde_json::{json, Value};

const Q: &str = "999999999999";

fn buy(n: u32, p: &str, sym: &str, q: &str, price: &str, date: &str) -> Value {
    json!({"event_id": format!("70000000-0000-4000-8000-{n:012}"), "type": "buy",
           "portfolio_id": p, "symbol": sym, "quantity": q, "price": price, "trade_date": date})
}

fn sell(n: u32, p: &str, sym: &str, q: &str, price: &str, date: &str) -> Value {
    let mut v = buy(n, p, sym, q, price, date);
    v["type"] = json!("sell");
    v
}

fn close(sym: &str, date: &str, c: &str) -> Value {
    json!({"symbol": sym, "date": date, "close": c})
}

/// A curve as a reader allowed to see every portfolio gets it.
async fn curve(app: &TestApp, path: &str) -> Value {
    app.client
        .get(app.url(path))
        .bearer_auth(token("nav:read", &["*"]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overflowing_portfolio_does_not_hold_up_its_group() {
    let app = spawn_app(jwt_auth(), day("2024-01-10")).await;
    let mut txs = Vec::new();
    let mut n = 0;
    let mut next = || {
        n += 1;
        n
    };
    // Two portfolios whose NAV leaps by 10^22 twice (price 1e-10 → 1e12,
    // sold, bought back at the bottom, and up again): beyond the range.
    for p in ["p-over-1", "p-over-2"] {
        let sym = format!("LEAP-{p}");
        txs.push(buy(next(), p, &sym, Q, "0.0000000001", "2024-01-02"));
        txs.push(sell(next(), p, &sym, Q, Q, "2024-01-05"));
        txs.push(buy(next(), p, &sym, Q, "0.0000000001", "2024-01-06"));
    }
    // Largest and smallest accepted numbers, within range.
    txs.push(buy(next(), "p-huge", "HUGE", Q, Q, "2024-01-02"));
    txs.push(buy(
        next(),
        "p-tiny",
        "TINY",
        "0.0000000001",
        "0.0000000001",
        "2024-01-02",
    ));
    // Ordinary portfolios sharing the group.
    for i in 0..20 {
        txs.push(buy(
            next(),
            &format!("p-ok-{i:02}"),
            "OK",
            "3",
            "10",
            "2024-01-03",
        ));
    }
    let mut prices = vec![
        close("OK", "2024-01-04", "11"),
        close("HUGE", "2024-01-04", Q),
    ];
    for p in ["p-over-1", "p-over-2"] {
        let sym = format!("LEAP-{p}");
        for (d, c) in [
            ("2024-01-02", "0.0000000001"),
            ("2024-01-04", Q),
            ("2024-01-06", "0.0000000001"),
            ("2024-01-07", Q),
        ] {
            prices.push(close(&sym, d, c));
        }
    }
    ingest(&app.db, &txs, &prices).await;
    // One pass takes every portfolio in one group.
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();

    type Row = (String, String, Option<Date>, Option<String>, Option<Date>);
    let rows: Vec<Row> =
        sqlx::query_as(
            "SELECT portfolio_id, status, status_since, status_detail, last_day FROM portfolios ORDER BY 1",
        )
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(rows.len(), 24);
    for (id, status, since, detail, last) in &rows {
        if id.starts_with("p-over") {
            assert_eq!(status, "inconsistent", "{id}");
            assert_eq!(*since, Some(day("2024-01-07")), "{id}");
            assert!(
                detail.as_deref().unwrap().contains("overflow"),
                "{id}: {detail:?}"
            );
            assert_eq!(
                *last,
                Some(day("2024-01-06")),
                "{id}: the days before stand"
            );
        } else {
            assert_eq!(status, "ok", "{id}: {detail:?}");
            assert_eq!(*last, Some(day("2024-01-10")), "{id} is up to date");
        }
    }
    let ok = curve(&app, "/api/v1/portfolio/p-ok-07/nav-history").await;
    assert_eq!(ok["points"][1]["market_value"], "33.00000000");
    let huge = curve(&app, "/api/v1/portfolio/p-huge/nav-history").await;
    assert_eq!(
        huge["points"][0]["market_value"],
        "999999999998000000000001.00000000"
    );

    // The failed portfolio answers like an inconsistent one.
    let write = token("nav:write", &["*"]);
    for op in ["calculate", "backfill"] {
        let r = app
            .client
            .post(app.url(&format!("/api/v1/portfolio/p-over-1/nav-history/{op}")))
            .bearer_auth(&write)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 409, "{op}");
        assert_eq!(
            r.headers()["content-type"],
            "application/problem+json",
            "{op}"
        );
        let body: Value = r.json().await.unwrap();
        let detail = body["detail"].as_str().unwrap();
        assert!(
            detail.contains("2024-01-07") && detail.contains("overflow"),
            "{op}: {detail}"
        );
    }
    let get = curve(&app, "/api/v1/portfolio/p-over-2/nav-history").await;
    assert_eq!(get["status"]["state"], "inconsistent");
    assert_eq!(get["status"]["event_id"], Value::Null);
    assert_eq!(get["points"].as_array().unwrap().len(), 5);

    // A correction that takes the cause away repairs it.
    ingest(
        &app.db,
        &[],
        &[close("LEAP-p-over-1", "2024-01-07", "0.0000000002")],
    )
    .await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    let (status, last): (String, Option<chrono::NaiveDate>) =
        sqlx::query_as("SELECT status, last_day FROM portfolios WHERE portfolio_id = 'p-over-1'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(status, "ok");
    assert_eq!(last, Some(day("2024-01-10")));
}

/// A refresh group holds its portfolios' rows from its write until its
/// commit. A batch of events for those portfolios (a trade, a new
/// portfolio beside them, a close of a held symbol) is stored meanwhile,
/// without waiting for that commit, and nothing of it is lost: its marks
/// are refreshed by the next pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_stored_while_a_refresh_of_its_portfolios_is_uncommitted() {
    let today = day("2024-01-10");
    let app = spawn_app(jwt_auth(), today).await;
    ingest(
        &app.db,
        &[
            buy(1, "p-held", "HELD", "10", "5", "2024-01-02"),
            buy(2, "p-other", "HELD", "1", "5", "2024-01-02"),
        ],
        &[close("HELD", "2024-01-03", "6")],
    )
    .await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    // A late trade, then its refresh, left uncommitted after its writes.
    ingest(
        &app.db,
        &[buy(3, "p-held", "HELD", "1", "5", "2024-01-04")],
        &[],
    )
    .await;
    let mut refresh = app.pool.begin().await.unwrap();
    let ids = ["p-held".to_string(), "p-other".to_string()];
    let done = navd::projection::refresh_in(
        &mut refresh,
        app.db.prices(),
        &ids,
        today,
        navd::projection::Lock::Wait,
    )
    .await
    .unwrap();
    assert_eq!(done.len(), 2, "both portfolios refreshed (and so written)");

    let (trades, closes) = (
        [
            buy(4, "p-held", "HELD", "2", "5", "2024-01-05"),
            buy(5, "p-new", "HELD", "1", "5", "2024-01-05"),
        ],
        [close("HELD", "2024-01-08", "7")],
    );
    let batch = ingest(&app.db, &trades, &closes);
    let report = tokio::time::timeout(std::time::Duration::from_secs(10), batch)
        .await
        .expect("the batch is stored while the refresh is uncommitted");
    assert_eq!(report.transactions_stored, 2);
    refresh.commit().await.unwrap();

    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    // Every trade and the new close are in the curves: 13 held from the
    // 5th, valued at 7 from the 8th; p-other's one share at 7 too.
    let held: Vec<(Date, String)> = sqlx::query_as(
        "SELECT day, market_value_exact::text FROM portfolio_nav_history
          WHERE portfolio_id = $1 AND day IN ('2024-01-05', '2024-01-10') ORDER BY day",
    )
    .bind("p-held")
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(
        held,
        vec![
            (day("2024-01-05"), "78".into()),
            (day("2024-01-10"), "91".into())
        ]
    );
    for (p, v) in [("p-other", "7"), ("p-new", "7")] {
        let last: String = sqlx::query_scalar(
            "SELECT market_value_exact::text FROM portfolio_nav_history
              WHERE portfolio_id = $1 AND day = '2024-01-10'",
        )
        .bind(p)
        .fetch_one(&app.pool)
        .await
        .unwrap();
        assert_eq!(last, v, "{p}");
    }
}

/// A `calculate` of a portfolio whose row another writer holds waits for
/// it, and then reads the marks as that writer left them: a mark it
/// committed while `calculate` waited is consumed by the refold, not left
/// pending behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calculate_that_waited_for_the_lock_reads_the_marks_after_it() {
    let today = day("2024-01-10");
    let app = spawn_app(jwt_auth(), today).await;
    ingest(
        &app.db,
        &[buy(1, "p-wait", "W", "10", "5", "2024-01-02")],
        &[close("W", "2024-01-03", "6")],
    )
    .await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    let pending = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM portfolio_marks WHERE portfolio_id = 'p-wait'",
        )
        .fetch_one(&app.pool)
        .await
        .unwrap()
    };
    assert_eq!(pending().await, 0);

    let mut holder = app.pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM portfolios WHERE portfolio_id = 'p-wait' FOR UPDATE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let db = app.db.clone();
    let calc = tokio::spawn(async move { navd::projection::calculate(&db, "p-wait", today).await });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!calc.is_finished(), "calculate waits for the row's lock");
    sqlx::query(
        "INSERT INTO portfolio_marks (portfolio_id, from_day, kinds)
         VALUES ('p-wait', '2024-01-05', ARRAY['transaction'])",
    )
    .execute(&mut *holder)
    .await
    .unwrap();
    holder.commit().await.unwrap();
    let (row, _) = calc.await.unwrap().unwrap();
    assert_eq!(
        row.unwrap().market_value_exact,
        "60".parse::<rust_decimal::Decimal>().unwrap()
    );
    assert_eq!(
        pending().await,
        0,
        "the mark committed during the wait is consumed"
    );
}

/// A refresh that waits for its group's locks waits for every row of the
/// group, and refreshes them all: a row another writer holds is not left
/// out as the worker's `SKIP LOCKED` leaves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_group_refresh_waits_for_each_held_row() {
    let today = day("2024-01-10");
    let app = spawn_app(jwt_auth(), today).await;
    ingest(
        &app.db,
        &[
            buy(1, "p-g1", "G", "10", "5", "2024-01-02"),
            buy(2, "p-g2", "G", "1", "5", "2024-01-02"),
        ],
        &[close("G", "2024-01-03", "6")],
    )
    .await;
    let mut holder = app.pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM portfolios WHERE portfolio_id = 'p-g1' FOR UPDATE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let (pool, prices) = (app.pool.clone(), app.db.clone());
    let refresh = tokio::spawn(async move {
        let mut tx = pool.begin().await.unwrap();
        let ids = ["p-g1".to_string(), "p-g2".to_string()];
        let done = navd::projection::refresh_in(
            &mut tx,
            prices.prices(),
            &ids,
            today,
            navd::projection::Lock::Wait,
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        done.len()
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!refresh.is_finished(), "the refresh waits for p-g1's lock");
    holder.commit().await.unwrap();
    assert_eq!(refresh.await.unwrap(), 2, "both portfolios refreshed");
}
