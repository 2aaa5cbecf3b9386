//! Tax lots (docs/valuation.md, lots): the lot methods a portfolio may
//! choose, the lots a long position is made of under them, the order a
//! disposal takes them in, the holding term, and what the fold reports of
//! every realization ([`Realization`]).
//!
//! Under [`LotMethod::Average`] (the default) a position is one pool at
//! its moving-average cost and carries no lots: the fold's numbers are the
//! ones it always gave. Under the other methods every acquisition of a
//! long position opens a [`Lot`]; the position's quantity and cost are the
//! sums of its lots'. Shorts stay one pool under every method, futures
//! have none.

use std::cmp::Ordering;

use chrono::{Datelike, NaiveDate};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::decimal::{self as dec, ArithmeticError};
use crate::types::{LotId, LotMethod, LotPick, Symbol};

/// One lot of a long position: what one acquisition brought in and has
/// not been disposed of yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lot {
    /// What names it ([`LotId`]; a spin-off's or merger's shares keep
    /// their parent lot's); `None` only in states stored before a
    /// reinvestment's lot was named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lot: Option<LotId>,
    pub open_date: NaiveDate,
    pub quantity: Decimal,
    /// In the base currency.
    pub cost: Decimal,
}

/// What a piece of a disposal took from a position: a lot's share, or
/// under `average` (and for shorts) the pool's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    pub lot: Option<LotId>,
    pub open_date: Option<NaiveDate>,
    pub quantity: Decimal,
    pub cost: Decimal,
}

/// Whether a realization was held long enough to be long-term.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Term {
    Short,
    Long,
}

impl Term {
    pub fn as_str(self) -> &'static str {
        match self {
            Term::Short => "short",
            Term::Long => "long",
        }
    }
}

/// The term of a disposal on `disposal` of a lot opened on `open`: long
/// when it is after the first anniversary (the same month and day a year
/// later; 29 February's is 28 February).
pub fn term(open: NaiveDate, disposal: NaiveDate) -> Term {
    let year = open.year() + 1;
    let anniversary = NaiveDate::from_ymd_opt(year, open.month(), open.day())
        .or_else(|| NaiveDate::from_ymd_opt(year, open.month(), open.day() - 1))
        .unwrap_or(NaiveDate::MAX);
    if disposal > anniversary {
        Term::Long
    } else {
        Term::Short
    }
}

/// What a realization was (docs/valuation.md, the realized answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RealizationKind {
    Sale,
    Cover,
    Expiry,
    Exercise,
    Assignment,
    Merger,
    ReturnOfCapital,
    Redemption,
    VariationMargin,
    Fee,
}

impl RealizationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RealizationKind::Sale => "sale",
            RealizationKind::Cover => "cover",
            RealizationKind::Expiry => "expiry",
            RealizationKind::Exercise => "exercise",
            RealizationKind::Assignment => "assignment",
            RealizationKind::Merger => "merger",
            RealizationKind::ReturnOfCapital => "return_of_capital",
            RealizationKind::Redemption => "redemption",
            RealizationKind::VariationMargin => "variation_margin",
            RealizationKind::Fee => "fee",
        }
    }
}

/// One piece of realized P&L: a lot's share of a disposal, or one
/// realization without lots. `proceeds − cost` is what it added to the
/// realized P&L, in the base currency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Realization {
    pub date: NaiveDate,
    /// The event that realized it; `None` for what the day's end does on
    /// its own (an expiry, a future's variation margin, an automatic
    /// exercise, a redemption).
    pub event_id: Option<Uuid>,
    pub kind: RealizationKind,
    pub symbol: Symbol,
    pub lot: Option<LotId>,
    pub open_date: Option<NaiveDate>,
    /// Units disposed (≥ 0); a variation margin's row carries the signed
    /// position instead.
    pub quantity: Decimal,
    pub proceeds: Decimal,
    pub cost: Decimal,
}

impl Realization {
    /// proceeds − cost.
    pub fn gain(&self) -> Result<Decimal, ArithmeticError> {
        dec::sub(self.proceeds, self.cost)
    }

    /// The holding term; `None` without an open date.
    pub fn term(&self) -> Option<Term> {
        self.open_date.map(|o| term(o, self.date))
    }
}

/// Inserts `lot` after every lot opened on or before its open date, so
/// that a position's lots stay in open-date order and, within a date, in
/// fold order (the order FIFO and LIFO walk and the lots answer lists).
pub fn insert_lot(lots: &mut Vec<Lot>, lot: Lot) {
    let at = lots.partition_point(|l| l.open_date <= lot.open_date);
    lots.insert(at, lot);
}

/// Σ quantity and Σ cost of `lots`, in their order.
pub fn totals(lots: &[Lot]) -> Result<(Decimal, Decimal), ArithmeticError> {
    let mut q = Decimal::ZERO;
    let mut c = Decimal::ZERO;
    for l in lots {
        q = dec::add(q, l.quantity)?;
        c = dec::add(c, l.cost)?;
    }
    Ok((q, c))
}

