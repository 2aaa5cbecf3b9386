//! Cancel and amend: which stored version of a logical transaction is in
//! effect. A pure function of the *set* of stored events, so a correction
//! that arrives before its original, or revisions out of order, give the
//! same history as any other arrival order.
//!
//! - A logical transaction is an original (revision 0, keyed by its own
//!   `event_id`) with every stored event whose `corrects` names it.
//! - Its effective event is the one with the highest revision; when that is
//!   a `cancel`, the logical transaction has no effect at all.
//! - A correction whose original is not stored (yet) is effective on its
//!   own, as the highest revision it knows.
//! - Corrections are ignored when the event they name turns out to be a
//!   correction itself or a `portfolio_settings` event (the ingest refuses
//!   such corrections when the target is already stored; stored first,
//!   they are set aside here) or belongs to another portfolio.
//! - Two stored events with one (`corrects`, `revision`) cannot happen
//!   through the ingest (the second is refused); should a store hold both,
//!   the earlier in log order wins.

use std::collections::HashMap;

use uuid::Uuid;

use crate::types::{Kind, Transaction};

/// Whether `t` may take part in a logical transaction named by a correction
/// (as its original): a settings event or a correction may not.
fn correctable(t: &Transaction) -> bool {
    t.correction.is_none() && !matches!(t.kind, Kind::PortfolioSettings { .. })
}

/// The effective event of the logical transaction `key`, given the stored
/// event whose id is `key` (`original`, when stored) and the stored
/// corrections that name `key`. `None`: no effect (cancelled, or nothing
/// effective).
pub fn effective_of<'t>(
    key: Uuid,
    original: Option<&'t Transaction>,
    corrections: impl IntoIterator<Item = &'t Transaction>,
) -> Option<&'t Transaction> {
    let original = original.filter(|o| o.event_id == key);
    if let Some(o) = original {
        if !correctable(o) {
            // Corrections of a correction or of settings have no effect;
            // the target stands on its own (in its own logical transaction).
            return None;
        }
    }
    let mut best: Option<&Transaction> = original;
    for c in corrections {
        let Some(corr) = c.correction else { continue };
        if corr.corrects != key || original.is_some_and(|o| o.portfolio_id != c.portfolio_id) {
            continue;
        }
        best = match best {
            Some(b)
                if (b.revision(), std::cmp::Reverse(b.seq))
                    >= (corr.revision, std::cmp::Reverse(c.seq)) =>
            {
                Some(b)
            }
            _ => Some(c),
        };
    }
    best.filter(|b| !matches!(b.kind, Kind::Cancel))
}

/// [`effective`], without a copy when there is nothing to pick: a log
/// with no correction and no cancel is its own effective set.
pub(crate) fn effective_cow(stored: &[Transaction]) -> std::borrow::Cow<'_, [Transaction]> {
    if stored
        .iter()
        .any(|t| t.correction.is_some() || matches!(t.kind, Kind::Cancel))
    {
        std::borrow::Cow::Owned(effective(stored))
    } else {
        std::borrow::Cow::Borrowed(stored)
    }
}

/// The effective events of a set of stored transactions (see the module
/// doc), in the order given. Settings events and originals nobody corrects
/// are their own effective events.
pub fn effective(stored: &[Transaction]) -> Vec<Transaction> {
    if stored.iter().all(|t| t.correction.is_none()) {
        return stored
            .iter()
            .filter(|t| !matches!(t.kind, Kind::Cancel))
            .cloned()
            .collect();
    }
    let by_id: HashMap<Uuid, &Transaction> = stored.iter().map(|t| (t.event_id, t)).collect();
    let mut groups: HashMap<Uuid, Vec<&Transaction>> = HashMap::new();
    for t in stored.iter().filter(|t| t.correction.is_some()) {
        groups.entry(t.logical_id()).or_default().push(t);
    }
    let chosen: HashMap<Uuid, Option<Uuid>> = groups
        .iter()
        .map(|(key, corrections)| {
            let original = by_id.get(key).copied();
            let pick = effective_of(*key, original, corrections.iter().copied());
            (*key, pick.map(|t| t.event_id))
        })
        .collect();
    stored
        .iter()
        .filter(|t| {
            if matches!(t.kind, Kind::Cancel) {
                return false;
            }
            match chosen.get(&t.logical_id()) {
                // A logical transaction some correction names.
                Some(pick) => match t.correction {
                    // An original whose corrections are set aside (it is a
                    // correction itself or a settings event) stands.
                    None if !correctable(t) => true,
                    _ => *pick == Some(t.event_id),
                },
                // Every correction is in a group: this is an original.
                None => t.correction.is_none(),
            }
        })
        .cloned()
        .collect()
}
