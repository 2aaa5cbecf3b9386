//! What `/readyz` reports on, written by the parts that run in the
//! background (consumer, refresh worker) and read by the HTTP edge. A leaf:
//! it imports nothing of the crate, so any module may depend on it without
//! pointing an arrow back at the HTTP layer.

/// Health of the parts `/readyz` reports on, shared with the consumer.
#[derive(Debug, Default)]
pub struct Health {
    /// Set when a consumer runs; `None` when this process has none.
    pub consumer: std::sync::Mutex<Option<ConsumerHealth>>,
    /// The consumer's last batch was full: it is working through a backlog,
    /// and the refresh worker yields the CPU to it (see `worker`).
    pub catching_up: std::sync::atomic::AtomicBool,
}

#[derive(Debug, Clone, Default)]
pub struct ConsumerHealth {
    pub assigned_partitions: usize,
    /// Why the batch in flight cannot be stored (cleared when it is).
    pub last_error: Option<String>,
    /// Why the broker did not answer the latest probe or client call
    /// (cleared by the next answer).
    pub broker_error: Option<String>,
}
