//! The librdkafka callbacks of the consumer: assignment from the offsets
//! stored in PostgreSQL (eager and cooperative rebalances), statistics into
//! lag gauges, and errors and log lines, rate-limited, into health and the
//! log.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use rdkafka::consumer::{BaseConsumer, Consumer as _, ConsumerContext, RebalanceProtocol};
use rdkafka::error::KafkaError;
use rdkafka::statistics::Statistics;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::ClientContext;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};

use crate::health::{ConsumerHealth, Health};
use navd_storage::offsets;

/// librdkafka callbacks: rebalance from stored offsets, statistics, errors.
pub(super) struct Ctx {
    pub(super) group: String,
    pub(super) pg: PgConnectOptions,
    pub(super) health: Arc<Health>,
    pub(super) noise: crate::log_limit::RateLimit,
}

impl Ctx {
    fn set_health(&self, f: impl FnOnce(&mut ConsumerHealth)) {
        let mut g = self.health.consumer.lock().unwrap();
        f(g.get_or_insert_with(ConsumerHealth::default));
    }

    /// Stored next offsets of `parts`. Runs on a helper thread with its own
    /// runtime and connection because librdkafka calls us synchronously from
    /// inside the consumer's poll. `None` when the database cannot be read.
    fn stored_offsets(&self, parts: &[(String, i32)]) -> Option<HashMap<(String, i32), i64>> {
        for attempt in 0..5 {
            let pg = self.pg.clone();
            let group = self.group.clone();
            let parts = parts.to_vec();
            let got = std::thread::spawn(move || -> Result<HashMap<(String, i32), i64>> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                rt.block_on(async move {
                    let mut conn = tokio::time::timeout(
                        Duration::from_secs(3),
                        PgConnection::connect_with(&pg),
                    )
                    .await
                    .context("timed out")??;
                    let stored = offsets::read(&mut conn, &group, &parts).await?;
                    let _ = conn.close().await;
                    Ok(stored)
                })
            })
            .join();
            match got {
                Ok(Ok(map)) => return Some(map),
                Ok(Err(e)) => {
                    tracing::warn!(attempt, error = %format!("{e:#}"), "reading stored offsets failed")
                }
                Err(_) => tracing::warn!(attempt, "offset reader thread panicked"),
            }
            std::thread::sleep(Duration::from_millis(200 << attempt));
        }
        None
    }
}

impl ClientContext for Ctx {
    fn stats(&self, stats: Statistics) {
        for (topic, t) in &stats.topics {
            for (p, part) in &t.partitions {
                if *p >= 0 && part.consumer_lag >= 0 {
                    metrics::gauge!("navd_consumer_lag", "topic" => topic.clone(), "partition" => p.to_string())
                        .set(part.consumer_lag as f64);
                }
            }
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if let Some(suppressed) = self.noise.admit(&format!("error:{error}")) {
            tracing::warn!(
                %error,
                reason,
                suppressed,
                "kafka client error (librdkafka retries by itself; if it persists, check \
                 NAVD_KAFKA_BROKERS, the network and the broker)"
            );
        }
        self.set_health(|h| h.broker_error = Some(format!("{error}: {reason}")));
    }

    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, log_message: &str) {
        use rdkafka::config::RDKafkaLogLevel as L;
        // librdkafka repeats the same complaint several times a second while
        // a broker is away: one line per kind per interval says as much.
        let Some(suppressed) = self.noise.admit(&format!("log:{fac}")) else {
            return;
        };
        match level {
            L::Emerg | L::Alert | L::Critical | L::Error => {
                tracing::error!(facility = fac, suppressed, "librdkafka: {log_message}")
            }
            L::Warning => tracing::warn!(facility = fac, suppressed, "librdkafka: {log_message}"),
            L::Notice | L::Info => {
                tracing::info!(facility = fac, suppressed, "librdkafka: {log_message}")
            }
            L::Debug => tracing::debug!(facility = fac, suppressed, "librdkafka: {log_message}"),
        }
    }
}

impl ConsumerContext for Ctx {
    fn rebalance(
        &self,
        base: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let cooperative = matches!(base.rebalance_protocol(), RebalanceProtocol::Cooperative);
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                let parts: Vec<(String, i32)> = tpl
                    .elements()
                    .iter()
                    .map(|e| (e.topic().to_string(), e.partition()))
                    .collect();
                match self.stored_offsets(&parts) {
                    Some(stored) => {
                        for (t, p) in &parts {
                            // No stored offset: nothing of this partition was
                            // ever stored, so start at its beginning.
                            let off = stored.get(&(t.clone(), *p)).map_or(Offset::Beginning, |o| Offset::Offset(*o));
                            let _ = tpl.set_partition_offset(t, *p, off);
                        }
                    }
                    // Fall back to the committed mirror, which never runs
                    // ahead of the database; the in-transaction check skips
                    // whatever was already stored.
                    None => tracing::error!("database unreachable during rebalance; starting from Kafka's committed offsets"),
                }
                let r = if cooperative {
                    base.incremental_assign(tpl)
                } else {
                    base.assign(tpl)
                };
                if let Err(e) = r {
                    tracing::error!(error = %e, "assign failed");
                }
                tracing::info!(partitions = ?parts, "partitions assigned");
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                let r = if cooperative {
                    base.incremental_unassign(tpl)
                } else {
                    base.unassign()
                };
                if let Err(e) = r {
                    tracing::warn!(error = %e, "unassign failed");
                }
                tracing::info!(count = tpl.count(), "partitions revoked");
            }
            other => {
                tracing::error!(error = ?other, "rebalance error");
                let _ = base.unassign();
            }
        }
        let assigned = base.assignment().map(|a| a.count()).unwrap_or(0);
        metrics::gauge!("navd_consumer_assigned_partitions").set(assigned as f64);
        // The grace for holding nothing runs from the latest rebalance.
        self.set_health(|h| {
            h.assigned_partitions = assigned;
            h.since = Some(std::time::Instant::now());
        });
    }
}
