//! A time limit for one test: a test that hangs (a runtime whose threads
//! are all blocked, say, where no `tokio::time::timeout` can fire) ends the
//! whole test binary with a message naming it, so a CI run reports it
//! instead of waiting out its own limit with nothing said.

use std::sync::mpsc;
use std::time::Duration;

/// Ends the process unless dropped within its limit.
#[derive(Debug)]
pub struct Watchdog {
    done: Option<mpsc::Sender<()>>,
}

impl Watchdog {
    /// Watches the test `name` for `limit`.
    pub fn new(name: &str, limit: Duration) -> Watchdog {
        let (done, finished) = mpsc::channel::<()>();
        let name = name.to_string();
        std::thread::Builder::new()
            .name(format!("watchdog-{name}"))
            .spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(limit) {
                    eprintln!(
                        "test {name} still running after {limit:?}: ending the test binary \
                         so that the run reports it rather than hanging"
                    );
                    std::process::exit(101);
                }
            })
            .expect("a watchdog thread");
        Watchdog { done: Some(done) }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // A panicking test drops it too: its failure is reported as usual.
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
    }
}
