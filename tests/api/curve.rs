//! Reading the curve: nav-history as CSV, benchmarks, and the read caches
//! (ETags and revalidation, content codings, change notifications, the
//! price cache's rereads).

use crate::common::*;
use crate::support::*;
use navd::clock::Clock;
use reqwest::StatusCode;
use serde_json::{json, Value};

#[tokio::test]
async fn cached_curve_revalidates_compresses_and_never_goes_stale() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.db).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
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
    ingest(&app.db, &[late], &[]).await;
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
    navd::projection::worker::refresh_all(&app.db, app.clock)
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
    let db = Db::new(pool.clone());
    ingest_golden(&db).await;
    navd::projection::worker::refresh_all(&db, Clock::fixed(golden_today()))
        .await
        .unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let changes = db.changes().clone();
    let state = navd::http::AppState {
        // Trusted on the notifications alone for the whole test: only they
        // can make a read fresh here.
        cache: std::sync::Arc::new(navd::http::cache::ReadCache::trusting_for(
            16 << 20,
            std::time::Duration::from_secs(3600),
        )),
        ..navd::http::AppState::new(
            db.clone(),
            Clock::fixed(golden_today()),
            navd::http::Authenticator::new(&jwt_auth()).unwrap(),
        )
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
    ingest_golden(&app.db).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
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

/// The curve as CSV: a header, then each point's fields as the JSON has
/// them; hidden portfolios stay 404.
#[tokio::test]
async fn curve_as_csv_matches_the_json() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.db).await;
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

/// A benchmark read is cached like any other, and a new close of the
/// benchmark makes the next read fresh (its price version is part of the
/// validator).
#[tokio::test]
async fn a_benchmark_close_refreshes_cached_reads() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.db).await;
    let bm = |d: &str, c: &str| json!({"symbol": "BMK", "date": d, "close": c});
    ingest(
        &app.db,
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
    ingest(&app.db, &[], &[bm("2024-01-12", "121")]).await;
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
        &app.db,
        &[],
        &[eur("2024-01-01", "100"), eur("2024-01-12", "100")],
    )
    .await;
    let rate = |d: &str, r: &str| {
        let v = json!({"from": "EUR", "to": "USD", "date": d, "rate": r});
        (
            projections::parse_fx(v.to_string().as_bytes()).unwrap(),
            navd_storage::Source::direct(0, v.to_string().into_bytes()),
        )
    };
    let store_rates = |rates: Vec<_>| async {
        let mut tx = app.pool.begin().await.unwrap();
        navd_storage::ingest(
            &mut tx,
            navd_storage::IngestBatch {
                rates,
                ..Default::default()
            },
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        // What the consumer does after its commit (other processes learn
        // it from the notification).
        app.db.changes().prices_changed();
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

/// The price cache reads a changed series again only from the day its
/// change starts, and answers exactly what the table holds: after a new
/// day's close, a corrected old close, a close quoted in another currency,
/// one batch writing an old and a new day, a split, and two changes between
/// its looks. Each look is compared with an uncached read of the same
/// window, and the rows it read are counted.
#[tokio::test]
async fn a_cached_series_rereads_from_the_changed_day_and_matches_the_table() {
    use navd_storage::price_cache::PriceCache;
    let (pool, _) = fresh_db().await;
    let db = Db::new(pool.clone());
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
    ingest(&db, &[], &closes).await;
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
        &db,
        &[],
        &[px("PCA", 500, "700".into()), px("PCB", 500, "41".into())],
    )
    .await;
    assert_eq!(look().await, 2, "a new day's close reads one row a series");

    ingest(&db, &[], &[px("PCA", 9, "1.5".into())]).await;
    assert_eq!(
        look().await,
        stored("PCA", 9).await,
        "a correction reads from its day"
    );

    let eur = json!({"symbol": "PCB", "date": d(501).to_string(), "close": "9", "currency": "EUR"});
    ingest(&db, &[], &[eur]).await;
    assert_eq!(look().await, 1, "a quoted close is read with its currency");

    // One batch, an old day and a new one: read from the older.
    ingest(
        &db,
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
        navd_storage::Source::direct(0, raw),
    ));
    let mut tx = pool.begin().await.unwrap();
    navd_storage::ingest(&mut tx, b).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(look().await, stored("PCA", 0).await, "after a split");

    // Two changes between looks: the cache is two versions behind.
    ingest(&db, &[], &[px("PCB", 503, "45".into())]).await;
    ingest(&db, &[], &[px("PCB", 504, "46".into())]).await;
    assert_eq!(look().await, stored("PCB", 0).await, "two versions behind");
    assert_eq!(look().await, 0);
}
