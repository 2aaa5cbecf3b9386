//! The run's calibration: what this machine and this database manage today,
//! measured at setup in every run whatever scenarios are chosen, so that
//! figures of runs on different days can be compared as ratios (the shared
//! machines run 2.5–3.5× slower on some days, navd's code unchanged).
//!
//! It owns two fixed workloads and their figures:
//! - the **CPU unit**: the pure fold (`projections`) of a small generated
//!   book that never changes — not `--seed`, not `--scale` — on one thread,
//!   the median CPU time of that thread (and wall time) over several runs;
//! - the **COPY ceiling**: rows a second that the run's database takes by
//!   durable `COPY … FROM STDIN`, of rows shaped like navd's trades in a
//!   scratch table of a scratch schema, dropped afterwards.
//!
//! The durable-commit floor is measured by the harness's machine probe and
//! only carried here. How figures are divided by these is `report`'s
//! ([`Bounds`]).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Instant;

use anyhow::{Context, Result};
use chrono::NaiveDate;
use navd_testkit::book::{Book, BookSpec};
use serde_json::{json, Value};
use sqlx::PgPool;

use crate::pinned::TODAY;
use crate::purefold::{time_fold, FoldTiming, SentEvents};
use crate::report::{round3, Bounds, Dist};

/// The fixed book of the CPU unit: one portfolio, five years, 50 symbols,
/// 10,000 trades — half the ten-year book of `backfill`, so one fold takes
/// a few milliseconds, long enough for the thread's CPU clock to resolve
/// and short enough to repeat. Changing it changes the unit: every earlier
/// ratio becomes incomparable.
fn cpu_book_spec() -> BookSpec {
    BookSpec {
        tag: 0xCA1B,
        portfolio_prefix: "calib-",
        portfolios: 1,
        symbol_prefix: "CAL",
        symbols: 50,
        universe: 50,
        trades_per_portfolio: 10_000,
        days: 1826,
    }
}

/// Its seed: fixed, not `--seed`, for the same reason.
const CPU_BOOK_SEED: u64 = 0x5EED_CA1B;
/// Timed folds of the CPU unit (after one untimed).
const CPU_RUNS: usize = 31;

/// Rows a `COPY` of the ceiling: fixed, so that ceilings compare across
/// runs (a consumer batch under a backlog holds up to `NAVD_BATCH_MAX`).
const COPY_ROWS: usize = 5_000;
/// Timed `COPY`s (after one untimed, which also fills the catalog caches).
const COPY_ROUNDS: usize = 15;
/// The scratch schema, dropped (with its table) after the measurement and
/// before it, should an interrupted run have left it.
const SCRATCH_SCHEMA: &str = "navd_bench_calibration";

/// The CPU unit: the fixed fold's medians.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuUnit {
    pub(crate) timing: FoldTiming,
    pub(crate) transactions: usize,
    pub(crate) days: usize,
}

/// The COPY ceiling: the median rate of the timed rounds, and each round's.
#[derive(Debug, Clone)]
pub(crate) struct CopyCeiling {
    pub(crate) rows_per_s: f64,
    pub(crate) rounds: Vec<f64>,
}

/// What the run measured of the machine at setup.
#[derive(Debug, Clone)]
pub(crate) struct Calibration {
    pub(crate) cpu: CpuUnit,
    pub(crate) copy: CopyCeiling,
    /// The harness's durable one-row commit latency (ms), carried over.
    pub(crate) commit: Dist,
    pub(crate) took_s: f64,
}

impl Calibration {
    /// Measures the CPU unit, then the COPY ceiling on `pool`'s database
    /// (one after the other: on two cores they would slow each other).
    pub(crate) async fn measure(pool: &PgPool, commit: Dist) -> Result<Calibration> {
        let started = Instant::now();
        let cpu = tokio::task::spawn_blocking(cpu_unit)
            .await
            .context("the CPU unit's thread")??;
        let copy = copy_ceiling(pool).await?;
        Ok(Calibration {
            cpu,
            copy,
            commit,
            took_s: started.elapsed().as_secs_f64(),
        })
    }

    /// The divisors of the summary's normalised column.
    pub(crate) fn bounds(&self) -> Bounds {
        Bounds {
            copy_rows_per_s: self.copy.rows_per_s,
            cpu_unit_ms: self.cpu.timing.cpu_ms,
        }
    }

