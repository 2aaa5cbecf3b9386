//! Anchors (older states a refold resumes from): a half-year portfolio
//! refreshed month by month keeps some; late events, an amendment and a
//! restated close then refold from them to exactly the history of the same
//! events folded at once; and a refold really starts from an anchor (one
//! tampered with shows in the records until `calculate` refolds from D0).

use crate::common::*;
use crate::support::*;
use chrono::{Datelike, Days, NaiveDate};
use navd::clock::Clock;
use serde_json::{json, Value};

const SYMBOLS: [&str; 3] = ["A", "B", "C"];

fn id(n: u32) -> String {
    format!("00000000-0000-4000-9400-{n:012}")
}

/// A trade every fourth day from January through June: buys of 10 of A
/// and B in turn, and every third trade a sell of 5 of A or a buy of C.
fn trades() -> Vec<Value> {
    let mut out = Vec::new();
    let mut d = day("2024-01-02");
    let mut n = 0u32;
    while d <= day("2024-06-24") {
        let (ty, q, sym) = match (n % 3, (n / 3) % 2) {
            (2, 0) => ("sell", "5", "A"),
            (2, _) => ("buy", "10", "C"),
            (k, _) => ("buy", "10", SYMBOLS[k as usize]),
        };
        out.push(json!({"event_id": id(n), "type": ty, "portfolio_id": "anc",
            "symbol": sym, "quantity": q, "price": format!("{}", 50 + n % 7),
            "trade_date": d.to_string(), "schema_version": 2}));
        n += 1;
        d = d + Days::new(4);
    }
    out
}

/// A close of every symbol every weekday of the half-year.
fn closes() -> Vec<Value> {
    let mut out = Vec::new();
    let mut d = day("2024-01-01");
    let mut k = 0u32;
    while d <= day("2024-06-28") {
        if d.weekday().number_from_monday() <= 5 {
            for (i, s) in SYMBOLS.iter().enumerate() {
                let c = 50 + (k * 7 + i as u32 * 3) % 11;
                out.push(json!({"symbol": s, "date": d.to_string(), "close": c.to_string()}));
            }
            k += 1;
        }
        d = d + Days::new(1);
    }
    out
}

fn dated_through(v: &[Value], key: &str, last: NaiveDate) -> Vec<Value> {
    v.iter()
        .filter(|x| day(x[key].as_str().unwrap()) <= last)
        .cloned()
        .collect()
}

/// The late events: a buy and a restated close in May, an amendment of an
/// April trade.
fn late() -> (Vec<Value>, Vec<Value>) {
    let amend_of = trades()
        .into_iter()
        .find(|t| t["trade_date"].as_str().unwrap() > "2024-04-10")
        .unwrap();
    let mut amend = amend_of.clone();
    amend["event_id"] = json!(id(9000));
    amend["quantity"] = json!("7");
    amend["corrects"] = amend_of["event_id"].clone();
    amend["revision"] = json!(1);
    let buy = json!({"event_id": id(9001), "type": "buy", "portfolio_id": "anc",
        "symbol": "B", "quantity": "3", "price": "51", "trade_date": "2024-05-20",
        "schema_version": 2});
    let close = json!({"symbol": "C", "date": "2024-05-14", "close": "70"});
    (vec![buy, amend], vec![close])
}

async fn anchors(pool: &sqlx::PgPool) -> Vec<NaiveDate> {
    sqlx::query_scalar("SELECT day FROM portfolio_anchors ORDER BY day")
        .fetch_all(pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refolds_from_anchors_equal_the_fold_of_everything() {
    let today = day("2024-06-28");
    let (all_t, all_c) = (trades(), closes());
    let (late_t, late_c) = late();

    // The reference: every event stored at once, folded once.
    let reference = spawn_app(jwt_auth(), today).await;
    ingest(
        &reference.db,
        &[all_t.clone(), late_t.clone()].concat(),
        &all_c,
    )
    .await;
    ingest(&reference.db, &[], &late_c).await;
    navd::projection::worker::refresh_all(&reference.db, Clock::fixed(today))
        .await
        .unwrap();
    let want = history_table(&reference.pool).await;

    // Month by month, each refresh resuming from the stored state.
    let app = spawn_app(jwt_auth(), today).await;
    let mut done = day("2023-12-31");
    for end in [
        "2024-01-31",
        "2024-02-29",
        "2024-03-31",
        "2024-04-30",
        "2024-05-31",
        "2024-06-28",
    ] {
        let end = day(end);
        let new = |v: &[Value], key: &str| -> Vec<Value> {
            dated_through(v, key, end)
                .into_iter()
                .filter(|x| day(x[key].as_str().unwrap()) > done)
                .collect()
        };
        ingest(&app.db, &new(&all_t, "trade_date"), &new(&all_c, "date")).await;
        navd::projection::worker::refresh_all(&app.db, Clock::fixed(end))
            .await
            .unwrap();
        done = end;
    }
    let kept = anchors(&app.pool).await;
    assert!(kept.len() >= 2, "anchors kept month by month: {kept:?}");
    assert!(
        kept.iter().all(|d| *d >= day("2024-03-01")),
        "about two months deep: {kept:?}"
    );

    // Late events refold from anchors, to the same history.
    ingest(&app.db, &late_t, &[]).await;
    ingest(&app.db, &[], &late_c).await;
    navd::projection::worker::refresh_all(&app.db, Clock::fixed(today))
        .await
        .unwrap();
    assert_eq!(
        history_table(&app.pool).await,
        want,
        "refolded from anchors"
    );
    let after = anchors(&app.pool).await;
    assert!(
        after.iter().all(|d| *d < day("2024-04-11")),
        "anchors after the earliest refolded day are dropped: {after:?}"
    );
    assert!(
        !after.is_empty(),
        "those before it stay: {kept:?} → {after:?}"
    );

    // An anchor is really what a refold starts from: one tampered with
    // shows in the records, until `calculate` refolds from D0.
    sqlx::query(
        "UPDATE portfolio_anchors
            SET state = jsonb_set(state, '{positions,A,qty}', '\"1000\"')",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    let later = json!({"event_id": id(9002), "type": "buy", "portfolio_id": "anc",
        "symbol": "C", "quantity": "1", "price": "50", "trade_date": "2024-06-03",
        "schema_version": 2});
    ingest(&app.db, &[later], &[]).await;
    navd::projection::worker::refresh_all(&app.db, Clock::fixed(today))
        .await
        .unwrap();
    let from_anchor = history_table(&app.pool).await;
    let calc = "/api/v1/portfolio/anc/nav-history/calculate";
    assert_eq!(post(&app, calc, &admin(), None).await.status(), 200);
    assert_ne!(
        history_table(&app.pool).await,
        from_anchor,
        "the refold used the anchor"
    );
    assert!(
        anchors(&app.pool).await.is_empty(),
        "calculate trusts no anchor"
    );
}
