//! Anchors (older states a refold resumes from): a half-year portfolio
//! refreshed month by month keeps some; late events, an amendment and a
//! restated close then refold from them to exactly the history of the same
//! events folded at once; and a refold really starts from an anchor (one
//! tampered with shows in the records until `calculate` refolds from D0).

use crate::common::*;
use crate::support::*;
use chrono::{Datelike, Days, NaiveDate};
use navd::clock::Clock;
use reqwest::StatusCode;
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

/// Sets every anchor's position in A to 1,000 shares.
async fn tamper(pool: &sqlx::PgPool) {
    sqlx::query(
        "UPDATE portfolio_anchors
            SET state = jsonb_set(state, '{positions,A,qty}', '\"1000\"')",
    )
    .execute(pool)
    .await
    .unwrap();
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
    tamper(&app.pool).await;
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

/// Twenty months over two year ends: a trade every ninth day (buys of the
/// three symbols in turn, every fourth a sell of 4 A), a close of each
/// symbol every Friday, a dividend of B with its ex-date before the first
/// year end and paid after it, and a split of C in the second year.
fn two_year_ends() -> (Vec<Value>, Vec<Value>) {
    let mut trades = Vec::new();
    let mut d = day("2023-05-02");
    let mut n = 0u32;
    while d <= day("2024-12-20") {
        let (ty, q, sym) = match n % 4 {
            3 => ("sell", "4", "A"),
            k => ("buy", "10", SYMBOLS[k as usize]),
        };
        trades.push(
            json!({"event_id": id(20_000 + n), "type": ty, "portfolio_id": "yrs",
            "symbol": sym, "quantity": q, "price": format!("{}", 40 + n % 9),
            "trade_date": d.to_string(), "schema_version": 2}),
        );
        n += 1;
        d = d + Days::new(9);
    }
    trades.push(
        json!({"event_id": id(29_000), "type": "dividend", "portfolio_id": "yrs",
        "symbol": "B", "amount": "12.5", "trade_date": "2023-12-20",
        "pay_date": "2024-01-10", "schema_version": 2}),
    );
    let mut closes = Vec::new();
    let mut d = day("2023-05-05");
    let mut k = 0u32;
    while d <= day("2024-12-27") {
        for (i, s) in SYMBOLS.iter().enumerate() {
            let c = 40 + (k * 5 + i as u32 * 7) % 13;
            closes.push(json!({"symbol": s, "date": d.to_string(), "close": c.to_string()}));
        }
        k += 1;
        d = d + Days::new(7);
    }
    (trades, closes)
}

/// Explains of every day in `days` (weekends and year ends included).
async fn explained(app: &TestApp, days: &[NaiveDate]) -> Vec<Value> {
    let mut out = Vec::new();
    for d in days {
        let url = format!("/api/v1/portfolio/yrs/nav-history/{d}/explain");
        let (s, e) = get_json(app, &url, &admin()).await;
        assert_eq!(s, StatusCode::OK, "{d}: {e}");
        out.push(e);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn year_ends_stay_anchors_and_explain_replays_from_them() {
    let today = day("2024-12-31");
    let (trades, closes) = two_year_ends();
    let app = spawn_app(jwt_auth(), today).await;
    // The first half folded from D0, the rest resumed from the stored
    // state: both kinds of refresh keep the year ends they pass.
    let mid = day("2024-06-30");
    let (early_t, late_t): (Vec<Value>, Vec<Value>) = trades
        .into_iter()
        .partition(|t| day(t["trade_date"].as_str().unwrap()) <= mid);
    let (early_c, late_c): (Vec<Value>, Vec<Value>) = closes
        .into_iter()
        .partition(|c| day(c["date"].as_str().unwrap()) <= mid);
    ingest(&app.db, &early_t, &early_c).await;
    navd::projection::worker::refresh_all(&app.db, Clock::fixed(mid))
        .await
        .unwrap();
    let split = json!({"event_id": id(29_001), "type": "split", "symbol": "C",
        "ex_date": "2024-09-02", "numerator": 3, "denominator": 2});
    let raw = serde_json::to_vec(&split).unwrap();
    let mut b = batch_of(&late_t, &late_c);
    b.splits.push((
        projections::parse_split(&raw).unwrap(),
        navd_storage::Source::direct(1_000_000, raw),
    ));
    store_batch(&app.db, b).await;
    navd::projection::worker::refresh_all(&app.db, Clock::fixed(today))
        .await
        .unwrap();
    let kept = anchors(&app.pool).await;
    assert!(
        kept.contains(&day("2023-12-31")) && kept.contains(&day("2024-12-31")),
        "both year ends are anchors: {kept:?}"
    );

    // Explains replayed from the year-end anchors equal those replayed
    // from the first day: every day around the year end, the dividend's
    // pay day among them, and every fifth day of the rest.
    let first = day("2023-05-02");
    let days: Vec<NaiveDate> = first
        .iter_days()
        .take_while(|d| *d <= today)
        .enumerate()
        .filter(|(k, d)| k % 5 == 0 || (*d >= day("2023-12-28") && *d <= day("2024-01-12")))
        .map(|(_, d)| d)
        .collect();
    let with = explained(&app, &days).await;
    sqlx::query("DELETE FROM portfolio_anchors")
        .execute(&app.pool)
        .await
        .unwrap();
    let without = explained(&app, &days).await;
    for ((d, a), b) in days.iter().zip(&with).zip(&without) {
        assert_eq!(a, b, "{d}: explained from an anchor and from the first day");
    }

    // And they really start from the anchor: one tampered with shows.
    let calc = "/api/v1/portfolio/yrs/nav-history/calculate";
    assert_eq!(post(&app, calc, &admin(), None).await.status(), 200);
    assert!(anchors(&app.pool).await.contains(&day("2023-12-31")));
    // A refold of an unchanged log keeps its year ends without writing
    // them again (the rows' versions stay).
    let versions = || async {
        sqlx::query_scalar::<_, String>(
            "SELECT day::text || ':' || xmin::text FROM portfolio_anchors ORDER BY day",
        )
        .fetch_all(&app.pool)
        .await
        .unwrap()
    };
    let before = versions().await;
    assert_eq!(post(&app, calc, &admin(), None).await.status(), 200);
    assert_eq!(
        versions().await,
        before,
        "calculate rewrote unchanged anchors"
    );
    tamper(&app.pool).await;
    let k = days
        .iter()
        .position(|d| *d > day("2024-02-01"))
        .expect("a day after the dividend");
    let tampered = explained(&app, &days[k..=k]).await;
    assert_ne!(
        tampered[0]["valuation"], with[k]["valuation"],
        "the anchor was used"
    );
    // A refold from D0 writes the year ends it passed again where they
    // differ from what it folded (it skips the write only where none do).
    assert_eq!(post(&app, calc, &admin(), None).await.status(), 200);
    let repaired = explained(&app, &days[k..=k]).await;
    assert_eq!(
        repaired[0]["valuation"], with[k]["valuation"],
        "calculate rewrote the tampered anchor"
    );
}
