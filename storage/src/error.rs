//! What a database failure means to navd, read from its SQLSTATE in this one
//! place: the database is **unavailable** (unreachable, shutting down, out
//! of connections: retry, answer 503), it **refused** what it was given (a
//! value it cannot store: the message responsible becomes a dead letter),
//! or something **other** (a bug, an unexpected state, stored rows that do
//! not read back as the domain's values: 500, logged). Operations of the
//! crate's face return [`StorageError`] (the read paths so far; the others
//! still return `sqlx::Result` or `anyhow::Result`).

/// A database failure, classified.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// Unreachable or saturated: retry later.
    #[error("the database is unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// The content was refused; `reason` says why, for a dead letter.
    #[error("{reason}")]
    Refused {
        reason: String,
        #[source]
        source: sqlx::Error,
    },
    /// Anything else, with what was being done when it failed.
    #[error(transparent)]
    Other(anyhow::Error),
}

impl From<sqlx::Error> for StorageError {
    fn from(e: sqlx::Error) -> Self {
        if is_unavailable(&e) {
            StorageError::Unavailable(e)
        } else if let Some(reason) = refusal(&e) {
            StorageError::Refused { reason, source: e }
        } else {
            StorageError::Other(e.into())
        }
    }
}

/// A failure of code that reads rows into the domain's values: a database
/// error inside it (with or without context) is classified as above; an
/// unavailable database loses the context (its message says enough), any
/// other failure keeps it.
impl From<anyhow::Error> for StorageError {
    fn from(e: anyhow::Error) -> Self {
        match e.downcast_ref::<sqlx::Error>() {
            Some(db) if is_unavailable(db) || refusal(db).is_some() => {
                match e.downcast::<sqlx::Error>() {
                    Ok(db) => db.into(),
                    Err(e) => StorageError::Other(e),
                }
            }
            _ => StorageError::Other(e),
        }
    }
}

/// Whether the database is unreachable or saturated (a pool timeout, a
/// broken connection, a server shutting down or out of connections).
pub(crate) fn is_unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => {
            // admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections
            matches!(
                db.code().as_deref(),
                Some("57P01" | "57P02" | "57P03" | "53300")
            )
        }
        _ => false,
    }
}

/// Why the database refused the content it was given, when it did (SQLSTATE
/// classes 22 data exception, 23 integrity constraint, 54 program limit),
/// rather than failing for being unreachable or busy. Only such a failure
/// can be pinned on a message; anything else is retried, however long it
/// lasts, so an outage never turns good events into dead letters.
pub fn refusal(e: &sqlx::Error) -> Option<String> {
    match e {
        sqlx::Error::Database(db) => {
            let code = db.code()?;
            if matches!(&code[..2], "22" | "23" | "54") {
                return Some(format!(
                    "the database refused to store it: {} (SQLSTATE {code})",
                    db.message()
                ));
            }
            // Citus reports a row a worker refused while the coordinator
            // copied rows to it as XX000 from ReportCopyError, without the
            // worker's SQLSTATE (its message and detail are kept). Only
            // that routine is taken as a refusal: Citus' own failures
            // (planning, connections, I/O) come from elsewhere and are
            // retried. A worker out of disk space is reported the same way
            // and would be isolated too (deploy/README.md, Citus).
            let pg = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()?;
            (code == "XX000" && pg.routine() == Some("ReportCopyError")).then(|| {
                format!(
                    "the database refused to store it: {} (a Citus worker's error; \
                     Citus does not pass its SQLSTATE on)",
                    db.message()
                )
            })
        }
        sqlx::Error::Encode(err) => Some(format!(
            "the event could not be encoded for the database: {err}"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_and_the_wire_are_unavailability_and_nothing_is_refused() {
        for e in [
            sqlx::Error::PoolTimedOut,
            sqlx::Error::PoolClosed,
            sqlx::Error::WorkerCrashed,
            sqlx::Error::Io(std::io::Error::other("reset")),
        ] {
            assert!(is_unavailable(&e), "{e}");
            assert!(refusal(&e).is_none(), "{e}");
        }
        assert!(matches!(
            StorageError::from(sqlx::Error::PoolTimedOut),
            StorageError::Unavailable(_)
        ));
        assert!(matches!(
            StorageError::from(sqlx::Error::RowNotFound),
            StorageError::Other(_)
        ));
        // Inside code that reads rows, with context, the same.
        use anyhow::Context as _;
        let lost: anyhow::Result<()> =
            Err(sqlx::Error::Io(std::io::Error::other("reset"))).context("reading closes");
        assert!(matches!(
            StorageError::from(lost.unwrap_err()),
            StorageError::Unavailable(_)
        ));
        let bad: anyhow::Result<()> = Err(anyhow::anyhow!("a close of -1")).context("reading");
        let e = StorageError::from(bad.unwrap_err());
        assert!(matches!(e, StorageError::Other(_)));
        assert_eq!(format!("{e:#}"), "reading: a close of -1");
        let encode = sqlx::Error::Encode("too long".into());
        assert!(!is_unavailable(&encode));
        assert!(refusal(&encode).unwrap().contains("could not be encoded"));
    }
}
