//! [`RenderPool`]: where charts are drawn — on blocking threads, a bounded
//! number at a time, a request waiting at most [`RenderPool::WAIT`] for
//! its turn (503 with `Retry-After` past it).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::http::error::ApiError;

/// Where charts are drawn: on blocking threads, at most as many at once as
/// there are CPUs, so drawing never occupies the async workers that answer
/// every other request (`/healthz` included), and a burst of chart requests
/// costs a bounded amount of CPU and memory.
///
/// A request holds its slot from before it reads the history until the
/// drawing is done — even when the request itself has timed out and its
/// answer is dropped — so the bound counts the work really running. One
/// that cannot get a slot within [`RenderPool::WAIT`] answers 503 with
/// `Retry-After`.
#[derive(Debug)]
pub struct RenderPool {
    slots: Arc<Semaphore>,
    wait: Duration,
}

impl RenderPool {
    /// Longest wait for a slot; below the default request timeout (10 s), so
    /// the answer says why.
    pub(crate) const WAIT: Duration = Duration::from_secs(5);

    pub(crate) fn new(slots: usize, wait: Duration) -> Self {
        RenderPool {
            slots: Arc::new(Semaphore::new(slots.max(1))),
            wait,
        }
    }

    /// The process's pool: one slot per CPU available to the process.
    pub fn global() -> &'static RenderPool {
        static POOL: OnceLock<RenderPool> = OnceLock::new();
        POOL.get_or_init(|| {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            RenderPool::new(cpus, Self::WAIT)
        })
    }

    /// A slot, or 503 once [`RenderPool::WAIT`] has passed without one.
    pub(crate) async fn slot(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        match tokio::time::timeout(self.wait, self.slots.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_closed)) => Err(ApiError::Internal(anyhow::anyhow!("render pool closed"))),
            Err(_) => {
                metrics::counter!("navd_chart_renders_refused_total").increment(1);
                Err(ApiError::Unavailable(
                    "too many charts are being drawn right now; retry later".into(),
                ))
            }
        }
    }

    /// Runs `draw` on a blocking thread, holding `slot` until it returns.
    pub(crate) async fn run<T, F>(slot: OwnedSemaphorePermit, draw: F) -> Result<T, ApiError>
    where
        F: FnOnce() -> Result<T, ApiError> + Send + 'static,
        T: Send + 'static,
    {
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            draw()
        })
        .await
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("chart drawing failed: {e}")))?
    }

    /// Slots free right now (for tests and diagnostics).
    pub fn available(&self) -> usize {
        self.slots.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;

    #[tokio::test]
    async fn a_full_pool_answers_503_with_retry_after() {
        let pool = RenderPool::new(1, Duration::from_millis(50));
        let held = pool.slot().await.unwrap();
        assert_eq!(pool.available(), 0);
        let err = pool.slot().await.unwrap_err();
        let resp = err.into_response();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "5");
        assert_eq!(
            resp.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
        // The slot is held until the drawing is done, then freed.
        let n = RenderPool::run(held, || Ok(21 * 2)).await.unwrap();
        assert_eq!(n, 42);
        assert_eq!(pool.available(), 1);
        assert!(pool.slot().await.is_ok());
    }
}
