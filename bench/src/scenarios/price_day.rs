//! Scenario 6, `price-day`: a close dated today for every symbol of the
//! ingest book, from a producer already connected; timed from the first
//! close sent until every portfolio holding them is refreshed.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use navd_testkit::broker::Sender;
use serde_json::json;

use crate::harness::Bench;
use crate::kafka::{PX_TOPIC, WARM_TOPIC};
use crate::report::round3;

/// When the closes were stored and when every portfolio was refreshed,
/// in seconds from the first close sent.
struct Reached {
    produced_s: f64,
    stored_s: f64,
    all_refreshed_s: f64,
}

impl Bench {
    pub(crate) async fn price_day(&mut self) -> Result<()> {
        self.wait_caught_up(Duration::from_secs(600)).await?;
        let book = self.ingest_book.as_ref().expect("ingested");
        let (symbols, portfolios) = (book.spec.symbols as i64, book.spec.portfolios as i64);
        println!(
            "\n[price-day] a close dated {} for all {symbols} symbols...",
            self.today
        );
        let closes: Vec<(String, Vec<u8>)> = (0..book.spec.symbols)
            .map(|s| book.today_close(s))
            .collect();
        let sender = Sender::new(&self.brokers, 1)?;
        // The clock starts at the first close sent by a ready producer,
        // not at the producer's connection and handshake (~0.1 s).
        tokio::task::block_in_place(|| sender.warm_up(WARM_TOPIC, &[PX_TOPIC]))?;
        self.child().reset_peak_rss();
        let mut a = self.probe().await;
        let t0 = Instant::now();
        for (key, payload) in &closes {
            sender.send(PX_TOPIC, key, payload)?;
        }
        tokio::task::block_in_place(|| sender.flush())?;
        self.produced += closes.len() as u64;
        self.today_closes
            .extend(closes.into_iter().map(|(_, payload)| payload));
        let reached = self.until_refreshed(t0, symbols).await?;
        let b = self.probe().await;
        self.check_today_records(portfolios).await?;
        let total_s = reached.all_refreshed_s;
        println!(
            "[price-day] closes stored after {:.2} s, every portfolio refreshed after {total_s:.2} s",
            reached.stored_s
        );
        let figures = json!({
            "symbols": symbols,
            "portfolios": portfolios,
            "closes_produced_s": round3(reached.produced_s),
            "closes_stored_s": round3(reached.stored_s),
            "all_refreshed_s": round3(total_s),
            "peak_rss_mb": round3(self.child().peak_rss_mb()),
            "phase": self.phase(&mut a, &b).await,
        });
        self.results.insert("price_day".into(), figures);
        self.row(
            "price-day",
            "close for every symbol → all today-records updated",
            format!("{total_s:.2} s"),
            Some(("≤ 0.5 s".into(), total_s <= 0.5)),
            json!({"value": round3(total_s), "unit": "s", "target": 0.5, "better": "lower"}),
        );
        Ok(())
    }

    /// Polls every 10 ms until today's closes are stored and no portfolio
    /// is behind.
    async fn until_refreshed(&self, t0: Instant, symbols: i64) -> Result<Reached> {
        let produced_s = t0.elapsed().as_secs_f64();
        let mut stored_at = None;
        let deadline = t0 + Duration::from_secs(600);
        // One snapshot for both counts: once the closes are stored, the
        // portfolios they mark pending are marked in the same transaction.
        let done_at = loop {
            let (stored, behind): (i64, i64) = sqlx::query_as(
                "SELECT (SELECT count(*) FROM prices WHERE day = $1 AND symbol LIKE 'S%'),
                        (SELECT count(*) FROM portfolios
                          WHERE computed_through IS DISTINCT FROM $1
                 OR EXISTS (SELECT 1 FROM portfolio_marks k WHERE k.portfolio_id = portfolios.portfolio_id))",
            )
            .bind(self.today)
            .fetch_one(&self.pool)
            .await?;
            let now = Instant::now();
            if stored == symbols {
                stored_at.get_or_insert(now);
                if behind == 0 {
                    break now;
                }
            }
            if now > deadline {
                bail!("price day: {stored}/{symbols} closes stored, {behind} portfolios behind after 600 s");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        Ok(Reached {
            produced_s,
            stored_s: (stored_at.expect("stored") - t0).as_secs_f64(),
            all_refreshed_s: (done_at - t0).as_secs_f64(),
        })
    }

    /// Every ingest portfolio has a record dated today.
    async fn check_today_records(&self, portfolios: i64) -> Result<()> {
        let today_rows: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM portfolio_nav_history WHERE day = $1 AND portfolio_id LIKE 'p-%'",
        )
        .bind(self.today)
        .fetch_one(&self.pool)
        .await?;
        anyhow::ensure!(
            today_rows == portfolios,
            "price day: {today_rows}/{portfolios} portfolios have a record for today"
        );
        Ok(())
    }
}
