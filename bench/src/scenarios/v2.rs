//! Scenario 7, `v2`: one ten-year portfolio with every event kind of
//! schema version 2 (cash, fees, dividends, splits, EUR holdings with
//! daily rates) produced to all four topics; its `POST backfill` and pure
//! fold beside the v1 book's.

use std::time::Duration;

use anyhow::Result;
use navd_testkit::book::{Book, V2Events};
use navd_testkit::broker::Sender;
use serde_json::json;

use crate::harness::Bench;
use crate::kafka::{CA_TOPIC, FX_TOPIC, PX_TOPIC, TX_TOPIC};
use crate::purefold::SentEvents;
use crate::report::{round3, Dist};

impl Bench {
    /// Scenario 7: the v2 book (every event kind of schema version 2) of one
    /// 10-year portfolio, produced to all four topics; then its backfill
    /// and pure fold beside the v1 book's.
    pub(crate) async fn v2(&mut self) -> Result<()> {
        self.ensure_child().await?;
        let spec = self.ten_year_spec(5, "v2-", "W");
        let book = Book::generate(spec, self.args.seed, self.today);
        let ev = book.v2_events();
        let id = book.portfolio(0);
        println!(
            "\n[v2] one portfolio, 10 years, events of schema version 2: {} transactions ({} trades), {} closes, {} rates, {} splits...",
            ev.transactions.len(),
            book.trades.len(),
            ev.prices.len(),
            ev.fx.len(),
            ev.corporate_actions.len()
        );
        let sent = SentEvents::of_v2(&ev)?;
        self.produce_v2(ev).await?;
        let url = self.api_url(&id, "nav-history/backfill");
        let runs = self.args.backfill_runs.max(1);
        self.warm_up(&url).await?;
        let (lat, _) = self.timed_posts(&url, runs).await?;
        let d = Dist::of(lat);
        let to = self.today.pred_opt().expect("date");
        let fold = self.pure_fold_of(&sent, &id, to).await?;
        let fold_ms = fold.timing.wall_ms;
        let stored: i64 =
            sqlx::query_scalar("SELECT count(*) FROM transactions WHERE portfolio_id = $1")
                .bind(&id)
                .fetch_one(&self.pool)
                .await?;
        // Per event against the v1 book's fold, when it ran in this run.
        let v1 = self.results.get("backfill").and_then(|b| {
            Some((
                b["pure_fold_ms"].as_f64()?,
                b["transactions_replayed"].as_f64()?,
            ))
        });
        let per_event_ratio = v1.map(|(ms1, n1)| (fold_ms / stored as f64) / (ms1 / n1));
        println!(
            "[v2] backfill median {:.1} ms (p90 {:.1}); pure fold {fold_ms:.1} ms for {stored} transactions{}",
            d.p50,
            d.p90,
            per_event_ratio.map_or(String::new(), |r| format!(", {r:.2}× the v1 book's per event"))
        );
        self.results.insert(
            "v2".into(),
            json!({
                "portfolio": id,
                "transactions": stored,
                "closes": book.close_count(),
                "runs": runs,
                "backfill_ms": d.json(),
                "pure_fold_ms": round3(fold_ms),
                "pure_fold_cpu_ms": round3(fold.timing.cpu_ms),
                "pure_fold_agrees_with_navd": fold.agrees_with_navd,
                "pure_fold_per_event_vs_v1": per_event_ratio.map(round3),
            }),
        );
        self.v2_rows(&d, fold_ms, per_event_ratio);
        Ok(())
    }

    /// Produces the v2 events (rates, closes, splits, then transactions)
    /// and waits until navd has stored and folded them, none a dead letter.
    async fn produce_v2(&mut self, ev: V2Events) -> Result<()> {
        let n = ev.len() as u64;
        let (brokers, topics) = (self.brokers.clone(), self.topics);
        let dead_before = self.dead_letters().await?;
        tokio::task::spawn_blocking(move || {
            let sender = Sender::new(&brokers, 20)?;
            for (topic, events) in [
                (FX_TOPIC, &ev.fx),
                (PX_TOPIC, &ev.prices),
                (CA_TOPIC, &ev.corporate_actions),
                (TX_TOPIC, &ev.transactions),
            ] {
                for (key, json) in events {
                    sender.send(topic, key, json.as_bytes())?;
                }
            }
            sender.flush()?;
            sender.check_retained(&topics.each())
        })
        .await??;
        self.produced += n;
        self.wait_caught_up(Duration::from_secs(1800)).await?;
        let dead = self.dead_letters().await? - dead_before;
        anyhow::ensure!(
            dead == 0,
            "[v2] {dead} events of the v2 book became dead letters (see the dead_letters table)"
        );
        Ok(())
    }

    fn v2_rows(&mut self, d: &Dist, fold_ms: f64, per_event_ratio: Option<f64>) {
        self.row(
            "v2",
            "v2 book, 10 years: POST backfill median (p90)",
            format!("{:.1} ms ({:.1})", d.p50, d.p90),
            None,
            json!({"value": round3(d.p50), "unit": "ms", "better": "lower"}),
        );
        self.row(
            "v2",
            "v2 book: pure fold (per event, against the v1 book)",
            match per_event_ratio {
                Some(r) => format!("{fold_ms:.1} ms ({r:.2}×)"),
                None => format!("{fold_ms:.1} ms"),
            },
            None,
            json!({"value": round3(fold_ms), "unit": "ms", "per_event_vs_v1": per_event_ratio.map(round3), "better": "lower"}),
        );
    }
}
