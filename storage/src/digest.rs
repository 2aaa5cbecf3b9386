//! The digest of a portfolio's stored records: what lets a refold that
//! changes nothing skip reading them back.
//!
//! A `calculate` refolds a portfolio's whole log and must leave the stored
//! records equal to the fold's. Reading them back to compare cost more than
//! the refold's own read of the log (twelve numerics a day, a decade of
//! days). Instead the `portfolios` row keeps, in `history_digest`, the sum
//! modulo 2^128 of one 128-bit hash per stored record (SHA-256 of its day
//! and its values in the binary form PostgreSQL stores them, truncated),
//! updated in the same transaction as every write of the records: a refold
//! whose records sum to the stored digest, when the portfolio also has as
//! many stored records as the fold made, has nothing to write. A sum, not a
//! hash of the sequence, so that a refresh that rewrites a few days updates
//! it from those days alone: minus the stored ones it read, plus the new.
//!
//! What it cannot see is a record edited in place behind navd's back (the
//! count catches rows deleted or added): a `backfill` always reads and
//! compares, and repairs those (docs/design.md, "The records' digest").
//! `NULL` means unknown (rows stored before the column existed): the next
//! refold of the whole log reads, compares and sets it.

use chrono::{Datelike, NaiveDate};
use sha2::{Digest as _, Sha256};

/// A sum of record hashes; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Digest(u128);

impl Digest {
    /// The digest of no records.
    pub(crate) const EMPTY: Digest = Digest(0);

    /// The hash of one record: its day and its twelve values as stored.
    pub(super) fn of_record(day: NaiveDate, values: &[u8]) -> Digest {
        let mut h = Sha256::new();
        h.update(day.num_days_from_ce().to_le_bytes());
        h.update(values);
        let out = h.finalize();
        let mut first = [0u8; 16];
        first.copy_from_slice(&out[..16]);
        Digest(u128::from_le_bytes(first))
    }

    pub(super) fn plus(self, other: Digest) -> Digest {
        Digest(self.0.wrapping_add(other.0))
    }

    pub(super) fn minus(self, other: Digest) -> Digest {
        Digest(self.0.wrapping_sub(other.0))
    }

    /// As stored in `portfolios.history_digest`.
    pub(crate) fn to_bytes(self) -> Vec<u8> {
        self.0.to_le_bytes().to_vec()
    }

    /// From `portfolios.history_digest`; anything but 16 bytes is unknown.
    pub(crate) fn from_bytes(b: &[u8]) -> Option<Digest> {
        <[u8; 16]>::try_from(b)
            .ok()
            .map(|a| Digest(u128::from_le_bytes(a)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    #[test]
    fn a_sum_of_records_is_independent_of_order_and_undone_by_minus() {
        let a = Digest::of_record(day("2024-01-02"), b"\x00\x01");
        let b = Digest::of_record(day("2024-01-03"), b"\x00\x01");
        let c = Digest::of_record(day("2024-01-02"), b"\x00\x02");
        assert_ne!(a, b, "the day counts");
        assert_ne!(a, c, "the values count");
        let ab = Digest::EMPTY.plus(a).plus(b);
        assert_eq!(ab, Digest::EMPTY.plus(b).plus(a));
        assert_eq!(ab.minus(a), b);
        assert_eq!(ab.minus(b).minus(a), Digest::EMPTY);
        assert_ne!(ab, Digest::EMPTY.plus(a).plus(c));
    }

    #[test]
    fn stored_form_round_trips_and_rejects_other_lengths() {
        let a = Digest::of_record(day("2024-01-02"), b"xyz");
        assert_eq!(Digest::from_bytes(&a.to_bytes()), Some(a));
        assert_eq!(a.to_bytes().len(), 16);
        assert_eq!(Digest::from_bytes(&[0u8; 15]), None);
        assert_eq!(Digest::from_bytes(&[0u8; 17]), None);
        assert_eq!(Digest::from_bytes(&[0u8; 16]), Some(Digest::EMPTY));
    }
}
