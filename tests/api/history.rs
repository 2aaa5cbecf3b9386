//! The history table in storage: group reads use the index, records read back
//! as written (COPY or upsert), derived values are the fold's rounded ones,
//! and the migration from the reported columns loses nothing.

use crate::common::*;

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
        stored.extend(navd_storage::history_rows_at(&mut conn, &at).await.unwrap());
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
            let logs = navd_storage::load_transactions_many(&mut tx, &wanted, last)
                .await
                .unwrap();
            let days = (last - from).num_days() as usize;
            assert_eq!(logs.len(), 32);
            assert!(
                logs.values().all(|l| l.len() == days),
                "each log from {from}"
            );
            let after: Vec<navd_storage::Span> = group
                .iter()
                .map(|p| navd_storage::Span {
                    portfolio_id: p.clone(),
                    after: from,
                    digest: None,
                    count: None,
                    whole: false,
                })
                .collect();
            // The stored rows again: the read finds each one unchanged and
            // nothing is written.
            let same: Vec<(&str, &navd_storage::HistoryRow)> = stored
                .iter()
                .filter(|(_, r)| r.record.date > from)
                .map(|(p, r)| (p.as_str(), r))
                .collect();
            assert_eq!(same.len(), 32 * days);
            navd_storage::replace_history_many(&mut tx, &after, &same)
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
    use navd_storage::HistoryRow;
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
            exposure: Default::default(),
        }
        .rounded();
        // The exposure as it comes too; its leverage is derived from the
        // gross exposure and the exact value (none where that overflows,
        // which the fold never stores).
        let gross = Some(v(19))
            .filter(|g| projections::Exposure::leverage_of(*g, value).is_ok())
            .unwrap_or(Decimal::ZERO);
        let exposure = projections::Exposure {
            long_value: v(16),
            short_value: v(17),
            futures_notional: v(18),
            gross_exposure: gross,
            net_exposure: v(20),
            leverage: projections::Exposure::leverage_of(gross, value)
                .unwrap()
                .map(projections::round_ratio),
            accrued_interest: v(21),
        };
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
                exposure,
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
        navd_storage::replace_history(&mut tx, "p-copy", from, Some(to), rows, None)
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
        let back = navd_storage::load_history(&mut conn, "p-copy", None, None)
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
                // A book of long positions: its holdings are all exposure.
                exposure: projections::Exposure::of(value, Decimal::ZERO, value).unwrap(),
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
    use navd_storage::HistoryRow;
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
    navd_storage::replace_history(&mut tx, "p-upserted", from, Some(to), &others, None)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    for pid in ["p-copied", "p-upserted"] {
        let mut tx = pool.begin().await.unwrap();
        navd_storage::replace_history(&mut tx, pid, from, Some(to), &rows, None)
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
    let mut conn = pool.acquire().await.unwrap();
    for pid in ["p-copied", "p-upserted"] {
        let back = navd_storage::load_history(&mut conn, pid, None, None)
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
    use navd_storage::HistoryRow;
    use rust_decimal::Decimal;
    use sqlx::Row;
    const NEW: i64 = 20261126000001;
    let (pool, _) = empty_single_db().await;
    // The migrations before this one, applied as sqlx does (checksums and
    // all): the full set then applies this one and the later ones.
    let dir = tempfile::tempdir().unwrap();
    for m in navd_storage::MIGRATOR.iter().filter(|m| m.version < NEW) {
        let name = format!("{}_{}.sql", m.version, m.description.replace(' ', "_"));
        std::fs::write(dir.path().join(name), m.sql.as_bytes()).unwrap();
    }
    let old = sqlx::migrate::Migrator::new(dir.path()).await.unwrap();
    assert!(navd_storage::MIGRATOR.iter().any(|m| m.version == NEW));
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
                exposure: Default::default(),
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

    navd_storage::migrate(&pool).await.unwrap();
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
    // Key, twelve values, computed_at, and the exposure's six values.
    assert_eq!(columns.len(), 2 + 12 + 1 + 6, "{columns:?}");
    let after = navd_storage::load_history(&mut conn, "p-old", None, Some(last))
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
        // Records stored before exposure existed held long positions
        // only: the migration gives each its holdings as long value, gross
        // and net exposure (leverage follows from the gross and the exact
        // value); every other text is as the old schema read it.
        let holdings = b.record.holdings_value;
        let mut was = b.clone();
        was.record.exposure = projections::Exposure {
            long_value: holdings,
            gross_exposure: holdings,
            net_exposure: holdings,
            leverage: projections::Exposure::leverage_of(holdings, b.market_value_exact)
                .unwrap()
                .map(projections::round_ratio),
            ..Default::default()
        };
        assert_eq!(
            Point::from(a),
            Point::from(&was),
            "the reported texts of {at}"
        );
    }
    let page = navd_storage::portfolios::portfolios_page(&mut conn, "", 10, None)
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

/// A portfolio's base currency is decoded once, where its row is read: a
/// stored value that is not a currency (a row edited behind navd's back) is
/// an error naming the portfolio and the value, never a silent fallback to
/// the default currency.
#[tokio::test]
async fn a_stored_base_currency_that_does_not_parse_is_an_error_not_a_default() {
    let (pool, _) = fresh_db().await;
    let db = Db::new(pool.clone());
    let settings = serde_json::json!({"event_id": "00000000-0000-4000-8001-0000000000b1",
        "type": "portfolio_settings", "portfolio_id": "p-gbp", "trade_date": "2024-03-01",
        "cash": "tracked", "base_currency": "GBP", "schema_version": 2});
    let deposit = serde_json::json!({"event_id": "00000000-0000-4000-8001-0000000000b2",
        "type": "deposit", "portfolio_id": "p-gbp", "trade_date": "2024-03-01",
        "amount": "100", "schema_version": 2});
    ingest(&db, &[settings, deposit], &[]).await;
    let mut conn = pool.acquire().await.unwrap();
    let row = navd_storage::get_portfolio(&mut conn, "p-gbp")
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(
        row.base_currency.map(|c| c.to_string()).as_deref(),
        Some("GBP")
    );

    sqlx::query("UPDATE transactions SET base_currency = 'GBX' WHERE kind = 'portfolio_settings'")
        .execute(&pool)
        .await
        .unwrap();
    let e = navd_storage::get_portfolio(&mut conn, "p-gbp")
        .await
        .expect_err("a stored GBX is not a base currency");
    let text = e.to_string();
    assert!(text.contains("p-gbp") && text.contains("GBX"), "{text}");
}
