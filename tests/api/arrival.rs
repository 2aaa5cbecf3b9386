//! Corrections in any arrival order: the corrections golden stored in
//! shuffled orders and cut into batches of random sizes ends with the same
//! stored history, statuses, effective logs and dead letters as in the
//! order it is written, whether a correction comes before or after the
//! event it names, in its batch or in an earlier one (among them
//! corrections of another portfolio's event, of a correction and of a
//! settings event, which can only be refused once their target is known).

use std::collections::BTreeSet;

use crate::common::*;
use navd::clock::Clock;
use navd_storage::{DeadLetter, IngestBatch, Source};
use projections::{parse_price, parse_transaction};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::Value;

/// One event of the golden: a transaction or a close, with its place in
/// the golden's lists (its Kafka offset here, unique across batches).
#[derive(Debug, Clone)]
enum Item {
    Tx(i64, Value),
    Close(i64, Value),
}

fn items(g: &Value) -> Vec<Item> {
    let list = |k: &str| g[k].as_array().cloned().unwrap_or_default();
    let mut out: Vec<Item> = Vec::new();
    for (i, v) in list("transactions").into_iter().enumerate() {
        out.push(Item::Tx(i as i64, v));
    }
    for (i, v) in list("prices").into_iter().enumerate() {
        out.push(Item::Close(1000 + i as i64, v));
    }
    out
}

/// A batch as the consumer builds it: what does not parse is a dead letter.
fn batch(items: &[Item], default_currency: &Value) -> IngestBatch {
    let mut b = IngestBatch {
        default_currency: default_currency
            .as_str()
            .map(|c| projections::Currency::parse(c).unwrap()),
        ..IngestBatch::default()
    };
    for it in items {
        match it {
            Item::Tx(off, v) => {
                let raw = serde_json::to_vec(v).unwrap();
                match parse_transaction(&raw) {
                    Ok(t) => b.transactions.push((t, Source::direct(*off, raw))),
                    Err(e) => b.dead_letters.push(DeadLetter {
                        source: Source::direct(*off, raw),
                        reason: e.to_string(),
                    }),
                }
            }
            Item::Close(off, v) => {
                let raw = serde_json::to_vec(v).unwrap();
                b.prices
                    .push((parse_price(&raw).unwrap(), Source::direct(*off, raw)));
            }
        }
    }
    b
}

/// Everything the order must not change.
#[derive(Debug, PartialEq)]
struct Outcome {
    history: Vec<(String, chrono::NaiveDate, String)>,
    statuses: Vec<(String, String, Option<chrono::NaiveDate>)>,
    /// (portfolio, event id) of the fold's logs.
    logs: BTreeSet<(String, uuid::Uuid)>,
    /// (event id, reason) of the dead letters, the reason up to what says
    /// it was refused after it was stored.
    dead: BTreeSet<(String, String)>,
    /// (named id, correction) of the corrections waiting for their target.
    orphans: BTreeSet<(uuid::Uuid, uuid::Uuid)>,
}