    pub(crate) fn print(&self) {
        let t = self.cpu.timing;
        println!(
            "navd bench: calibration ({:.1} s): CPU unit {:.2} ms (pure fold of a fixed 5-year book, \
             CPU time of its thread, p50 of {CPU_RUNS}; wall {:.2} ms); COPY ceiling {:.0} rows/s \
             ({COPY_ROWS}-row durable COPYs, p50 of {COPY_ROUNDS}); durable commit p50 {:.2} ms",
            self.took_s, t.cpu_ms, t.wall_ms, self.copy.rows_per_s, self.commit.p50,
        );
        if self.busy() {
            println!(
                "navd bench: WARNING: the calibration's fold waited for a core ({:.2} ms wall for {:.2} ms of CPU): \
                 other work shares this machine, and times measured by the clock on the wall carry that wait too",
                t.wall_ms, t.cpu_ms
            );
        }
    }

    /// Whether the fixed fold's wall time exceeded its CPU time by more
    /// than a quarter: something else held the cores while it ran. The unit
    /// is CPU time, which such sharing hardly moves, so the ratios of wall
    /// times of this run are then high by the share of waiting.
    pub(crate) fn busy(&self) -> bool {
        let t = self.cpu.timing;
        t.wall_ms > 1.25 * t.cpu_ms
    }

    /// The `calibration` key of the JSON.
    pub(crate) fn json(&self) -> Value {
        let t = self.cpu.timing;
        json!({
            "cpu_unit_ms": round3(t.cpu_ms),
            "copy_ceiling_rows_per_s": self.copy.rows_per_s.round(),
            "durable_commit_ms_p50": round3(self.commit.p50),
            "took_s": round3(self.took_s),
            "machine_busy": self.busy(),
            "cpu_unit": {
                "workload": "projections::fold of a fixed generated book (seed and size independent of --seed and --scale), one thread",
                "transactions": self.cpu.transactions,
                "days": self.cpu.days,
                "runs": CPU_RUNS,
                "cpu_ms_p50": round3(t.cpu_ms),
                "wall_ms_p50": round3(t.wall_ms),
            },
            "copy_ceiling": {
                "workload": "COPY … FROM STDIN (FORMAT text) into a scratch table shaped like navd's transactions (trade columns, the log's covering key), each COPY its own committed transaction",
                "rows_per_copy": COPY_ROWS,
                "rounds": COPY_ROUNDS,
                "rows_per_s_p50": self.copy.rows_per_s.round(),
                "rows_per_s_each": self.copy.rounds.iter().map(|r| r.round()).collect::<Vec<_>>(),
            },
            "durable_commit": {
                "source": "machine.durable_commit_ms (the harness's one-row insert probe)",
                "p50_ms": round3(self.commit.p50),
                "p99_ms": round3(self.commit.p99),
            },
        })
    }
}

/// The fixed fold, timed on the calling thread (a blocking one: the
/// thread's CPU clock must see the fold alone).
fn cpu_unit() -> Result<CpuUnit> {
    let today: NaiveDate = TODAY.parse().expect("valid constant");
    let book = Book::generate(cpu_book_spec(), CPU_BOOK_SEED, today);
    let sent = SentEvents::of_book(&book, &BTreeSet::from([0]), &[], &[])?;
    let through = today.pred_opt().expect("date in range");
    let inputs = sent.inputs(&book.portfolio(0), through)?;
    // One untimed fold: the first pays for page faults and cold caches.
    time_fold(&inputs, through, 1)?;
    let (timing, _) = time_fold(&inputs, through, CPU_RUNS)?;
    Ok(CpuUnit {
        timing,
        transactions: book.trades.len(),
        days: (through - inputs.first_day).num_days() as usize + 1,
    })
}

/// The durable `COPY` rate of the run's database: a scratch table in a
/// scratch schema, one untimed and [`COPY_ROUNDS`] timed `COPY`s of
/// [`COPY_ROWS`] rows, each autocommitted (so each waits for its commit's
/// flush, as navd's batches do); the schema dropped afterwards even when a
/// round failed.
async fn copy_ceiling(pool: &PgPool) -> Result<CopyCeiling> {
    let mut conn = pool.acquire().await?;
    let drop = format!("DROP SCHEMA IF EXISTS {SCRATCH_SCHEMA} CASCADE");
    sqlx::query(&drop).execute(&mut *conn).await?;
    sqlx::query(&format!("CREATE SCHEMA {SCRATCH_SCHEMA}"))
        .execute(&mut *conn)
        .await
        .context("creating the calibration's scratch schema")?;
    let measured = copy_rounds(&mut conn).await;
    // Dropped whatever the rounds did; their error, if any, is the one told.
    let dropped = sqlx::query(&drop).execute(&mut *conn).await;
    let rounds = measured?;
    dropped?;
    Ok(CopyCeiling {
        rows_per_s: Dist::of(rounds.clone()).p50,
        rounds,
    })
}