/// Takes `quantity` from `lots`: first the `picks` in their order, then
/// by `method`. A lot partly taken keeps cost · remaining / quantity.
/// `Ok(Err(detail))` when a pick names a lot not held or more than it
/// holds, or the lots hold less than `quantity` (`lots` is then
/// untouched).
pub fn take(
    lots: &mut Vec<Lot>,
    quantity: Decimal,
    method: LotMethod,
    picks: &[LotPick],
) -> Result<Result<Vec<Taken>, String>, ArithmeticError> {
    let mut want: Vec<(usize, Decimal)> = Vec::new();
    let mut left = quantity;
    for pick in picks {
        let Some(i) = lots.iter().position(|l| l.lot.as_ref() == Some(&pick.lot)) else {
            return Ok(Err(format!("lot {} is not held", pick.lot)));
        };
        let already: Decimal = want.iter().filter(|(j, _)| *j == i).map(|(_, q)| *q).sum();
        if dec::add(already, pick.quantity)? > lots[i].quantity {
            return Ok(Err(format!(
                "lot {} holds {}, less than the {} named",
                pick.lot,
                lots[i].quantity.normalize(),
                dec::add(already, pick.quantity)?.normalize()
            )));
        }
        let q = pick.quantity.min(left);
        if q > Decimal::ZERO {
            want.push((i, q));
            left = dec::sub(left, q)?;
        }
    }
    if left > Decimal::ZERO {
        for i in order(lots, method)? {
            if left.is_zero() {
                break;
            }
            let named: Decimal = want.iter().filter(|(j, _)| *j == i).map(|(_, q)| *q).sum();
            let free = dec::sub(lots[i].quantity, named)?;
            let q = free.min(left);
            if q > Decimal::ZERO {
                want.push((i, q));
                left = dec::sub(left, q)?;
            }
        }
    }
    if left > Decimal::ZERO {
        return Ok(Err(format!(
            "the lots hold {} less than the {} taken",
            left.normalize(),
            quantity.normalize()
        )));
    }
    let mut taken = Vec::with_capacity(want.len());
    for (i, q) in want {
        let l = &mut lots[i];
        let remaining = dec::sub(l.quantity, q)?;
        let kept = if remaining.is_zero() {
            Decimal::ZERO
        } else {
            dec::div(dec::mul(l.cost, remaining)?, l.quantity)?
        };
        taken.push(Taken {
            lot: l.lot.clone(),
            open_date: Some(l.open_date),
            quantity: q,
            cost: dec::sub(l.cost, kept)?,
        });
        l.quantity = remaining;
        l.cost = kept;
    }
    lots.retain(|l| !l.quantity.is_zero());
    Ok(Ok(taken))
}

/// The order `method` takes `lots` in (which are in open-date, then fold
/// order): FIFO as they stand, LIFO reversed, HIFO by cost per unit
/// (highest first), then as FIFO.
fn order(lots: &[Lot], method: LotMethod) -> Result<Vec<usize>, ArithmeticError> {
    let mut idx: Vec<usize> = (0..lots.len()).collect();
    match method {
        LotMethod::Average | LotMethod::Fifo => {}
        LotMethod::Lifo => idx.reverse(),
        LotMethod::Hifo => {
            let mut err = None;
            idx.sort_by(|&a, &b| match unit_cost_cmp(&lots[b], &lots[a]) {
                Ok(o) => o.then(a.cmp(&b)),
                Err(e) => {
                    err = Some(e);
                    Ordering::Equal
                }
            });
            if let Some(e) = err {
                return Err(e);
            }
        }
    }
    Ok(idx)
}

