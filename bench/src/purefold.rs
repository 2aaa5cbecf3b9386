//! The pure fold, timed without I/O: the `projections` crate's arithmetic
//! alone, the floor under any refresh, backfill or calculate whatever the
//! storage path does. Its inputs are built from the very events the bench
//! sent — parsed with `projections`' own parsers, in log order — and laid
//! out as navd's price cache lays out a portfolio's closes (the symbols
//! its transactions can move, from the close carried into its first day
//! through the last day folded), so no internal of navd is needed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use anyhow::{anyhow, Result};
use chrono::NaiveDate;
use navd_testkit::book::{Book, V2Events};
use projections::{Currency, DailyRecord, FxRate, PriceBook, Split, Symbol, Transaction};
use rust_decimal::Decimal;

use crate::procfs::thread_cpu;
use crate::report::{ms, Dist};

/// One close as sent: day, value, and its currency when not the default.
type Close = (NaiveDate, Decimal, Option<Currency>);

/// Events the bench produced, parsed as navd parses them.
#[derive(Debug, Default)]
pub(crate) struct SentEvents {
    /// In log order; `seq` is the position in it, as navd's log assigns.
    transactions: Vec<Transaction>,
    /// By symbol, in the order sent.
    closes: BTreeMap<Symbol, Vec<Close>>,
    splits: Vec<Split>,
    rates: Vec<FxRate>,
}

/// What one fold of a portfolio takes.
#[derive(Debug)]
pub(crate) struct FoldInputs {
    pub(crate) transactions: Vec<Transaction>,
    pub(crate) prices: PriceBook,
    /// The history's first day (the earliest transaction's).
    pub(crate) first_day: NaiveDate,
}

/// The pure fold's timing: the median wall time of the runs, and the
/// median CPU time of the thread that ran them. They part when another
/// process (PostgreSQL's autovacuum after an ingest, say) shares the two
/// cores: the wall time then includes waiting for a core.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FoldTiming {
    pub(crate) wall_ms: f64,
    pub(crate) cpu_ms: f64,
}

impl SentEvents {
    fn transaction(&mut self, payload: &[u8]) -> Result<()> {
        let mut t = projections::parse_transaction(payload)
            .map_err(|e| anyhow!("a transaction the bench sent does not parse: {e}"))?;
        t.seq = self.transactions.len() as i64 + 1;
        self.transactions.push(t);
        Ok(())
    }

    fn close(&mut self, payload: &[u8]) -> Result<()> {
        let p = projections::parse_price(payload)
            .map_err(|e| anyhow!("a close the bench sent does not parse: {e}"))?;
        self.closes
            .entry(p.symbol)
            .or_default()
            .push((p.date, p.close, p.currency));
        Ok(())
    }

    /// The trades of the portfolios `portfolios` (indices) of a v1 book, in
    /// the order produced, with every close of the book; then `later`
    /// transactions and closes sent after it (today's, of `freshness` and
    /// `price-day`).
    pub(crate) fn of_book(
        book: &Book,
        portfolios: &BTreeSet<u32>,
        later: &[Vec<u8>],
        later_closes: &[Vec<u8>],
    ) -> Result<SentEvents> {
        let mut sent = SentEvents::default();
        for (i, t) in book.trades.iter().enumerate() {
            if portfolios.contains(&t.portfolio) {
                sent.transaction(book.trade_event(i).1.as_bytes())?;
            }
        }
        for payload in later {
            sent.transaction(payload)?;
        }
        for day in 0..book.weekdays.len() {
            for s in 0..book.spec.symbols {
                sent.close(book.close_event(s, day).1.as_bytes())?;
            }
        }
        for payload in later_closes {
            sent.close(payload)?;
        }
        Ok(sent)
    }

