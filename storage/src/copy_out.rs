//! Rows read in PostgreSQL's binary `COPY` format (`COPY (SELECT …) TO
//! STDOUT (FORMAT binary)`), the inverse of [`super::copy`]. A long read
//! (a portfolio's whole log) costs navd about a quarter of the CPU this way
//! that the driver's row messages cost (each row a `PgRow` with its own
//! allocations, decoded through the type checks of a generic row), and
//! nothing else changes: the values are the same bytes the server sends
//! for a `SELECT` in binary, decoded to the same Rust values
//! (`tests/api/wire.rs` reads a log both ways and compares).
//!
//! `COPY` takes no bind parameters: the statements that use it are built
//! from values whose text cannot break out of a literal (see
//! [`literal`]).

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use uuid::Uuid;

/// `PGCOPY\n\xff\r\n\0`: the signature that opens a binary `COPY`.
const SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";

/// A binary `COPY` payload as it arrives (in messages of any size): complete
/// rows are taken from the front as soon as their bytes are in.
#[derive(Debug, Default)]
pub struct CopyOut {
    buf: Vec<u8>,
    /// The first byte not yet read.
    at: usize,
    /// Whether the header has been read.
    started: bool,
    /// Whether the trailer has been read.
    ended: bool,
}

/// Where each of a row's `N` fields is in the payload (`None`: `NULL`).
pub(crate) type Fields<const N: usize> = [Option<(usize, usize)>; N];

/// Why a payload cannot be read.
fn bad(what: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("binary COPY from the server: {what}")
}

impl CopyOut {
    /// Appends the bytes of the next message.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.at == self.buf.len() {
            self.buf.clear();
            self.at = 0;
        } else if self.at > 1 << 16 {
            self.buf.drain(..self.at);
            self.at = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Whether the trailer was read: every row has been taken.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The payload the fields of the last row taken point into.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The next complete row of `N` fields; `None` when its bytes are not
    /// all in yet, or after the trailer.
    pub fn next_row<const N: usize>(&mut self) -> anyhow::Result<Option<Fields<N>>> {
        if self.ended {
            return Ok(None);
        }
        if !self.started && !self.header()? {
            return Ok(None);
        }
        let mut at = self.at;
        let Some(count) = self.int(&mut at, 2) else {
            return Ok(None);
        };
        if count == -1 {
            self.ended = true;
            self.at = at;
            return Ok(None);
        }
        if count != N as i64 {
            return Err(bad(format!("a row of {count} fields, {N} expected")));
        }
        let mut fields: Fields<N> = [None; N];
        for f in &mut fields {
            let Some(len) = self.int(&mut at, 4) else {
                return Ok(None);
            };
            if len == -1 {
                continue;
            }
            let len = usize::try_from(len).map_err(|_| bad(format!("a field of {len} bytes")))?;
            if self.buf.len() - at < len {
                return Ok(None);
            }
            *f = Some((at, len));
            at += len;
        }
        self.at = at;
        Ok(Some(fields))
    }

    /// Reads the header once its bytes are in; false until then.
    fn header(&mut self) -> anyhow::Result<bool> {
        let rest = &self.buf[self.at..];
        if rest.len() < SIGNATURE.len() + 8 {
            return Ok(false);
        }
        if !rest.starts_with(SIGNATURE) {
            return Err(bad("no COPY signature"));
        }
        let mut at = self.at + SIGNATURE.len() + 4;
        let ext = self.int(&mut at, 4).expect("length checked above");
        let ext = usize::try_from(ext).map_err(|_| bad("a negative header extension"))?;
        if self.buf.len() - at < ext {
            return Ok(false);
        }
        self.at = at + ext;
        self.started = true;
        Ok(true)
    }

    /// The big-endian signed integer of `n` (2 or 4) bytes at `at`,
    /// advancing it; `None` when the bytes are not in yet.
    fn int(&self, at: &mut usize, n: usize) -> Option<i64> {
        let b = self.buf.get(*at..*at + n)?;
        *at += n;
        Some(match n {
            2 => i64::from(i16::from_be_bytes([b[0], b[1]])),
            _ => i64::from(i32::from_be_bytes([b[0], b[1], b[2], b[3]])),
        })
    }
}

/// One row of a payload: its fields' bytes.
#[derive(Debug, Clone, Copy)]
pub struct CopyRow<'r, const N: usize> {
    pub bytes: &'r [u8],
    pub fields: &'r Fields<N>,
}

impl<'r, const N: usize> CopyRow<'r, N> {
    /// Field `i`'s bytes; `None`: `NULL`.
    pub fn field(&self, i: usize) -> Option<&'r [u8]> {
        self.fields[i].map(|(at, len)| &self.bytes[at..at + len])
    }
}

/// PostgreSQL's day 0 for `date` and `timestamptz`.
fn epoch() -> NaiveDate {
    NaiveDate::from_ymd_opt(2000, 1, 1).expect("a valid date")
}

fn exact<const K: usize>(b: &[u8], what: &str) -> anyhow::Result<[u8; K]> {
    b.try_into()
        .map_err(|_| bad(format!("{what} of {} bytes", b.len())))
}

pub fn text(b: &[u8]) -> anyhow::Result<&str> {
    std::str::from_utf8(b).map_err(|e| bad(format!("text: {e}")))
}

pub fn uuid(b: &[u8]) -> anyhow::Result<Uuid> {
    Ok(Uuid::from_bytes(exact::<16>(b, "a uuid")?))
}