/// a's cost per unit against b's, exactly: a.cost · b.qty against
/// b.cost · a.qty while the products fit, else the quotients.
fn unit_cost_cmp(a: &Lot, b: &Lot) -> Result<Ordering, ArithmeticError> {
    match (
        a.cost.checked_mul(b.quantity),
        b.cost.checked_mul(a.quantity),
    ) {
        (Some(x), Some(y)) if x.scale() < 28 && y.scale() < 28 => Ok(x.cmp(&y)),
        _ => Ok(dec::div(a.cost, a.quantity)?.cmp(&dec::div(b.cost, b.quantity)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! dec {
        ($x:literal) => {
            Decimal::from($x)
        };
    }

    fn id_of(l: Option<&LotId>) -> u128 {
        match l {
            Some(LotId::Event(u)) => u.as_u128(),
            other => panic!("{other:?}"),
        }
    }

    fn d(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    fn lot(n: u128, open: &str, q: Decimal, c: Decimal) -> Lot {
        Lot {
            lot: Some(LotId::Event(Uuid::from_u128(n))),
            open_date: d(open),
            quantity: q,
            cost: c,
        }
    }

    #[test]
    fn the_anniversary_itself_is_short_term_and_29_february_has_28_february() {
        assert_eq!(term(d("2023-03-15"), d("2024-03-15")), Term::Short);
        assert_eq!(term(d("2023-03-15"), d("2024-03-16")), Term::Long);
        assert_eq!(term(d("2024-02-29"), d("2025-02-28")), Term::Short);
        assert_eq!(term(d("2024-02-29"), d("2025-03-01")), Term::Long);
        assert_eq!(term(d("2024-02-29"), d("2024-02-29")), Term::Short);
    }

    #[test]
    fn each_method_takes_in_its_order_and_a_partial_lot_keeps_its_share() {
        let lots = vec![
            lot(1, "2023-01-10", dec!(10), dec!(1000)),
            lot(2, "2023-06-01", dec!(10), dec!(1200)),
            lot(3, "2024-02-01", dec!(10), dec!(900)),
        ];
        for (method, first, second) in [
            (LotMethod::Fifo, 1, 2),
            (LotMethod::Lifo, 3, 2),
            (LotMethod::Hifo, 2, 1),
        ] {
            let mut l = lots.clone();
            let taken = take(&mut l, dec!(15), method, &[]).unwrap().unwrap();
            let ids: Vec<_> = taken.iter().map(|t| id_of(t.lot.as_ref())).collect();
            assert_eq!(ids, [first, second], "{method:?}");
            assert_eq!(taken[1].quantity, dec!(5));
            let (q, _) = totals(&l).unwrap();
            assert_eq!(q, dec!(15));
        }
        let mut l = lots.clone();
        let taken = take(&mut l, dec!(4), LotMethod::Fifo, &[])
            .unwrap()
            .unwrap();
        assert_eq!(taken[0].cost, dec!(400));
        assert_eq!(l[0].cost, dec!(600));
        assert_eq!(l[0].quantity, dec!(6));
    }

    #[test]
    fn hifo_ties_go_to_the_earliest_open_date_then_fold_order() {
        let mut l = vec![
            lot(1, "2023-01-10", dec!(3), dec!(30)),
            lot(2, "2023-01-10", dec!(1), dec!(10)),
            lot(3, "2022-01-10", dec!(2), dec!(20)),
        ];
        l.sort_by_key(|l| l.open_date);
        let taken = take(&mut l, dec!(6), LotMethod::Hifo, &[])
            .unwrap()
            .unwrap();
        let ids: Vec<_> = taken.iter().map(|t| id_of(t.lot.as_ref())).collect();
        assert_eq!(ids, [3, 1, 2]);
    }

    #[test]
    fn picks_come_first_and_a_bad_pick_leaves_the_lots_untouched() {
        let lots = vec![
            lot(1, "2024-01-02", dec!(10), dec!(200)),
            lot(2, "2024-02-01", dec!(10), dec!(250)),
        ];
        let mut l = lots.clone();
        let pick = LotPick {
            lot: LotId::Event(Uuid::from_u128(2)),
            quantity: dec!(8),
        };
        let taken = take(
            &mut l,
            dec!(12),
            LotMethod::Fifo,
            std::slice::from_ref(&pick),
        )
        .unwrap()
        .unwrap();
        assert_eq!(id_of(taken[0].lot.as_ref()), 2);
        assert_eq!(taken[0].cost, dec!(200));
        assert_eq!(taken[1].quantity, dec!(4));
        for bad in [
            LotPick {
                lot: LotId::Event(Uuid::from_u128(9)),
                quantity: dec!(1),
            },
            LotPick {
                lot: LotId::Event(Uuid::from_u128(1)),
                quantity: dec!(11),
            },
        ] {
            let mut l = lots.clone();
            assert!(take(&mut l, dec!(12), LotMethod::Fifo, &[bad])
                .unwrap()
                .is_err());
            assert_eq!(l, lots);
        }
        let mut l = lots.clone();
        assert!(take(&mut l, dec!(21), LotMethod::Fifo, &[])
            .unwrap()
            .is_err());
        assert_eq!(l, lots);
    }

    #[test]
    fn a_lot_is_inserted_after_the_lots_of_its_open_date() {
        let mut l = vec![
            lot(1, "2023-01-10", dec!(1), dec!(1)),
            lot(2, "2023-06-01", dec!(1), dec!(1)),
        ];
        insert_lot(&mut l, lot(3, "2023-01-10", dec!(1), dec!(1)));
        insert_lot(&mut l, lot(4, "2020-01-01", dec!(1), dec!(1)));
        let ids: Vec<_> = l.iter().map(|t| id_of(t.lot.as_ref())).collect();
        assert_eq!(ids, [4, 1, 3, 2]);
    }
}