    /// Every event of a v2 book.
    pub(crate) fn of_v2(ev: &V2Events) -> Result<SentEvents> {
        let mut sent = SentEvents::default();
        for (_, json) in &ev.transactions {
            sent.transaction(json.as_bytes())?;
        }
        for (_, json) in &ev.prices {
            sent.close(json.as_bytes())?;
        }
        for (_, json) in &ev.corporate_actions {
            let split = projections::parse_split(json.as_bytes())
                .map_err(|e| anyhow!("a split the bench sent does not parse: {e}"))?;
            sent.splits.push(split);
        }
        for (_, json) in &ev.fx {
            let rate = projections::parse_fx(json.as_bytes())
                .map_err(|e| anyhow!("a rate the bench sent does not parse: {e}"))?;
            sent.rates.push(rate);
        }
        Ok(sent)
    }

    /// What navd folds for `portfolio` through `through`: its transactions,
    /// and the price book of the symbols they can move — each symbol's
    /// closes from the one carried into the first day through `through`,
    /// its splits and quoted currencies — with every rate through `through`.
    pub(crate) fn inputs(&self, portfolio: &str, through: NaiveDate) -> Result<FoldInputs> {
        let transactions: Vec<Transaction> = self
            .transactions
            .iter()
            .filter(|t| t.portfolio_id.as_str() == portfolio && t.trade_date <= through)
            .cloned()
            .collect();
        let first_day = transactions
            .iter()
            .map(|t| t.trade_date)
            .min()
            .ok_or_else(|| anyhow!("the bench sent no transaction of {portfolio}"))?;
        let after = first_day.pred_opt().expect("date in range");
        let symbols: BTreeSet<&Symbol> = transactions
            .iter()
            .filter_map(|t| t.kind.position_symbol())
            .collect();
        let mut prices = PriceBook::new();
        for symbol in symbols {
            self.add_symbol(&mut prices, symbol, after, through);
        }
        for rate in self.rates.iter().filter(|r| r.date <= through) {
            prices.insert_rate(rate);
        }
        Ok(FoldInputs {
            transactions,
            prices,
            first_day,
        })
    }

    /// One symbol's closes in `(after, through]` and the one carried into
    /// that window, their currencies, and the symbol's splits.
    fn add_symbol(
        &self,
        prices: &mut PriceBook,
        symbol: &Symbol,
        after: NaiveDate,
        through: NaiveDate,
    ) {
        for split in self.splits.iter().filter(|s| &s.symbol == symbol) {
            prices.apply_split(split);
        }
        let Some(sent) = self.closes.get(symbol) else {
            return;
        };
        // Of two closes for one day the later holds (docs/events.md).
        let mut by_day: BTreeMap<NaiveDate, (Decimal, Option<Currency>)> = BTreeMap::new();
        for (day, close, currency) in sent.iter().filter(|c| c.0 <= through) {
            by_day.insert(*day, (*close, currency.clone()));
        }
        let carried = by_day.range(..=after).next_back().map(|(d, _)| *d);
        let window: Vec<(NaiveDate, &(Decimal, Option<Currency>))> = by_day
            .iter()
            .filter(|(d, _)| carried.is_none_or(|c| **d >= c))
            .map(|(d, v)| (*d, v))
            .collect();
        for (day, (_, currency)) in &window {
            if currency.is_some() {
                prices.quote_in(symbol, *day, currency.clone());
            }
        }
        prices.insert_series(symbol.clone(), window.iter().map(|(d, (c, _))| (*d, *c)));
    }
}

impl FoldInputs {
    /// The same book as a margin account: cash tracked with shorts
    /// allowed and a deposit before the first trade, every fifth symbol
    /// traded with its sides turned (a short that mirrors the long), and
    /// every seventh an equity with a contract multiplier of 10.
    pub(crate) fn as_margin_account(&self) -> Result<FoldInputs> {
        self.as_account(true)
    }

    /// The same book as a cash account (cash tracked, a deposit before the
    /// first trade), with no shorts and no multipliers: what a margin
    /// account's cost is measured against.
    pub(crate) fn as_cash_account(&self) -> Result<FoldInputs> {
        self.as_account(false)
    }