/// The corrections waiting for their target, as kept, after checking that
/// they are exactly the stored corrections whose target is not stored.
async fn orphans(pool: &sqlx::PgPool) -> BTreeSet<(uuid::Uuid, uuid::Uuid)> {
    let kept: Vec<(uuid::Uuid, uuid::Uuid)> =
        sqlx::query_as("SELECT corrects, event_id FROM correction_orphans")
            .fetch_all(pool)
            .await
            .unwrap();
    let waiting: Vec<(uuid::Uuid, uuid::Uuid)> = sqlx::query_as(
        "SELECT corrects, event_id FROM transactions WHERE corrects IS NOT NULL
         UNION ALL
         SELECT corrects, event_id FROM transactions_superseded WHERE corrects IS NOT NULL
         EXCEPT ALL
         SELECT c.corrects, c.event_id
           FROM (SELECT corrects, event_id FROM transactions
                 UNION ALL SELECT corrects, event_id FROM transactions_superseded) c
           JOIN event_ids e ON e.event_id = c.corrects",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let kept: BTreeSet<_> = kept.into_iter().collect();
    assert_eq!(kept, waiting.into_iter().collect::<BTreeSet<_>>());
    kept
}

async fn run(g: &Value, batches: &[Vec<Item>]) -> Outcome {
    let today = day(g["today"].as_str().unwrap());
    let app = spawn_app(jwt_auth(), today).await;
    for items in batches {
        store_batch(&app.db, batch(items, &g["default_currency"])).await;
        // Between batches too: a correction waits exactly while its target
        // is not stored.
        orphans(&app.pool).await;
        // A refresh between batches, as the worker may run one: what a
        // later batch undoes must be undone in the stored history too.
        navd::projection::worker::refresh_all(&app.db, Clock::fixed(today))
            .await
            .unwrap();
    }
    let statuses = sqlx::query_as(
        "SELECT portfolio_id, status, status_since FROM portfolios ORDER BY portfolio_id",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let logs: Vec<(String, uuid::Uuid)> =
        sqlx::query_as("SELECT portfolio_id, event_id FROM transactions")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    let dead: Vec<(Vec<u8>, String)> = sqlx::query_as("SELECT payload, reason FROM dead_letters")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    let dead = dead
        .into_iter()
        .map(|(p, r)| {
            let v: Value = serde_json::from_slice(&p).unwrap();
            let reason = r.split("; refused when").next().unwrap().to_string();
            (v["event_id"].as_str().unwrap().to_string(), reason)
        })
        .collect();
    Outcome {
        history: history_table(&app.pool).await,
        statuses,
        logs: logs.into_iter().collect(),
        dead,
        orphans: orphans(&app.pool).await,
    }
}

/// The golden's two corrections of one revision (the first one sent
/// stands): the shuffles keep them in the golden's order.
fn keeps_revision_order(order: &[Item]) -> bool {
    let at = |id: &str| {
        order.iter().position(|it| match it {
            Item::Tx(_, v) => v["event_id"] == id,
            Item::Close(..) => false,
        })
    };
    at("00000000-0000-4000-8007-000000000015") < at("00000000-0000-4000-8007-000000000032")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrections_give_one_outcome_in_any_arrival_order_and_batching() {
    let g: Value =
        serde_json::from_str(include_str!("../../fixtures/golden/corrections.json")).unwrap();
    let all = items(&g);
    let reference = run(&g, std::slice::from_ref(&all)).await;
    let want: BTreeSet<String> = g["expected_dead_letters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["event_id"].as_str().unwrap().to_string())
        .collect();
    let got: BTreeSet<String> = reference.dead.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(got, want, "{:#?}", reference.dead);

    // Each event alone, last first: every correction before its target,
    // each in an earlier batch (the two revisions of one key swapped back).
    let mut reversed = all.clone();
    reversed.reverse();
    let pos = |id: &str| {
        reversed
            .iter()
            .position(|it| matches!(it, Item::Tx(_, v) if v["event_id"] == id))
            .unwrap()
    };
    let (i, j) = (
        pos("00000000-0000-4000-8007-000000000015"),
        pos("00000000-0000-4000-8007-000000000032"),
    );
    reversed.swap(i, j);
    let mut orders: Vec<Vec<Vec<Item>>> = vec![reversed.iter().map(|i| vec![i.clone()]).collect()];
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x0a11_0c4e);
    while orders.len() < 5 {
        let mut shuffled = all.clone();
        shuffled.shuffle(&mut rng);
        if !keeps_revision_order(&shuffled) {
            continue;
        }
        let mut batches = Vec::new();
        let mut rest = shuffled.as_slice();
        while !rest.is_empty() {
            let n = rng.gen_range(1..=rest.len().min(8));
            batches.push(rest[..n].to_vec());
            rest = &rest[n..];
        }
        orders.push(batches);
    }
    for (n, batches) in orders.iter().enumerate() {
        let flat: Vec<Item> = batches.iter().flatten().cloned().collect();
        assert!(keeps_revision_order(&flat));
        let got = run(&g, batches).await;
        assert_eq!(got, reference, "order {n}: {batches:?}");
    }
}

/// A correction refused when its target arrives (another portfolio's
/// event) still counted before: asked as known at an instant between the
/// two, the portfolio's curve is the one served then; asked after, the
/// one served now, which no longer has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correction_refused_later_still_counts_as_known_before() {
    let today = day("2024-04-12");
    let app = spawn_app(jwt_auth(), today).await;
    let id = |n: u32| format!("00000000-0000-4000-9300-{n:012}");
    let buy = |n: u32, p: &str, q: &str, d: &str| buy_aaa(&id(n), p, q, d);
    let mut amend = buy(3, "b", "40", "2024-04-03");
    amend["corrects"] = Value::from(id(9));
    amend["revision"] = Value::from(1);
    let closes = aaa_closes();
    let curve = |when: Option<&str>| {
        let q = when.map_or(String::new(), |t| format!("?as_known_at={}", urlencode(t)));
        format!("/api/v1/portfolio/b/nav-history{q}")
    };
    let tok = crate::support::admin();
    let refresh = || navd::projection::worker::refresh_all(&app.db, Clock::fixed(today));

    ingest(&app.db, &[buy(1, "b", "10", "2024-04-01"), amend], &closes).await;
    refresh().await.unwrap();
    let (s, then) = crate::support::get_json(&app, &curve(None), &tok).await;
    assert_eq!(s, 200, "{then}");
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let between = chrono::Utc::now().to_rfc3339();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;

    // The event the amendment names arrives, in another portfolio.
    ingest(&app.db, &[buy(9, "a", "5", "2024-04-02")], &[]).await;
    refresh().await.unwrap();
    let (_, now) = crate::support::get_json(&app, &curve(None), &tok).await;
    assert_ne!(now["points"], then["points"], "the amendment left b");
    let (_, known) = crate::support::get_json(&app, &curve(Some(&between)), &tok).await;
    assert_eq!(known["points"], then["points"], "as known between");
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let after = chrono::Utc::now().to_rfc3339();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    // A restated first close: asked as known before it, the curve is
    // folded from the log (not read from the stored records).
    let restated = serde_json::json!({"symbol": "AAA", "date": "2024-04-01", "close": "49"});
    ingest(&app.db, &[], &[restated]).await;
    refresh().await.unwrap();
    let (_, latest) = crate::support::get_json(&app, &curve(None), &tok).await;
    assert_ne!(latest["points"], now["points"], "the close was restated");
    let (_, known) = crate::support::get_json(&app, &curve(Some(&between)), &tok).await;
    assert_eq!(known["points"], then["points"], "as known between");
    assert_eq!(known["statistics"], then["statistics"]);
    let (_, known) = crate::support::get_json(&app, &curve(Some(&after)), &tok).await;
    assert_eq!(known["points"], now["points"], "as known after");
    // The dead letter is the amendment's, at its Kafka position (the
    // second event of the first batch).
    let dead: Vec<(String, i32, i64, String)> =
        sqlx::query_as(r#"SELECT topic, partition, "offset", reason FROM dead_letters"#)
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!((dead[0].0.as_str(), dead[0].1, dead[0].2), ("direct", 0, 1));
    assert!(
        dead[0]
            .3
            .starts_with("portfolio_id differs from the original's (a)"),
        "{dead:?}"
    );
}

/// An original that arrives after its amendment changes nothing in effect
/// (the amendment, the highest revision, already stood on its own): the
/// portfolio is not recomputed and a cached curve stays valid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_original_after_its_amendment_changes_nothing() {
    let today = day("2024-04-12");
    let app = spawn_app(jwt_auth(), today).await;
    let id = |n: u32| format!("00000000-0000-4000-9400-{n:012}");
    let buy = |n: u32, q: &str, d: &str| buy_aaa(&id(n), "late", q, d);
    let mut amend = buy(3, "40", "2024-04-04");
    amend["corrects"] = Value::from(id(2));
    amend["revision"] = Value::from(1);
    let closes = aaa_closes();
    ingest(&app.db, &[buy(1, "10", "2024-04-01"), amend], &closes).await;
    navd::projection::worker::refresh_all(&app.db, Clock::fixed(today))
        .await
        .unwrap();
    let tok = crate::support::admin();
    let path = "/api/v1/portfolio/late/nav-history";
    let r = app
        .client
        .get(app.url(path))
        .bearer_auth(&tok)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let etag = r.headers()["etag"].to_str().unwrap().to_string();
    let before: Value = r.json().await.unwrap();

    // The original the amendment names, earlier than it.
    let report = ingest(&app.db, &[buy(2, "5", "2024-04-02")], &[]).await;
    assert_eq!(report.transactions_stored, 1);
    assert!(report.affected.is_empty(), "{:?}", report.affected);
    let (_, now) = crate::support::get_json(&app, path, &tok).await;
    assert_ne!(now["status"]["state"], "recomputing", "{}", now["status"]);
    let r = app
        .client
        .get(app.url(path))
        .bearer_auth(&tok)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 304, "the cached curve stays valid");
    navd::projection::worker::refresh_all(&app.db, Clock::fixed(today))
        .await
        .unwrap();
    let (_, after) = crate::support::get_json(&app, path, &tok).await;
    assert_eq!(after["points"], before["points"], "the amendment stands");
}

fn urlencode(s: &str) -> String {
    s.replace('+', "%2B").replace(':', "%3A")
}

/// A version-2 buy of `q` AAA at 50 by portfolio `p` on `d`.
fn buy_aaa(id: &str, p: &str, q: &str, d: &str) -> Value {
    serde_json::json!({"event_id": id, "type": "buy", "portfolio_id": p,
        "symbol": "AAA", "quantity": q, "price": "50", "trade_date": d,
        "schema_version": 2})
}

/// AAA's closes of the knowledge-time tests: 50, 51, 52.
fn aaa_closes() -> Vec<Value> {
    ["2024-04-01", "2024-04-05", "2024-04-10"]
        .iter()
        .enumerate()
        .map(|(i, d)| serde_json::json!({"symbol": "AAA", "date": d, "close": format!("5{i}")}))
        .collect()
}
