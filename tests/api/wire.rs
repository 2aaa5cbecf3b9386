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