    /// The same book as a futures account: every symbol a future of
    /// multiplier 10, settled daily (docs/contracts.md), in a cash account
    /// that allows shorts. (Measured by `futures_price_day_ratio`.)
    #[cfg(test)]
    pub(crate) fn as_futures_account(&self) -> Result<FoldInputs> {
        let mut account = self.as_account(false)?;
        if let Some(projections::Kind::PortfolioSettings { allow_short, .. }) =
            account.transactions.first_mut().map(|t| &mut t.kind)
        {
            *allow_short = true;
        }
        let currency = account.prices.default_currency().to_string();
        self.describe_each(&mut account, |i, s| {
            format!(
                r#"{{"event_id":"00000000-0000-4000-8ffe-{i:012}","type":"instrument","symbol":"{s}","kind":"future","multiplier":"10","currency":"{currency}","schema_version":2}}"#
            )
        })?;
        Ok(account)
    }

    /// The same book as a cash account under `method` (docs/valuation.md,
    /// lots). (Measured by `fifo_fold_ratio`.)
    #[cfg(test)]
    pub(crate) fn as_lots_account(&self, method: projections::LotMethod) -> Result<FoldInputs> {
        let mut account = self.as_account(false)?;
        if let Some(projections::Kind::PortfolioSettings { lot_method, .. }) =
            account.transactions.first_mut().map(|t| &mut t.kind)
        {
            *lot_method = method;
        }
        Ok(account)
    }

    /// Describes every symbol of the book on the instruments topic of
    /// `account`: `payload(i, symbol)` is the i-th symbol's event.
    #[cfg(test)]
    fn describe_each(
        &self,
        account: &mut FoldInputs,
        payload: impl Fn(usize, &Symbol) -> String,
    ) -> Result<()> {
        let symbols: BTreeSet<&Symbol> = self
            .transactions
            .iter()
            .filter_map(|t| t.kind.position_symbol())
            .collect();
        for (i, s) in symbols.into_iter().enumerate() {
            let instrument = projections::parse_instrument(payload(i, s).as_bytes())
                .map_err(|e| anyhow!("the bench's instrument: {e}"))?;
            account.prices.insert_instrument(&instrument);
        }
        Ok(())
    }

    /// The same book as a bond account: every symbol a bond of face 100
    /// paying 4 % twice a year (30/360), issued before the book and
    /// maturing after it, its prices read as clean prices in percent of
    /// face (docs/contracts.md, bonds). (Measured by
    /// `bond_account_fold_ratio`.)
    #[cfg(test)]
    pub(crate) fn as_bond_account(&self) -> Result<FoldInputs> {
        let mut account = self.as_account(false)?;
        let currency = account.prices.default_currency().to_string();
        self.describe_each(&mut account, |i, s| {
            format!(
                r#"{{"event_id":"00000000-0000-4000-8ffd-{i:012}","type":"instrument","symbol":"{s}","kind":"bond","face":"100","coupon":"0.04","frequency":2,"day_count":"30/360","issue_date":"1990-01-15","maturity":"2090-01-15","currency":"{currency}","schema_version":2}}"#
            )
        })?;
        Ok(account)
    }