pub fn int8(b: &[u8]) -> anyhow::Result<i64> {
    Ok(i64::from_be_bytes(exact::<8>(b, "an int8")?))
}

pub fn int4(b: &[u8]) -> anyhow::Result<i32> {
    Ok(i32::from_be_bytes(exact::<4>(b, "an int4")?))
}

/// A `boolean`: one byte, 0 or 1.
pub(crate) fn boolean(b: &[u8]) -> anyhow::Result<bool> {
    match exact::<1>(b, "a boolean")? {
        [0] => Ok(false),
        [1] => Ok(true),
        [x] => Err(bad(format!("a boolean byte {x}"))),
    }
}

/// A `date`: days from 2000-01-01 (the infinities are errors).
pub fn date(b: &[u8]) -> anyhow::Result<NaiveDate> {
    let days = int4(b)?;
    epoch()
        .checked_add_signed(chrono::Duration::days(i64::from(days)))
        .filter(|_| days != i32::MAX && days != i32::MIN)
        .ok_or_else(|| bad(format!("date {days} days from 2000-01-01")))
}

/// A `timestamptz`: microseconds from 2000-01-01 00:00 UTC (the
/// infinities are errors).
pub fn timestamptz(b: &[u8]) -> anyhow::Result<DateTime<Utc>> {
    let us = int8(b)?;
    let epoch = epoch().and_hms_opt(0, 0, 0).expect("midnight").and_utc();
    epoch
        .checked_add_signed(chrono::Duration::microseconds(us))
        .filter(|_| us != i64::MAX && us != i64::MIN)
        .ok_or_else(|| bad(format!("instant {us} µs from 2000-01-01")))
}

pub fn numeric(b: &[u8]) -> anyhow::Result<Decimal> {
    super::numeric::decode_numeric(b).map_err(|e| bad(format!("numeric: {e}")))
}

/// `s` as an SQL string literal. Only for values whose type admits no
/// quote, backslash or control character (a parsed portfolio id, a
/// date's ISO text): anything else is refused rather than escaped, so the
/// literal means the same under any `standard_conforming_strings`.
pub(crate) fn literal(s: &str) -> anyhow::Result<String> {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
    {
        Ok(format!("'{s}'"))
    } else {
        Err(anyhow::anyhow!(
            "{s:?} cannot be written into a COPY statement"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::copy::BinaryRows;
    use super::*;

    fn payload() -> Vec<u8> {
        let mut rows = BinaryRows::new(3);
        rows.row().int8(7).null().text("é");
        rows.row().int8(-1).int4(3).text("");
        rows.finish()
    }

    /// Every row is read whatever sizes the payload arrives in, and
    /// nothing before its last byte is in.
    #[test]
    fn rows_are_read_across_any_message_boundaries() {
        let all = payload();
        for size in 1..=all.len() {
            let mut out = CopyOut::default();
            let mut got = Vec::new();
            for piece in all.chunks(size) {
                out.push(piece);
                while let Some(f) = out.next_row::<3>().unwrap() {
                    let row = CopyRow {
                        bytes: out.bytes(),
                        fields: &f,
                    };
                    got.push((
                        int8(row.field(0).unwrap()).unwrap(),
                        row.field(1).map(|b| int4(b).unwrap()),
                        text(row.field(2).unwrap()).unwrap().to_string(),
                    ));
                }
            }
            assert!(out.ended(), "size {size}");
            assert_eq!(
                got,
                [(7, None, "é".to_string()), (-1, Some(3), String::new())],
                "size {size}"
            );
        }
    }

    #[test]
    fn a_row_of_another_width_or_a_bad_signature_is_an_error() {
        let mut out = CopyOut::default();
        out.push(&payload());
        assert!(out.next_row::<2>().is_err());
        let mut out = CopyOut::default();
        out.push(b"PGCOPY\n\xff\r\n\x01\0\0\0\0\0\0\0\0");
        assert!(out.next_row::<3>().is_err());
    }

    #[test]
    fn values_decode_as_written() {
        let d = NaiveDate::from_ymd_opt(1999, 12, 31).unwrap();
        let mut rows = BinaryRows::new(3);
        let t = d.and_hms_micro_opt(23, 59, 59, 123_456).unwrap().and_utc();
        rows.row()
            .date(d)
            .opt_timestamptz(Some(t))
            .unwrap()
            .uuid(Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677));
        let bytes = rows.finish();
        let mut out = CopyOut::default();
        out.push(&bytes);
        let f = out.next_row::<3>().unwrap().unwrap();
        let row = CopyRow {
            bytes: out.bytes(),
            fields: &f,
        };
        assert_eq!(date(row.field(0).unwrap()).unwrap(), d);
        assert_eq!(timestamptz(row.field(1).unwrap()).unwrap(), t);
        assert_eq!(
            uuid(row.field(2).unwrap()).unwrap(),
            Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677)
        );
        assert!(date(&i32::MAX.to_be_bytes()).is_err());
        assert!(timestamptz(&i64::MIN.to_be_bytes()).is_err());
        assert!(int8(&[0; 7]).is_err());
    }

    #[test]
    fn only_plain_text_becomes_a_literal() {
        assert_eq!(literal("bf-000").unwrap(), "'bf-000'");
        assert_eq!(literal("2026-06-30").unwrap(), "'2026-06-30'");
        for s in ["a'b", "a\\b", "a b", "a\0", "é"] {
            assert!(literal(s).is_err(), "{s:?}");
        }
    }
}
