//! The bytes navd exchanges with PostgreSQL: its binary numeric encoding and
//! decoding, and rows written by binary `COPY` against bound parameters.

use crate::common::*;

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
        navd_storage::history::pg_numeric(v, &mut ours);
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
        let ours = navd_storage::history::decode_numeric(&bytes);
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
/// is refused through either path. Read back by binary `COPY`, navd's
/// decoders give what the driver gives.
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
    use navd_storage::copy::{copy_in, BinaryRows};
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
    // Read back by binary COPY and navd's decoders, as the driver reads
    // the same rows.
    let by_driver: Vec<CopyRow> =
        sqlx::query_as("SELECT n, a, b, c, d, e, f, g FROM via_copy ORDER BY n")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
    assert_eq!(read_by_copy_out(&mut conn).await, by_driver);
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

/// `via_copy`'s rows read by `COPY … TO STDOUT (FORMAT binary)`, decoded
/// by `navd_storage::copy_out`, the payload cut into pieces of 1 to 50
/// bytes (the reader must not depend on how messages split it).
async fn read_by_copy_out(conn: &mut sqlx::PgConnection) -> Vec<CopyRow> {
    use futures::TryStreamExt;
    use navd_storage::copy_out as c;
    let mut stream = conn
        .copy_out_raw(
            "COPY (SELECT n, a, b, c, d, e, f, g FROM via_copy ORDER BY n) TO STDOUT (FORMAT binary)",
        )
        .await
        .unwrap();
    let mut payload = Vec::new();
    while let Some(b) = stream.try_next().await.unwrap() {
        payload.extend_from_slice(&b);
    }
    drop(stream);
    let mut out = c::CopyOut::default();
    let mut rows = Vec::new();
    for (k, piece) in payload.chunks(50).enumerate() {
        for part in piece.chunks(1 + k % 50) {
            out.push(part);
            while let Some(f) = out.next_row::<8>().unwrap() {
                let r = c::CopyRow {
                    bytes: out.bytes(),
                    fields: &f,
                };
                rows.push((
                    c::int4(r.field(0).unwrap()).unwrap(),
                    r.field(1).map(|b| c::text(b).unwrap().to_string()),
                    r.field(2).map(|b| c::uuid(b).unwrap()),
                    r.field(3).map(|b| c::int8(b).unwrap()),
                    r.field(4).map(|b| c::int4(b).unwrap()),
                    r.field(5).map(|b| c::date(b).unwrap()),
                    r.field(6).map(|b| c::timestamptz(b).unwrap()),
                    r.field(7).map(|b| c::numeric(b).unwrap()),
                ));
            }
        }
    }
    assert!(out.ended());
    rows
}

/// A portfolio's log read by binary `COPY` (as explain, attribution,
/// `calculate` and `backfill` read it) is the log the driver's rows give
/// (the group reader the refresh worker uses), event for event and field
/// for field, for every event of every golden book (both phases), whole and
/// from a day on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_read_by_copy_is_the_log_the_driver_reads() {
    use navd_storage::{load_transactions, load_transactions_many, IngestBatch, Source};
    use std::collections::BTreeSet;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/golden");
    let far = day("2100-01-01");
    let mut kinds: BTreeSet<String> = BTreeSet::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for file in files {
        let g: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let app = spawn_app(jwt_auth(), golden_today()).await;
        let list = |v: &serde_json::Value| v.as_array().cloned().unwrap_or_default();
        let mut events = list(&g["transactions"]);
        events.extend(list(&g["then"]["transactions"]));
        let mut b = IngestBatch::default();
        // What the books leave out: an instant to the microsecond, a trade
        // in another currency at its own rate.
        let extra = serde_json::json!({"event_id": "00000000-0000-4000-9901-000000000001",
            "type": "buy", "portfolio_id": "wire-extra", "symbol": "XYZ", "quantity": "3.5",
            "price": "101.25", "fee": "0.5", "trade_date": "2024-01-02",
            "occurred_at": "2024-01-02T14:30:00.123456Z", "currency": "EUR",
            "fx_rate": "1.0823", "schema_version": 2});
        let raw = serde_json::to_vec(&extra).unwrap();
        let tx = projections::parse_transaction(&raw).unwrap();
        assert!(tx.occurred_at.is_some() && tx.fx_rate.is_some() && tx.currency.is_some());
        b.transactions.push((tx, Source::direct(-1, raw)));
        for (off, t) in events.iter().enumerate() {
            let raw = serde_json::to_vec(t).unwrap();
            // The books' malformed events are dead letters here.
            if let Ok(tx) = projections::parse_transaction(&raw) {
                b.transactions.push((tx, Source::direct(off as i64, raw)));
            }
        }
        store_batch(&app.db, b).await;
        let ids: Vec<String> =
            sqlx::query_scalar("SELECT DISTINCT portfolio_id FROM transactions ORDER BY 1")
                .fetch_all(&app.pool)
                .await
                .unwrap();
        assert!(!ids.is_empty(), "{file:?}");
        let mut conn = app.pool.acquire().await.unwrap();
        for after in [None, Some(day("2024-01-03"))] {
            let wanted: Vec<(String, Option<chrono::NaiveDate>)> =
                ids.iter().map(|id| (id.clone(), after)).collect();
            let by_rows = load_transactions_many(&mut conn, &wanted, far)
                .await
                .unwrap();
            for id in &ids {
                let by_copy = load_transactions(&mut conn, id, after, far).await.unwrap();
                let rows = by_rows.get(id).cloned().unwrap_or_default();
                assert_eq!(by_copy, rows, "{file:?} {id} after {after:?}");
                kinds.extend(by_copy.iter().map(|t| t.kind.name().to_string()));
            }
        }
    }
    for k in [
        "buy",
        "sell",
        "deposit",
        "withdrawal",
        "fee",
        "tax",
        "interest",
        "dividend",
        "transfer_in",
        "transfer_out",
        "portfolio_settings",
        "return_of_capital",
    ] {
        assert!(kinds.contains(k), "no {k} among {kinds:?}");
    }
}