    /// A cash account of this book; with `margin`, shorts allowed, every
    /// fifth symbol's sides turned and every seventh with multiplier 10.
    fn as_account(&self, margin: bool) -> Result<FoldInputs> {
        use projections::{CashMode, Kind};
        let symbols: BTreeSet<&Symbol> = self
            .transactions
            .iter()
            .filter_map(|t| t.kind.position_symbol())
            .collect();
        let shorted: BTreeSet<&Symbol> = if margin {
            symbols.iter().copied().step_by(5).collect()
        } else {
            BTreeSet::new()
        };
        let mut prices = self.prices.clone();
        let contracts = symbols
            .iter()
            .enumerate()
            .filter(|(i, _)| margin && i % 7 == 3);
        for (i, s) in contracts {
            let payload = format!(
                r#"{{"event_id":"00000000-0000-4000-8fff-{i:012}","type":"instrument","symbol":"{s}","kind":"equity","multiplier":"10","schema_version":2}}"#
            );
            let instrument = projections::parse_instrument(payload.as_bytes())
                .map_err(|e| anyhow!("the bench's instrument: {e}"))?;
            prices.insert_instrument(&instrument);
        }
        let first = self
            .transactions
            .iter()
            .min_by_key(|t| t.fold_key())
            .ok_or_else(|| anyhow!("an empty book"))?;
        let mut settings = first.clone();
        settings.event_id = uuid::Uuid::from_u128(u128::MAX - 1);
        settings.seq = -2;
        settings.kind = Kind::PortfolioSettings {
            lot_method: Default::default(),
            cash: CashMode::Tracked,
            base_currency: None,
            allow_short: margin,
        };
        let mut deposit = first.clone();
        deposit.event_id = uuid::Uuid::from_u128(u128::MAX - 2);
        deposit.seq = -1;
        deposit.occurred_at = None;
        deposit.kind = Kind::Deposit {
            amount: Decimal::from(1_000_000_000),
        };
        let mut transactions = vec![settings, deposit];
        for t in &self.transactions {
            let mut t = t.clone();
            let turned = match &t.kind {
                Kind::Buy(x) if shorted.contains(&x.symbol) => Some(Kind::Sell(x.clone())),
                Kind::Sell(x) if shorted.contains(&x.symbol) => Some(Kind::Buy(x.clone())),
                _ => None,
            };
            if let Some(k) = turned {
                t.kind = k;
            }
            transactions.push(t);
        }
        Ok(FoldInputs {
            transactions,
            prices,
            first_day: self.first_day,
        })
    }
}

