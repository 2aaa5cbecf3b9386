//! Logging setup: JSON lines for machines, pretty text for terminals
//! (`NAVD_LOG_FORMAT`), filtered by `RUST_LOG` (default `info`). Pretty
//! text is coloured only when stderr is a terminal and `NO_COLOR` is unset,
//! so a file or a log collector never gets ANSI escape codes. A line that
//! cannot be written (a closed terminal) is dropped, never a panic.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,rdkafka=warn,tower_http=info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colours(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        ))
        .with_writer(std::io::stderr)
        // Otherwise a failed write is reported with `eprintln!`, which
        // panics when stderr fails too: after a terminal hangup every log
        // line would panic the task writing it (the demo's signal handler
        // first of all). A line that cannot be written is dropped.
        .log_internal_errors(false);
    // try_init: tests and the demo may call this more than once.
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Pretty => builder.try_init(),
    };
}

/// Whether to colour log lines: on a terminal, unless `NO_COLOR` is set to
/// anything non-empty (no-color.org).
fn colours(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colours(true, None));
        assert!(colours(true, Some("".as_ref())));
        assert!(!colours(true, Some("1".as_ref())));
        assert!(!colours(false, None));
        assert!(!colours(false, Some("1".as_ref())));
    }
}
