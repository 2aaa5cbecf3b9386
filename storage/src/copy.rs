//! Rows in PostgreSQL's binary `COPY` format, written by navd. A consumer
//! batch stores its event rows with `COPY … FROM STDIN (FORMAT binary)`:
//! the server inserts them in bulk (one WAL record per page of rows, no
//! array to unnest, no per-row executor pass), where `INSERT … SELECT *
//! FROM UNNEST(…)` cost it ~12 µs a row (docs/performance.md).
//!
//! Each value is written exactly as the driver would bind it (same bytes,
//! same `numeric` scale; `tests/api/wire.rs` compares the two on every column
//! type used here), so a row stored by `COPY` reads back as one stored by
//! `INSERT`.

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use sqlx::PgConnection;
use uuid::Uuid;

use super::numeric::pg_numeric;

/// `PGCOPY\n\xff\r\n\0`, then no flags and no header extension.
const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

/// PostgreSQL's day 0 for `date` and `timestamptz`.
fn epoch() -> NaiveDate {
    NaiveDate::from_ymd_opt(2000, 1, 1).expect("a valid date")
}

/// A `COPY` payload being written: a row is [`BinaryRows::row`] followed by
/// exactly `fields` values.
#[derive(Debug)]
pub struct BinaryRows {
    buf: Vec<u8>,
    fields: i16,
    rows: usize,
}

impl BinaryRows {
    /// An empty payload for rows of `fields` columns.
    pub fn new(fields: i16) -> Self {
        let mut buf = Vec::with_capacity(4096);
        buf.extend_from_slice(HEADER);
        BinaryRows {
            buf,
            fields,
            rows: 0,
        }
    }

    /// Rows begun so far.
    #[cfg(test)]
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Whether no row was begun.
    pub(crate) fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Starts a row; its `fields` values follow.
    pub fn row(&mut self) -> &mut Self {
        self.buf.extend_from_slice(&self.fields.to_be_bytes());
        self.rows += 1;
        self
    }

    fn value(&mut self, bytes: &[u8]) -> &mut Self {
        // A field is at most a text of a message (bounded far below 2 GiB).
        self.buf
            .extend_from_slice(&(bytes.len() as i32).to_be_bytes());
        self.buf.extend_from_slice(bytes);
        self
    }

    /// SQL `NULL`.
    pub fn null(&mut self) -> &mut Self {
        self.buf.extend_from_slice(&(-1i32).to_be_bytes());
        self
    }

    pub(crate) fn text(&mut self, s: &str) -> &mut Self {
        self.value(s.as_bytes())
    }

    pub fn opt_text(&mut self, s: Option<&str>) -> &mut Self {
        match s {
            Some(s) => self.text(s),
            None => self.null(),
        }
    }

    pub fn uuid(&mut self, id: Uuid) -> &mut Self {
        self.value(id.as_bytes())
    }

    pub(crate) fn opt_uuid(&mut self, id: Option<Uuid>) -> &mut Self {
        match id {
            Some(id) => self.uuid(id),
            None => self.null(),
        }
    }

    pub(crate) fn opt_int4(&mut self, v: Option<i32>) -> &mut Self {
        match v {
            Some(v) => self.int4(v),
            None => self.null(),
        }
    }

    /// A `boolean`: one byte, 1 or 0.
    pub(crate) fn opt_bool(&mut self, v: Option<bool>) -> &mut Self {
        match v {
            Some(v) => self.value(&[u8::from(v)]),
            None => self.null(),
        }
    }

    pub fn int8(&mut self, v: i64) -> &mut Self {
        self.value(&v.to_be_bytes())
    }

    pub fn int4(&mut self, v: i32) -> &mut Self {
        self.value(&v.to_be_bytes())
    }

    /// Days since 2000-01-01, as the driver binds a date. Every date chrono
    /// holds fits (±262,143 years is ~96 million days); PostgreSQL refuses
    /// the ones outside its own range, as it would a bound parameter.
    pub fn date(&mut self, d: NaiveDate) -> &mut Self {
        let days = d.signed_duration_since(epoch()).num_days() as i32;
        self.int4(days)
    }

    pub fn opt_date(&mut self, d: Option<NaiveDate>) -> &mut Self {
        match d {
            Some(d) => self.date(d),
            None => self.null(),
        }
    }

