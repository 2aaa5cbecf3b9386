//! The change feed's outbox: a consumer that applies every staged message by
//! the version rule holds exactly what the API serves, after late events,
//! restated closes, a split, backfill, calculate and an operator replay;
//! messages stay under the part limit.

mod common;

use std::collections::BTreeMap;

use common::*;
use navd::feed::replica::Replica;
use serde_json::{json, Value};

fn buy(n: u32, p: &str, sym: &str, q: &str, price: &str, date: &str) -> Value {
    json!({"event_id": format!("71000000-0000-4000-8000-{n:012}"), "type": "buy",
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

/// Every message in the outbox, in (portfolio, version, part) order.
pub async fn outbox(pool: &sqlx::PgPool) -> Vec<(String, i64, i32, i32, String)> {
    sqlx::query_as(
        "SELECT portfolio_id, version, part, parts, message FROM history_outbox
          ORDER BY portfolio_id, version, part",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// What the API serves of `id`: its points by day and its status.
async fn served(app: &TestApp, id: &str) -> (BTreeMap<String, Value>, Value) {
    let r = app
        .client
        .get(app.url(&format!("/api/v1/portfolio/{id}/nav-history?calendar=all")))
        .bearer_auth(token("nav:read", &["*"]))
        .send()
        .await
        .unwrap();
    let body: Value = r.json().await.unwrap();
    let points = body["points"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| (p["date"].as_str().unwrap().to_string(), p.clone()))
                .collect()
        })
        .unwrap_or_default();
    (points, body["status"].clone())
}

/// The replica (fed every outbox message not applied yet, in order)
/// against the API, for every portfolio.
async fn assert_replica_is_api(
    app: &TestApp,
    replica: &mut Replica,
    applied: &mut usize,
    when: &str,
) {
    let rows = outbox(&app.pool).await;
    // Versions of one portfolio in the order they were committed.
    let mut fresh: Vec<_> = rows.iter().collect();
    fresh.sort_by_key(|r| (r.1, r.0.clone(), r.2));
    for r in &fresh {
        assert!(
            r.4.len() < navd::feed::MAX_MESSAGE_BYTES,
            "{when}: a part under the limit"
        );
        let m: Value = serde_json::from_str(&r.4).unwrap();
        assert_eq!(m["version"], json!(r.1));
        assert_eq!(m["part"], json!(r.2));
        assert_eq!(m["parts"], json!(r.3));
        for k in m["cause"]["kinds"].as_array().unwrap() {
            assert!(
                navd::feed::KINDS.contains(&k.as_str().unwrap()),
                "{when}: kind {k}"
            );
        }
        replica.apply_bytes(r.4.as_bytes()).unwrap();
    }
    *applied = rows.len();
    let ids: Vec<String> = sqlx::query_scalar("SELECT portfolio_id FROM portfolios ORDER BY 1")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    for id in ids {
        let (points, status) = served(app, &id).await;
        let held = replica.portfolios.get(&id);
        let held_points: BTreeMap<String, Value> = held
            .map(|h| {
                h.points
                    .iter()
                    .map(|(d, p)| (d.to_string(), serde_json::to_value(p).unwrap()))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(held_points.len(), points.len(), "{when}: {id}'s days");
        assert!(held_points == points, "{when}: {id}'s points differ");
        if let Some(h) = held {
            assert_eq!(h.status["state"], status["state"], "{when}: {id}'s status");
        }
    }
}

#[tokio::test]
async fn a_consumer_of_the_outbox_holds_what_the_api_serves() {
    let today = day("2024-03-15");
    let app = spawn_app(jwt_auth(), today).await;
    let mut replica = Replica::default();
    let mut applied = 0;
    let refresh = || navd::projection::worker::refresh_all(&app.db, app.clock);

    ingest(
        &app.db,
        &[
            buy(1, "p-a", "AAA", "10", "100", "2024-03-01"),
            buy(2, "p-b", "BBB", "5", "20", "2024-03-04"),
        ],
        &[
            close("AAA", "2024-03-05", "101"),
            close("BBB", "2024-03-05", "21"),
        ],
    )
    .await;
    refresh().await.unwrap();
    assert_replica_is_api(&app, &mut replica, &mut applied, "first fold").await;
    let first = outbox(&app.pool).await;
    assert_eq!(first.len(), 2, "one message per portfolio");
    let m: Value = serde_json::from_str(&first[0].4).unwrap();
    assert_eq!(m["first_day"], "2024-03-01");
    assert_eq!(m["last_day"], "2024-03-15");
    assert_eq!(m["changed_from"], "2024-03-01");
    assert_eq!(m["records"].as_array().unwrap().len(), 15);
    assert_eq!(m["cause"]["kinds"], json!(["transaction"]));
    assert_eq!(
        m["cause"]["event_ids"],
        json!(["71000000-0000-4000-8000-000000000001"])
    );
    assert!(
        m["records"][0]["inflow"].is_string(),
        "every field of a point"
    );

    // A late buy, a restated close, an oversell (inconsistent), its cure.
    ingest(
        &app.db,
        &[buy(3, "p-a", "AAA", "1", "99", "2024-03-07")],
        &[],
    )
    .await;
    ingest(
        &app.db,
        &[],
        &[
            close("AAA", "2024-03-05", "103"),
            close("AAA", "2024-03-12", "52"),
        ],
    )
    .await;
    refresh().await.unwrap();
    assert_replica_is_api(&app, &mut replica, &mut applied, "late buy, restated close").await;
    let rows = outbox(&app.pool).await;
    let late: Value =
        serde_json::from_str(&rows.iter().rfind(|r| r.0 == "p-a").unwrap().4).unwrap();
    assert_eq!(
        late["changed_from"], "2024-03-05",
        "from the restated close on"
    );
    assert_eq!(
        late["records"].as_array().unwrap().len(),
        11,
        "03-05 to 03-15"
    );
    assert_eq!(late["cause"]["kinds"], json!(["transaction", "price"]));

    ingest(
        &app.db,
        &[sell(4, "p-b", "BBB", "50", "20", "2024-03-08")],
        &[],
    )
    .await;
    refresh().await.unwrap();
    assert_replica_is_api(&app, &mut replica, &mut applied, "oversell").await;
    ingest(
        &app.db,
        &[buy(5, "p-b", "BBB", "60", "20", "2024-03-06")],
        &[],
    )
    .await;
    refresh().await.unwrap();
    assert_replica_is_api(&app, &mut replica, &mut applied, "cured").await;

    // A split.
    let split = json!({"event_id": "71000000-0000-4000-9002-000000000001", "type": "split",
        "symbol": "AAA", "ex_date": "2024-03-10", "numerator": 2, "denominator": 1});
    let raw = serde_json::to_vec(&split).unwrap();
    let mut b = batch_of(&[], &[]);
    b.splits.push((
        projections::parse_split(&raw).unwrap(),
        navd_storage::Source::direct(0, raw),
    ));
    let mut tx = app.db.begin().await.unwrap();
    navd_storage::ingest(&mut tx, b).await.unwrap();
    tx.commit().await.unwrap();
    refresh().await.unwrap();
    assert_replica_is_api(&app, &mut replica, &mut applied, "split").await;
    let kinds = |rows: &[(String, i64, i32, i32, String)]| -> Vec<Value> {
        let a = rows.iter().rfind(|r| r.0 == "p-a").unwrap();
        let m: Value = serde_json::from_str(&a.4).unwrap();
        m["cause"]["kinds"].as_array().unwrap().clone()
    };
    assert_eq!(kinds(&outbox(&app.pool).await), vec![json!("split")]);

    // Backfill and calculate: by hand, the records are edited behind
    // navd's back first so each operation has something to change.
    let write = token("nav:write", &["*"]);
    sqlx::query("UPDATE portfolio_nav_history SET cost = cost + 1 WHERE portfolio_id = 'p-a' AND day = '2024-03-03'")
        .execute(&app.pool)
        .await
        .unwrap();
    let r = app
        .client
        .post(app.url("/api/v1/portfolio/p-a/nav-history/backfill"))
        .bearer_auth(&write)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(kinds(&outbox(&app.pool).await), vec![json!("backfill")]);
    assert_replica_is_api(&app, &mut replica, &mut applied, "backfill").await;
    sqlx::query("UPDATE portfolio_nav_history SET cost = cost + 1 WHERE portfolio_id = 'p-a' AND day = '2024-03-15'")
        .execute(&app.pool)
        .await
        .unwrap();
    let r = app
        .client
        .post(app.url("/api/v1/portfolio/p-a/nav-history/calculate"))
        .bearer_auth(&write)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(kinds(&outbox(&app.pool).await), vec![json!("calculate")]);
    assert_replica_is_api(&app, &mut replica, &mut applied, "calculate").await;

    // An operator's replay repairs a record edited in place.
    sqlx::query("UPDATE portfolio_nav_history SET cash = cash + 1 WHERE portfolio_id = 'p-b' AND day = '2024-03-09'")
        .execute(&app.pool)
        .await
        .unwrap();
    let r = app
        .client
        .post(app.url("/api/v1/admin/replay"))
        .bearer_auth(token("nav:admin", &["*"]))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "replay: {}", r.status());
    refresh().await.unwrap();
    let rows = outbox(&app.pool).await;
    let m: Value = serde_json::from_str(&rows.iter().rfind(|r| r.0 == "p-b").unwrap().4).unwrap();
    assert_eq!(m["cause"]["kinds"], json!(["replay"]));
    // The repaired day, and the day after it (whose inflow and outflow are
    // differences with it).
    let days: Vec<&str> = m["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["date"].as_str().unwrap())
        .collect();
    assert_eq!(days, ["2024-03-09", "2024-03-10"]);
    assert_replica_is_api(&app, &mut replica, &mut applied, "replay").await;

    // Versions of each portfolio increase.
    let mut last: BTreeMap<String, i64> = BTreeMap::new();
    for r in outbox(&app.pool).await {
        let v = last.entry(r.0.clone()).or_insert(0);
        assert!(r.1 >= *v);
        *v = r.1;
    }
}

/// The relay is woken by this process's commits that staged messages, and
/// by no other: a stored batch or a refold that left the records as they
/// were stages nothing (on Citus every poll of the outbox is a task per
/// shard).
#[tokio::test]
async fn only_a_commit_that_staged_messages_wakes_the_relay() {
    let today = day("2024-03-15");
    let app = spawn_app(jwt_auth(), today).await;
    // Listening starting is an "anything may have changed" of its own.
    while !app.db.changes().is_listening() {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let mut relay = app.db.changes().subscribe();
    relay.mark_unchanged();
    ingest(
        &app.db,
        &[buy(11, "p-w", "AAA", "10", "100", "2024-03-01")],
        &[close("AAA", "2024-03-05", "101")],
    )
    .await;
    assert!(
        !relay.has_changed().unwrap(),
        "a stored batch stages nothing"
    );
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    let staged = outbox(&app.pool).await.len();
    assert_eq!(staged, 1, "the first fold's message");
    assert!(
        relay.has_changed().unwrap(),
        "the first fold staged a message"
    );
    relay.mark_unchanged();

    let (row, _) = navd::projection::calculate(&app.db, "p-w", today)
        .await
        .unwrap();
    assert!(row.is_some());
    assert_eq!(outbox(&app.pool).await.len(), staged, "the same records");
    assert!(
        !relay.has_changed().unwrap(),
        "a refold that changed nothing"
    );

    ingest(&app.db, &[], &[close("AAA", "2024-03-05", "105")]).await;
    let (row, _) = navd::projection::calculate(&app.db, "p-w", today)
        .await
        .unwrap();
    let mv = row.unwrap().market_value_exact;
    assert_eq!(mv, "1050".parse::<rust_decimal::Decimal>().unwrap());
    assert!(outbox(&app.pool).await.len() > staged, "a restated close");
    assert!(
        relay.has_changed().unwrap(),
        "a calculate that staged a message"
    );
}

/// A batch of closes marks every holder with the same causes whether it
/// marks a few portfolios (a `VALUES` list) or more than
/// `VALUES_MARKS` (arrays): one mark each, kinds and event ids alike.
#[tokio::test]
async fn marks_of_many_holders_carry_the_causes_of_few() {
    let (pool, _) = fresh_db().await;
    let db = navd_storage::Db::new(pool.clone());
    let many: Vec<Value> = (0..600)
        .map(|i| {
            buy(
                i,
                &format!("p-many-{i:03}"),
                "MANY",
                "1",
                "10",
                "2024-01-02",
            )
        })
        .collect();
    ingest(&db, &many, &[]).await;
    ingest(
        &db,
        &[buy(900, "p-few", "FEW", "1", "10", "2024-01-02")],
        &[],
    )
    .await;
    sqlx::query("DELETE FROM portfolio_marks")
        .execute(&pool)
        .await
        .unwrap();
    let r = ingest(&db, &[], &[close("MANY", "2024-01-03", "11")]).await;
    assert_eq!(r.affected.len(), 600);
    ingest(&db, &[], &[close("FEW", "2024-01-03", "11")]).await;
    let marks: Vec<(String, String, Vec<String>, Vec<String>)> = sqlx::query_as(
        "SELECT portfolio_id, from_day::text, kinds, event_ids FROM portfolio_marks ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(marks.len(), 601);
    let few = marks.iter().find(|m| m.0 == "p-few").unwrap();
    assert_eq!(few.1, "2024-01-03");
    assert!(!few.2.is_empty(), "a close's mark names its kind");
    for m in &marks {
        assert_eq!((&m.1, &m.2, &m.3), (&few.1, &few.2, &few.3), "{}", m.0);
    }
}
