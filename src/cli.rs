//! The command line: `serve`, `migrate`, `demo`, `token`, `feed-check`.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::config::Config;

/// What `navd --version` prints after the name: the release and the
/// commit it was built from (`build.rs`: `git rev-parse --short HEAD`,
/// `NAVD_GIT_COMMIT` when the build sets it, as the image's does, else
/// `unknown`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("NAVD_GIT_COMMIT"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "navd",
    version = VERSION,
    about = "Daily NAV history: Kafka in, PostgreSQL projection, HTTP out"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the Kafka consumer, the refresh worker and the HTTP API.
    Serve,
    /// Apply pending database migrations and exit.
    Migrate,
    /// Run the whole pipeline locally on a generated sample book: private
    /// PostgreSQL, in-process broker, real consumer, API on loopback.
    #[cfg(feature = "demo")]
    Demo {
        /// Listen address of the API (loopback only); an error if it is
        /// taken. Without it: 127.0.0.1:8080, or a free port if that is taken.
        #[arg(long)]
        addr: Option<std::net::SocketAddr>,
    },
    /// Mint a development token signed with NAVD_JWT_HS256_SECRET (and
    /// NAVD_JWT_ISSUER / NAVD_JWT_AUDIENCE when set) and print it.
    Token(crate::token::Args),
    /// Prove the change feed is whole: read NAVD_HISTORY_TOPIC from the
    /// start and compare every portfolio with what the API serves.
    ///
    /// Reads every partition from its beginning up to the high watermark as
    /// of the start, with a throwaway consumer group that commits nothing
    /// (navd's own group is not touched), applies each message by the
    /// consumer's rule (docs/feed.md) into an empty copy, then compares each
    /// portfolio of the database and of the feed with `GET …/nav-history`:
    /// every field of every point, and the status. Portfolios navd changed
    /// after the watermark are re-read for up to --settle seconds, then
    /// reported as moving. Configured like `navd serve`: DATABASE_URL,
    /// NAVD_KAFKA_BROKERS, NAVD_KAFKA_PROPERTIES, NAVD_HISTORY_TOPIC.
    ///
    /// Prints a line per finding (different, moving, unproven, unreadable)
    /// and a summary line. Exit code: 0 no difference, 1 a difference or an
    /// unreadable message, 2 a configuration problem, 3 the check could not
    /// run (database or broker unreachable, no such topic).
    FeedCheck(crate::feed::check::Args),
}

pub fn run() -> ExitCode {
    // `navd serve --help` lists every variable with its default.
    let command =
        Cli::command().mut_subcommand("serve", |c| c.after_help(crate::config::variables_help()));
    let cli = match Cli::from_arg_matches(&command.get_matches()) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    #[cfg(feature = "demo")]
    if let Command::Demo { addr } = cli.command {
        crate::telemetry::init(crate::config::LogFormat::Pretty);
        let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
        return match rt.block_on(crate::demo::run(addr)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("navd demo: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    match &cli.command {
        Command::Token(args) => return crate::token::run(args),
        Command::FeedCheck(args) => return crate::feed::check::run(args),
        Command::Migrate => return migrate(),
        _ => {}
    }
    // Every problem at once, missing variables included, before anything
    // starts; printed once, here (the log is not set up yet).
    let config = match Config::for_serve_from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("navd: configuration error: {e:#}");
            return ExitCode::from(2);
        }
    };
    crate::telemetry::init(config.log_format);
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("navd: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            Command::Serve => crate::app::serve(config).await,
            #[cfg(feature = "demo")]
            Command::Demo { .. } => unreachable!("handled above"),
            Command::Migrate | Command::Token(_) | Command::FeedCheck(_) => {
                unreachable!("handled above")
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Once, in the log's format: a collector reads the JSON line,
            // a terminal gets the same words in plain text.
            tracing::error!(error = %format!("{e:#}"), "navd failed");
            ExitCode::FAILURE
        }
    }
}

/// `navd migrate`: only DATABASE_URL is read.
fn migrate() -> ExitCode {
    crate::telemetry::init(crate::config::default_log_format());
    let url = match crate::config::database_url_from_env() {
        Ok(u) => u,
        Err(e) => {
            eprintln!("navd: configuration error: {e:#}");
            return ExitCode::from(2);
        }
    };
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    match rt.block_on(crate::app::migrate(url)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("navd: {e:#}");
            ExitCode::FAILURE
        }
    }
}