/// Folds `inputs` through `through` `runs` times, each record rounded to
/// its reported places as navd stores it: the median times, and the last
/// record (rounded). An oversell is an error: the inputs are not the book.
pub(crate) fn time_fold(
    inputs: &FoldInputs,
    through: NaiveDate,
    runs: usize,
) -> Result<(FoldTiming, Option<DailyRecord>)> {
    let (mut times, mut cpu) = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..runs.max(1) {
        let (t, c) = (Instant::now(), thread_cpu());
        let out = projections::fold(&inputs.transactions, &inputs.prices, through)
            .map_err(|e| anyhow!("the pure fold failed: {e}"))?;
        let rows: Vec<DailyRecord> = out.records.iter().map(DailyRecord::rounded).collect();
        times.push(ms(t.elapsed()));
        cpu.push(ms(thread_cpu() - c));
        anyhow::ensure!(
            out.inconsistency.is_none(),
            "the pure fold found the book inconsistent: {:?}",
            out.inconsistency
        );
        last = rows.last().cloned();
    }
    let timing = FoldTiming {
        wall_ms: Dist::of(times).p50,
        cpu_ms: Dist::of(cpu).p50,
    };
    Ok((timing, last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use navd_testkit::book::BookSpec;

    /// A small book of `symbols` symbols (a v2 book splits the 21st and
    /// 22nd).
    fn small_book(symbols: usize) -> Book {
        let spec = BookSpec {
            tag: 9,
            portfolio_prefix: "t-",
            portfolios: 3,
            symbol_prefix: "T",
            symbols,
            universe: 4,
            trades_per_portfolio: 300,
            days: 200,
        };
        Book::generate(spec, 7, crate::pinned::TODAY.parse().unwrap())
    }

    /// The margin-account variant folds without an inconsistency, holds
    /// shorts, and values a contract at its multiplier.
    #[test]
    fn the_margin_account_variant_holds_shorts() {
        let book = small_book(12);
        let to = book.today.pred_opt().unwrap();
        let sent = SentEvents::of_book(&book, &BTreeSet::from([1]), &[], &[]).unwrap();
        let inputs = sent.inputs(&book.portfolio(1), to).unwrap();
        let margin = inputs.as_margin_account().unwrap();
        let out = projections::fold(&margin.transactions, &margin.prices, to).unwrap();
        assert_eq!(out.inconsistency, None);
        assert!(out
            .records
            .iter()
            .any(|r| r.exposure.short_value < Decimal::ZERO));
        assert!(margin
            .prices
            .instruments()
            .any(|(_, d)| d.multiplier == Decimal::TEN));
    }

    /// The pure fold of the bench's ten-year book (50 symbols, 20,000
    /// trades) against the same book as a margin account, in turns: CPU
    /// medians and their ratio (`cargo test --release -p navd-bench --
    /// --ignored margin_account_fold_ratio --nocapture`).
    #[test]
    #[ignore = "a measurement: run it on purpose, in release"]
    fn margin_account_fold_ratio() {
        let spec = BookSpec {
            tag: 2,
            portfolio_prefix: "bf-",
            portfolios: 1,
            symbol_prefix: "B",
            symbols: 50,
            universe: 50,
            trades_per_portfolio: 20_000,
            days: 3653,
        };
        let book = Book::generate(spec, 42, crate::pinned::TODAY.parse().unwrap());
        let to = book.today.pred_opt().unwrap();
        let sent = SentEvents::of_book(&book, &BTreeSet::from([0]), &[], &[]).unwrap();
        let plain = sent.inputs(&book.portfolio(0), to).unwrap();
        let cash = plain.as_cash_account().unwrap();
        let margin = plain.as_margin_account().unwrap();
        let (mut p, mut c, mut m) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..7 {
            p.push(time_fold(&plain, to, 3).unwrap().0.cpu_ms);
            c.push(time_fold(&cash, to, 3).unwrap().0.cpu_ms);
            m.push(time_fold(&margin, to, 3).unwrap().0.cpu_ms);
        }
        let (p, c, m) = (Dist::of(p).p50, Dist::of(c).p50, Dist::of(m).p50);
        println!(
            "plain {p:.2} ms, cash account {c:.2} ms, margin account {m:.2} ms; margin / cash {:.3}, margin / plain {:.3}",
            m / c,
            m / p
        );
    }

    /// The pure fold of the bench's ten-year book (50 symbols, 20,000
    /// trades) as a cash account under FIFO against the same under
    /// `average`, in turns, and the two lots answers of it (the lots of the
    /// last day, the realizations of the whole history): CPU medians and
    /// the ratio (`cargo test --release -p navd-bench -- --ignored
    /// fifo_fold_ratio --nocapture`).
    #[test]
    #[ignore = "a measurement: run it on purpose, in release"]
    fn fifo_fold_ratio() {
        use projections::LotMethod;
        let spec = BookSpec {
            tag: 2,
            portfolio_prefix: "bf-",
            portfolios: 1,
            symbol_prefix: "B",
            symbols: 50,
            universe: 50,
            trades_per_portfolio: 20_000,
            days: 3653,
        };
        let book = Book::generate(spec, 42, crate::pinned::TODAY.parse().unwrap());
        let to = book.today.pred_opt().unwrap();
        let sent = SentEvents::of_book(&book, &BTreeSet::from([0]), &[], &[]).unwrap();
        let plain = sent.inputs(&book.portfolio(0), to).unwrap();
        let average = plain.as_lots_account(LotMethod::Average).unwrap();
        let fifo = plain.as_lots_account(LotMethod::Fifo).unwrap();
        let (a_last, f_last) = (
            time_fold(&average, to, 1).unwrap().1.unwrap(),
            time_fold(&fifo, to, 1).unwrap().1.unwrap(),
        );
        assert_eq!(a_last.market_value, f_last.market_value);
        let (mut a, mut f, mut lots, mut realized) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..7 {
            a.push(time_fold(&average, to, 3).unwrap().0.cpu_ms);
            f.push(time_fold(&fifo, to, 3).unwrap().0.cpu_ms);
            let c = thread_cpu();
            let out = projections::fold(&fifo.transactions, &fifo.prices, to).unwrap();
            let rows = projections::open_lots(&out.end_state.unwrap(), &fifo.prices).unwrap();
            assert!(!rows.is_empty());
            lots.push(ms(thread_cpu() - c));
            let c = thread_cpu();
            let walk = projections::realizations(&fifo.transactions, &fifo.prices, to).unwrap();
            let answer = walk
                .answer(walk.first_day.unwrap(), walk.last_day.unwrap())
                .unwrap();
            assert!(!answer.rows.is_empty());
            realized.push(ms(thread_cpu() - c));
        }
        let (a, f) = (Dist::of(a).p50, Dist::of(f).p50);
        let (l, r) = (Dist::of(lots).p50, Dist::of(realized).p50);
        println!(
            "ten-year fold: average {a:.2} ms, fifo {f:.2} ms; fifo / average {:.3}; lots answer {l:.2} ms, realized answer {r:.2} ms",
            f / a
        );
    }

    /// The pure fold of the bench's ten-year book (50 symbols, 20,000
    /// trades) held as 50 bonds against the same book held as 50 equities,
    /// both cash accounts, in turns: CPU medians and their ratio (`cargo
    /// test --release -p navd-bench -- --ignored bond_account_fold_ratio
    /// --nocapture`).
    #[test]
    #[ignore = "a measurement: run it on purpose, in release"]
    fn bond_account_fold_ratio() {
        let spec = BookSpec {
            tag: 2,
            portfolio_prefix: "bf-",
            portfolios: 1,
            symbol_prefix: "B",
            symbols: 50,
            universe: 50,
            trades_per_portfolio: 20_000,
            days: 3653,
        };
        let book = Book::generate(spec, 42, crate::pinned::TODAY.parse().unwrap());
        let to = book.today.pred_opt().unwrap();
        let sent = SentEvents::of_book(&book, &BTreeSet::from([0]), &[], &[]).unwrap();
        let plain = sent.inputs(&book.portfolio(0), to).unwrap();
        let cash = plain.as_cash_account().unwrap();
        let bonds = plain.as_bond_account().unwrap();
        let last = time_fold(&bonds, to, 1).unwrap().1.unwrap();
        assert!(last.exposure.accrued_interest > Decimal::ZERO);
        let (mut c, mut b) = (Vec::new(), Vec::new());
        for _ in 0..7 {
            c.push(time_fold(&cash, to, 3).unwrap().0.cpu_ms);
            b.push(time_fold(&bonds, to, 3).unwrap().0.cpu_ms);
        }
        let (c, b) = (Dist::of(c).p50, Dist::of(b).p50);
        println!(
            "ten-year fold: 50 equities {c:.2} ms, 50 bonds {b:.2} ms; bonds / equities {:.3}",
            b / c
        );
    }

    /// A price day in the pure fold for 1,000 accounts held as futures
    /// against the same accounts held as equities, in turns: each account
    /// resumed from its stored state of the day before with a close of
    /// every symbol dated today (what a refresh of a price day folds).
    /// CPU medians and their ratio (`cargo test --release -p navd-bench --
    /// --ignored futures_price_day_ratio --nocapture`).
    #[test]
    #[ignore = "a measurement: run it on purpose, in release"]
    fn futures_price_day_ratio() {
        let spec = BookSpec {
            tag: 3,
            portfolio_prefix: "fu-",
            portfolios: 1000,
            symbol_prefix: "F",
            symbols: 40,
            universe: 8,
            trades_per_portfolio: 60,
            days: 250,
        };
        let book = Book::generate(spec, 11, crate::pinned::TODAY.parse().unwrap());
        let today = book.today;
        let yesterday = today.pred_opt().unwrap();
        let ids: BTreeSet<u32> = (0..1000).collect();
        let sent = SentEvents::of_book(&book, &ids, &[], &[]).unwrap();
        let closes: Vec<projections::ClosePrice> = (0..40)
            .map(|s| projections::parse_price(&book.today_close(s).1).unwrap())
            .collect();
        // Per account and kind: its inputs with today's closes, and its
        // state at the end of yesterday.
        let prepare = |futures: bool| -> Vec<(FoldInputs, projections::DayState)> {
            (0..1000)
                .map(|p| {
                    let plain = sent.inputs(&book.portfolio(p), yesterday).unwrap();
                    let mut inputs = if futures {
                        plain.as_futures_account().unwrap()
                    } else {
                        plain.as_cash_account().unwrap()
                    };
                    let state = projections::fold(&inputs.transactions, &inputs.prices, yesterday)
                        .unwrap()
                        .end_state
                        .expect("a history");
                    for c in &closes {
                        inputs.prices.insert(c.symbol.clone(), c.date, c.close);
                    }
                    (inputs, state)
                })
                .collect()
        };
        let (equities, futures) = (prepare(false), prepare(true));
        let day = |accounts: &[(FoldInputs, projections::DayState)]| {
            let c = thread_cpu();
            for (inputs, state) in accounts {
                let out = projections::resume(state, &[], &inputs.prices, today).unwrap();
                assert_eq!(out.records.len(), 1);
                assert!(out.inconsistency.is_none(), "{:?}", out.inconsistency);
            }
            ms(thread_cpu() - c)
        };
        let (mut e, mut f) = (Vec::new(), Vec::new());
        for _ in 0..9 {
            e.push(day(&equities));
            f.push(day(&futures));
        }
        let (e, f) = (Dist::of(e).p50, Dist::of(f).p50);
        println!(
            "price day of 1,000 accounts: equities {e:.2} ms, futures {f:.2} ms; futures / equities {:.3}",
            f / e
        );
    }

    /// A v1 and a v2 book fold from the events sent, every day a record.
    #[test]
    fn folds_the_books_it_sent() {
        let book = small_book(12);
        let to = book.today.pred_opt().unwrap();
        let sent = SentEvents::of_book(&book, &BTreeSet::from([1]), &[], &[]).unwrap();
        let inputs = sent.inputs(&book.portfolio(1), to).unwrap();
        assert_eq!(inputs.first_day, book.weekdays[0]);
        let (_, last) = time_fold(&inputs, to, 1).unwrap();
        assert_eq!(last.unwrap().date, to);

        let book = small_book(24);
        let v2 = SentEvents::of_v2(&book.v2_events()).unwrap();
        let inputs = v2.inputs(&book.portfolio(0), to).unwrap();
        let (_, last) = time_fold(&inputs, to, 1).unwrap();
        assert_eq!(last.unwrap().date, to);
    }

    /// Every generated history folds without an oversell, and a seed gives
    /// the same book twice.
    #[test]
    fn books_are_deterministic_and_never_oversell() {
        let a = small_book(12);
        let b = small_book(12);
        assert_eq!(a.trade_event(100), b.trade_event(100));
        let mut held = std::collections::HashMap::new();
        for i in 0..a.trades.len() {
            let t = projections::parse_transaction(a.trade_event(i).1.as_bytes()).unwrap();
            let (side, tr) = t.as_trade().expect("a buy or sell");
            let q = held
                .entry((t.portfolio_id.to_string(), tr.symbol.to_string()))
                .or_insert(Decimal::ZERO);
            if side == projections::Side::Sell {
                assert!(*q >= tr.quantity, "oversell at trade {i}");
                *q -= tr.quantity;
            } else {
                *q += tr.quantity;
            }
        }
        let (_, close) = a.close_event(3, 10);
        projections::parse_price(close.as_bytes()).unwrap();
    }
}