/// Creates the scratch table and times the rounds: rows a second of each.
async fn copy_rounds(conn: &mut sqlx::PgConnection) -> Result<Vec<f64>> {
    // The columns a trade fills in navd's `transactions`, and its log key
    // with the columns a fold reads (migrations/…_transactions_log_covering
    // .sql), as of this writing: the shape stays fixed here so that a later
    // schema change does not move the unit.
    sqlx::query(&format!(
        "CREATE TABLE {SCRATCH_SCHEMA}.transactions (
            portfolio_id text NOT NULL, event_id uuid NOT NULL, seq bigint NOT NULL,
            kind text NOT NULL, symbol text, quantity numeric, price numeric, fee numeric,
            trade_date date NOT NULL, occurred_at timestamptz, fingerprint text NOT NULL,
            source_topic text, source_partition integer, source_offset bigint,
            received_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (portfolio_id, trade_date, seq)
                INCLUDE (event_id, kind, symbol, quantity, price, fee, occurred_at))"
    ))
    .execute(&mut *conn)
    .await?;
    let statement = format!(
        "COPY {SCRATCH_SCHEMA}.transactions (portfolio_id, event_id, seq, kind, symbol, quantity, \
         price, fee, trade_date, occurred_at, fingerprint, source_topic, source_partition, \
         source_offset) FROM STDIN (FORMAT text)"
    );
    let mut rates = Vec::with_capacity(COPY_ROUNDS);
    for round in 0..=COPY_ROUNDS {
        let payload = copy_payload(round);
        let t = Instant::now();
        let mut copy = conn.copy_in_raw(&statement).await?;
        copy.send(payload).await?;
        let stored = copy.finish().await?;
        let secs = t.elapsed().as_secs_f64();
        anyhow::ensure!(
            stored == COPY_ROWS as u64,
            "the calibration's COPY stored {stored} rows of {COPY_ROWS}"
        );
        if round > 0 {
            rates.push(COPY_ROWS as f64 / secs);
        }
    }
    Ok(rates)
}

/// Round `round`'s rows, deterministic: trades of 1,000 portfolios
/// interleaved as a consumer batch interleaves them (so the key is written
/// all over its B-tree, not appended), over two years of days, each row its
/// own log position.
fn copy_payload(round: usize) -> Vec<u8> {
    let start = NaiveDate::from_ymd_opt(2024, 7, 1).expect("a valid date");
    let mut out = String::with_capacity(COPY_ROWS * 220);
    for i in 0..COPY_ROWS {
        let n = (round * COPY_ROWS + i) as u64;
        // A multiplicative hash spreads portfolios, symbols and days.
        let h = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let portfolio = format!("calib-{:04}", h % 1000);
        let symbol = format!("CAL{:03}", (h >> 16) % 200);
        let day = start + chrono::Duration::days(((h >> 32) % 730) as i64);
        let kind = if (h >> 48) % 4 == 0 { "sell" } else { "buy" };
        let (qty, price) = (1 + (h >> 20) % 500, 10_000 + (h >> 24) % 990_000);
        let price = format!("{}.{:04}", price / 10_000, price % 10_000);
        let id = uuid::Uuid::from_u128(0xCA1B_0000_0000_0000_0000_0000_0000_0000 | u128::from(n));
        let _ = writeln!(
            out,
            "{portfolio}\t{id}\t{seq}\t{kind}\t{symbol}\t{qty}\t{price}\t1.00\t{day}\t\
             {day} 14:30:00+00\t{portfolio}|{kind}|{symbol}|{qty}|{price}|1.00|{day}|\
             {day}T14:30:00Z\ttransactions\t{partition}\t{n}",
            seq = n + 1,
            partition = h % 32,
        );
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows are the same every run, one line each, with every column
    /// of the `COPY` and unique log positions.
    #[test]
    fn copy_rows_are_fixed_and_complete() {
        let (a, b) = (copy_payload(1), copy_payload(1));
        assert_eq!(a, b);
        let text = String::from_utf8(a).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), COPY_ROWS);
        assert!(lines.iter().all(|l| l.split('\t').count() == 14));
        let keys: BTreeSet<&str> = lines
            .iter()
            .map(|l| l.split('\t').nth(2).unwrap())
            .collect();
        assert_eq!(keys.len(), COPY_ROWS);
    }
}