    /// Microseconds since 2000-01-01 00:00 UTC, as the driver binds a
    /// `timestamptz`; an instant too far for that count is an error, as it
    /// is for the driver.
    pub fn opt_timestamptz(&mut self, t: Option<DateTime<Utc>>) -> Result<&mut Self, String> {
        let Some(t) = t else {
            return Ok(self.null());
        };
        let epoch = epoch().and_hms_opt(0, 0, 0).expect("midnight").and_utc();
        let micros = (t - epoch)
            .num_microseconds()
            .ok_or_else(|| format!("instant {t} is out of PostgreSQL's range"))?;
        Ok(self.int8(micros))
    }

    pub(crate) fn numeric(&mut self, d: &Decimal) -> &mut Self {
        let at = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        pg_numeric(d, &mut self.buf);
        let len = (self.buf.len() - at - 4) as i32;
        self.buf[at..at + 4].copy_from_slice(&len.to_be_bytes());
        self
    }

    pub fn opt_numeric(&mut self, d: Option<&Decimal>) -> &mut Self {
        match d {
            Some(d) => self.numeric(d),
            None => self.null(),
        }
    }

    /// The finished payload (with its trailer).
    pub(super) fn finish(mut self) -> Vec<u8> {
        self.buf.extend_from_slice(&(-1i16).to_be_bytes());
        self.buf
    }
}

/// Runs `statement` (`COPY table (columns) FROM STDIN (FORMAT binary)`)
/// with `rows`; the number of rows stored.
pub async fn copy_in(
    conn: &mut PgConnection,
    statement: &str,
    rows: BinaryRows,
) -> sqlx::Result<u64> {
    let mut copy = conn.copy_in_raw(statement).await?;
    let sent = copy.send(rows.finish()).await;
    if let Err(e) = sent {
        // Leave the connection usable (and the transaction failed) rather
        // than half way through a copy.
        let _ = copy
            .abort(format!("navd could not send the rows: {e}"))
            .await;
        return Err(e);
    }
    copy.finish().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_payload_is_the_header_and_the_trailer() {
        let bytes = BinaryRows::new(3).finish();
        assert_eq!(&bytes[..11], b"PGCOPY\n\xff\r\n\0");
        assert_eq!(&bytes[11..19], &[0; 8]);
        assert_eq!(&bytes[19..], &[0xff, 0xff]);
    }

    #[test]
    fn a_row_is_its_field_count_then_length_prefixed_values() {
        let mut r = BinaryRows::new(4);
        r.row()
            .text("ab")
            .null()
            .int4(-2)
            .numeric(&Decimal::new(15, 1));
        assert_eq!(r.rows(), 1);
        let bytes = r.finish();
        let row = &bytes[HEADER.len()..bytes.len() - 2];
        let mut numeric = Vec::new();
        pg_numeric(&Decimal::new(15, 1), &mut numeric);
        let mut want = vec![0, 4, 0, 0, 0, 2, b'a', b'b', 0xff, 0xff, 0xff, 0xff];
        want.extend_from_slice(&[0, 0, 0, 4, 0xff, 0xff, 0xff, 0xfe]);
        want.extend_from_slice(&(numeric.len() as i32).to_be_bytes());
        want.extend_from_slice(&numeric);
        assert_eq!(row, &want[..]);
    }

    #[test]
    fn dates_and_instants_count_from_2000() {
        let mut r = BinaryRows::new(3);
        let d = NaiveDate::from_ymd_opt(1999, 12, 31).unwrap();
        let t = d.and_hms_micro_opt(23, 59, 59, 999_999).unwrap().and_utc();
        r.row()
            .date(d)
            .opt_timestamptz(Some(t))
            .unwrap()
            .opt_date(None);
        let bytes = r.finish();
        let row = &bytes[HEADER.len() + 2..bytes.len() - 2];
        assert_eq!(&row[..8], &[0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(&row[8..12], &[0, 0, 0, 8]);
        assert_eq!(i64::from_be_bytes(row[12..20].try_into().unwrap()), -1);
        assert_eq!(&row[20..], &[0xff, 0xff, 0xff, 0xff]);
    }
}
