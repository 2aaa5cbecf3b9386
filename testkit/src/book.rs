//! The one generator of books — portfolios trading symbols, with closes —
//! for the demo, the tests and the benchmark: deterministic from a seed, a
//! random walk of closes every weekday, trades that never sell more than is
//! held, produced in the order a platform would emit them.

use chrono::{Datelike, Duration as Days, NaiveDate, Weekday};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use uuid::Uuid;

/// What to generate: portfolios trading symbols over `days` calendar days
/// ending today (trades and closes on weekdays before today).
#[derive(Debug, Clone)]
pub struct BookSpec {
    /// Event-id namespace, so books never share ids.
    pub tag: u32,
    pub portfolio_prefix: &'static str,
    pub portfolios: usize,
    pub symbol_prefix: &'static str,
    pub symbols: usize,
    /// Symbols one portfolio trades: keeps open positions realistic (≤ this).
    pub universe: usize,
    pub trades_per_portfolio: usize,
    pub days: i64,
}

#[derive(Debug, Clone, Copy)]
pub struct Trade {
    pub day: u32,
    pub portfolio: u32,
    pub symbol: u16,
    pub sell: bool,
    pub qty: u32,
    pub price_cents: u64,
    /// Rank within the portfolio's day: orders the day by `occurred_at`.
    pub nth: u16,
}

#[derive(Debug)]
pub struct Book {
    pub spec: BookSpec,
    pub today: NaiveDate,
    pub weekdays: Vec<NaiveDate>,
    /// `closes[symbol][weekday]` in cents.
    pub closes: Vec<Vec<u64>>,
    pub universes: Vec<Vec<u16>>,
    /// In production order: by day, then portfolio, then generation order.
    pub trades: Vec<Trade>,
}

impl Book {
    /// Random-walk closes every weekday; per portfolio, trades on random
    /// weekdays (the first on the first weekday, so every history spans the
    /// window) that never sell more than is held, in fold order.
    pub fn generate(spec: BookSpec, seed: u64, today: NaiveDate) -> Book {
        let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(spec.tag) << 32));
        let weekdays = weekdays_before(today, spec.days);
        let closes = random_closes(&mut rng, spec.symbols, weekdays.len());
        let mut universes = Vec::with_capacity(spec.portfolios);
        let mut trades = Vec::with_capacity(spec.portfolios * spec.trades_per_portfolio);
        for p in 0..spec.portfolios {
            let universe: Vec<u16> =
                rand::seq::index::sample(&mut rng, spec.symbols, spec.universe.min(spec.symbols))
                    .into_iter()
                    .map(|i| i as u16)
                    .collect();
            let days = trade_days(&mut rng, spec.trades_per_portfolio, weekdays.len());
            portfolio_trades(&mut rng, p as u32, &universe, days, &closes, &mut trades);
            universes.push(universe);
        }
        trades.sort_by_key(|t| t.day); // stable: portfolio order kept
        Book {
            spec,
            today,
            weekdays,
            closes,
            universes,
            trades,
        }
    }

    pub fn close_count(&self) -> usize {
        self.spec.symbols * self.weekdays.len()
    }

    pub fn portfolio(&self, p: u32) -> String {
        let width = self
            .spec
            .portfolios
            .saturating_sub(1)
            .to_string()
            .len()
            .max(3);
        format!("{}{p:0width$}", self.spec.portfolio_prefix)
    }

    pub fn symbol(&self, s: u16) -> String {
        format!("{}{s:03}", self.spec.symbol_prefix)
    }

    /// (key, payload) of the `i`-th trade.
    pub fn trade_event(&self, i: usize) -> (String, String) {
        let t = &self.trades[i];
        let pid = self.portfolio(t.portfolio);
        let d = self.weekdays[t.day as usize];
        let json = format!(
            r#"{{"event_id":"{}","type":"{}","portfolio_id":"{pid}","symbol":"{}","quantity":"{}","price":"{}","fee":"1.00","trade_date":"{d}","occurred_at":"{d}T14:{:02}:{:02}Z"}}"#,
            event_id(self.spec.tag, i as u64),
            if t.sell { "sell" } else { "buy" },
            self.symbol(t.symbol),
            t.qty,
            cents(t.price_cents),
            t.nth / 60,
            t.nth % 60,
        );
        (pid, json)
    }

    pub fn close_event(&self, symbol: usize, day: usize) -> (String, String) {
        let s = self.symbol(symbol as u16);
        let json = format!(
            r#"{{"symbol":"{s}","date":"{}","close":"{}"}}"#,
            self.weekdays[day],
            cents(self.closes[symbol][day])
        );
        (s, json)
    }

    /// A close dated today, 1% up from the last one.
    pub fn today_close(&self, symbol: usize) -> (String, Vec<u8>) {
        self.today_close_at(symbol, 1)
    }

    /// A small buy dated today in a random portfolio (never an oversell).
    pub fn today_trade(&self, rng: &mut StdRng, tag: u32, n: u64) -> (String, Uuid, Vec<u8>) {
        let p = rng.gen_range(0..self.spec.portfolios);
        let universe = &self.universes[p];
        let symbol = universe[rng.gen_range(0..universe.len())];
        let pid = self.portfolio(p as u32);
        let id = event_id(tag, n);
        let price = *self.closes[symbol as usize].last().expect("closes");
        let json = format!(
            r#"{{"event_id":"{id}","type":"buy","portfolio_id":"{pid}","symbol":"{}","quantity":"{}","price":"{}","fee":"1.00","trade_date":"{}"}}"#,
            self.symbol(symbol),
            rng.gen_range(1..=10),
            cents(price),
            self.today,
        );
        (pid, id, json.into_bytes())
    }
}

/// A trade sent again later in the stream with another quantity (an
/// amendment: a new event id, `corrects` = the trade's, revision 1).
#[derive(Debug, Clone, Copy)]
pub struct Amend {
    /// Index of the amended trade in [`Book::trades`].
    pub trade: usize,
    /// The weekday (index) on whose part of the stream it is produced:
    /// after its trade, up to 20 weekdays later.
    pub sent_on: u32,
    /// The quantity as it should have been: a buy's larger, a sell's
    /// smaller, so that no later sell becomes an oversell.
    pub qty: u32,
}

impl Book {
    /// Amendments of `share` of the trades (0.05: one in twenty), chosen
    /// from `seed` with a generator of their own — the book itself is
    /// unchanged — and ordered by the weekday they are sent on. Sells of a
    /// single share cannot be made smaller and are never picked.
    pub fn amends(&self, share: f64, seed: u64) -> Vec<Amend> {
        let mut rng =
            StdRng::seed_from_u64(seed ^ 0x00a3_e0d5_u64 ^ (u64::from(self.spec.tag) << 40));
        let last = self.weekdays.len().saturating_sub(1) as u32;
        let eligible: Vec<usize> = (0..self.trades.len())
            .filter(|&i| !self.trades[i].sell || self.trades[i].qty > 1)
            .collect();
        let n = ((self.trades.len() as f64 * share).round() as usize).min(eligible.len());
        let mut amends: Vec<Amend> = rand::seq::index::sample(&mut rng, eligible.len(), n)
            .into_iter()
            .map(|k| {
                let i = eligible[k];
                let t = &self.trades[i];
                let qty = if t.sell {
                    t.qty - rng.gen_range(1..=t.qty / 2)
                } else {
                    t.qty + rng.gen_range(1..=10)
                };
                let sent_on = (t.day + rng.gen_range(1..=20)).min(last);
                Amend {
                    trade: i,
                    sent_on,
                    qty,
                }
            })
            .collect();
        amends.sort_by_key(|a| (a.sent_on, a.trade));
        amends
    }

    /// (key, payload) of the `n`-th amendment `a`: the trade again as a
    /// version-2 event with its new quantity, a new event id, `corrects`
    /// naming the original and revision 1.
    pub fn amend_event(&self, a: &Amend, n: u64) -> (String, String) {
        let t = &self.trades[a.trade];
        let pid = self.portfolio(t.portfolio);
        let d = self.weekdays[t.day as usize];
        let json = format!(
            r#"{{"event_id":"{}","type":"{}","portfolio_id":"{pid}","symbol":"{}","quantity":"{}","price":"{}","fee":"1.00","trade_date":"{d}","occurred_at":"{d}T14:{:02}:{:02}Z","corrects":"{}","revision":1,"schema_version":2}}"#,
            event_id(self.spec.tag | 0x2000_0000, n),
            if t.sell { "sell" } else { "buy" },
            self.symbol(t.symbol),
            a.qty,
            cents(t.price_cents),
            t.nth / 60,
            t.nth % 60,
            event_id(self.spec.tag, a.trade as u64),
        );
        (pid, json)
    }

    /// A close dated today `pct` percent up from the last one (100 + pct
    /// hundredths): [`Book::today_close`] is `pct` = 1; another `pct` is the
    /// same close restated with another value.
    pub fn today_close_at(&self, symbol: usize, pct: u64) -> (String, Vec<u8>) {
        let s = self.symbol(symbol as u16);
        let last = *self.closes[symbol].last().expect("closes");
        let json = format!(
            r#"{{"symbol":"{s}","date":"{}","close":"{}"}}"#,
            self.today,
            cents(last + last * pct / 100)
        );
        (s, json.into_bytes())
    }
}

/// The weekdays of the `days` calendar days ending `today`, today left out.
fn weekdays_before(today: NaiveDate, days: i64) -> Vec<NaiveDate> {
    let start = today - Days::days(days - 1);
    start
        .iter_days()
        .take_while(|d| *d < today)
        .filter(|d| !matches!(d.weekday(), Weekday::Sat | Weekday::Sun))
        .collect()
}

/// `closes[symbol][weekday]` in cents: per symbol a random start, then a
/// random walk of daily moves (never below 1.00).
fn random_closes(rng: &mut StdRng, symbols: usize, weekdays: usize) -> Vec<Vec<u64>> {
    (0..symbols)
        .map(|_| {
            let mut px: f64 = rng.gen_range(2_000.0..30_000.0);
            (0..weekdays)
                .map(|_| {
                    px *= 1.0 + rng.gen_range(-0.02..0.0205);
                    px = px.max(100.0);
                    px.round() as u64
                })
                .collect()
        })
        .collect()
}

/// The weekdays (indices) of a portfolio's `count` trades, ascending, the
/// first on the first weekday.
fn trade_days(rng: &mut StdRng, count: usize, weekdays: usize) -> Vec<u32> {
    let mut days: Vec<u32> = (0..count)
        .map(|_| rng.gen_range(0..weekdays) as u32)
        .collect();
    days.sort_unstable();
    days[0] = 0;
    days
}

/// The trades of portfolio `p` on `days`, appended to `trades`: each a
/// buy or a sell of what is `held`, priced near the day's close.
fn portfolio_trades(
    rng: &mut StdRng,
    p: u32,
    universe: &[u16],
    days: Vec<u32>,
    closes: &[Vec<u64>],
    trades: &mut Vec<Trade>,
) {
    let mut held = vec![0u32; universe.len()];
    let mut prev_day = u32::MAX;
    let mut nth = 0u16;
    for day in days {
        nth = if day == prev_day { nth + 1 } else { 0 };
        prev_day = day;
        let (u, sell, qty) = buy_or_sell(rng, &mut held);
        let symbol = universe[u];
        let close = closes[symbol as usize][day as usize] as f64;
        let price_cents = (close * rng.gen_range(0.995..1.005)).round().max(1.0) as u64;
        trades.push(Trade {
            day,
            portfolio: p,
            symbol,
            sell,
            qty,
            price_cents,
            nth,
        });
    }
}

/// One trade's (universe index, sell, quantity), `held` updated: 40% of
/// the time, when something is held, a sell of all (30%) or half of one
/// holding; otherwise a buy of 1 to 100.
fn buy_or_sell(rng: &mut StdRng, held: &mut [u32]) -> (usize, bool, u32) {
    let holding: Vec<usize> = (0..held.len()).filter(|&u| held[u] > 0).collect();
    if !holding.is_empty() && rng.gen_bool(0.4) {
        let u = holding[rng.gen_range(0..holding.len())];
        let q = if rng.gen_bool(0.3) {
            held[u]
        } else {
            (held[u] / 2).max(1)
        };
        held[u] -= q;
        (u, true, q)
    } else {
        let u = rng.gen_range(0..held.len());
        let q = rng.gen_range(1..=100);
        held[u] += q;
        (u, false, q)
    }
}

/// Every kind of event of schema version 2 around the trades of a
/// one-portfolio [`Book`], per topic as (key, payload), in the order a
/// platform would emit them.
#[derive(Debug, Default)]
pub struct V2Events {
    pub transactions: Vec<(String, String)>,
    pub prices: Vec<(String, String)>,
    pub corporate_actions: Vec<(String, String)>,
    pub fx: Vec<(String, String)>,
}

impl V2Events {
    pub fn len(&self) -> usize {
        self.transactions.len() + self.prices.len() + self.corporate_actions.len() + self.fx.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Symbols below this index of a v2 book are quoted in EUR.
const V2_FOREIGN: u16 = 10;

impl Book {
    /// The book's first portfolio as a version-2 book: cash tracked from a
    /// first deposit, a deposit and a fee every month, a dividend on every
    /// held symbol every quarter (paid ten weekdays later, every other one
    /// reinvested), two 2-for-1 splits (closes and later trade prices
    /// halved from the ex-date), and the first ten symbols quoted in EUR
    /// with a EUR→USD rate every weekday.
    pub fn v2_events(&self) -> V2Events {
        let days = self.weekdays.len();
        let mut w = V2Writer {
            book: self,
            pid: self.portfolio(0),
            tag: self.spec.tag | 0x4000_0000,
            n: 0,
            splits: [(20u16, days / 3), (21u16, 2 * days / 3)],
        };
        let mut out = V2Events::default();
        w.fx_and_prices(&mut out);
        w.splits(&mut out.corporate_actions);
        w.transactions(&mut out.transactions);
        out
    }
}

/// `,"currency":"EUR"` for the symbols of a v2 book quoted in EUR.
fn v2_currency(s: u16) -> &'static str {
    if s < V2_FOREIGN {
        r#","currency":"EUR""#
    } else {
        ""
    }
}

/// Writes a v2 book: hands out its event ids in order, knows its splits.
struct V2Writer<'a> {
    book: &'a Book,
    pid: String,
    tag: u32,
    /// The last event id handed out.
    n: u64,
    /// (symbol, ex-date weekday) of the 2-for-1 splits.
    splits: [(u16, usize); 2],
}

impl V2Writer<'_> {
    fn id(&mut self) -> Uuid {
        self.n += 1;
        event_id(self.tag, self.n)
    }

    /// What prices of `s` are divided by on weekday `d`: 2 from a split's
    /// ex-date on.
    fn factor(&self, s: u16, d: usize) -> u64 {
        if self.splits.iter().any(|&(x, at)| x == s && d >= at) {
            2
        } else {
            1
        }
    }

    /// Every weekday a EUR→USD rate and a (split-adjusted) close of every
    /// symbol.
    fn fx_and_prices(&self, out: &mut V2Events) {
        let book = self.book;
        for (d, day) in book.weekdays.iter().enumerate() {
            let rate = 1.10 + 0.05 * (d as f64 / 40.0).sin();
            out.fx.push((
                "EUR/USD".into(),
                format!(r#"{{"from":"EUR","to":"USD","date":"{day}","rate":"{rate:.4}"}}"#),
            ));
            for s in 0..book.spec.symbols as u16 {
                let close = book.closes[s as usize][d] / self.factor(s, d);
                out.prices.push((
                    book.symbol(s),
                    format!(
                        r#"{{"symbol":"{}","date":"{day}","close":"{}"{},"schema_version":2}}"#,
                        book.symbol(s),
                        cents(close.max(1)),
                        v2_currency(s)
                    ),
                ));
            }
        }
    }

    fn splits(&mut self, out: &mut Vec<(String, String)>) {
        let book = self.book;
        for (s, at) in self.splits {
            out.push((
                book.symbol(s),
                format!(
                    r#"{{"event_id":"{}","type":"split","symbol":"{}","ex_date":"{}","numerator":2,"denominator":1,"schema_version":2}}"#,
                    self.id(),
                    book.symbol(s),
                    book.weekdays[at]
                ),
            ));
        }
    }

    /// The portfolio's settings and first deposit, then day by day its
    /// trades, monthly deposit and fee, and quarterly dividends.
    fn transactions(&mut self, tx: &mut Vec<(String, String)>) {
        let book = self.book;
        self.opening(tx);
        let mut held = vec![0u64; book.spec.symbols];
        let mut dividends = 0u32;
        let mut trades = book
            .trades
            .iter()
            .enumerate()
            .filter(|(_, t)| t.portfolio == 0)
            .peekable();
        for (d, &day) in book.weekdays.iter().enumerate() {
            for &(s, at) in &self.splits {
                if at == d {
                    held[s as usize] *= 2;
                }
            }
            while let Some((i, t)) = trades.next_if(|(_, t)| t.day as usize == d) {
                self.trade(tx, &mut held, i, t);
            }
            if d % 21 == 20 {
                self.monthly(tx, day);
            }
            if d % 63 == 62 {
                self.dividends(tx, &mut held, &mut dividends, d);
            }
        }
    }

    fn opening(&mut self, tx: &mut Vec<(String, String)>) {
        let first = self.book.weekdays[0];
        let pid = self.pid.clone();
        tx.push((pid.clone(), format!(
            r#"{{"event_id":"{}","type":"portfolio_settings","portfolio_id":"{pid}","trade_date":"{first}","cash":"tracked","occurred_at":"{first}T08:00:00Z","schema_version":2}}"#,
            self.id()
        )));
        tx.push((pid.clone(), format!(
            r#"{{"event_id":"{}","type":"deposit","portfolio_id":"{pid}","amount":"50000000","trade_date":"{first}","occurred_at":"{first}T08:01:00Z","schema_version":2}}"#,
            self.id()
        )));
    }

    /// The book's `i`-th trade `t` (split-adjusted), `held` updated.
    fn trade(&self, tx: &mut Vec<(String, String)>, held: &mut [u64], i: usize, t: &Trade) {
        let book = self.book;
        let pid = &self.pid;
        let d = t.day as usize;
        let day = book.weekdays[d];
        let q = u64::from(t.qty);
        if t.sell {
            held[t.symbol as usize] = held[t.symbol as usize].saturating_sub(q);
        } else {
            held[t.symbol as usize] += q;
        }
        tx.push((pid.clone(), format!(
            r#"{{"event_id":"{}","type":"{}","portfolio_id":"{pid}","symbol":"{}","quantity":"{q}","price":"{}","fee":"1.00"{},"trade_date":"{day}","occurred_at":"{day}T14:{:02}:{:02}Z","schema_version":2}}"#,
            event_id(book.spec.tag, i as u64),
            if t.sell { "sell" } else { "buy" },
            book.symbol(t.symbol),
            cents((t.price_cents / self.factor(t.symbol, d)).max(1)),
            v2_currency(t.symbol),
            t.nth / 60,
            t.nth % 60,
        )));
    }

    /// The monthly deposit and fee, at the end of `day`.
    fn monthly(&mut self, tx: &mut Vec<(String, String)>, day: NaiveDate) {
        let pid = self.pid.clone();
        tx.push((pid.clone(), format!(
            r#"{{"event_id":"{}","type":"deposit","portfolio_id":"{pid}","amount":"1000","trade_date":"{day}","occurred_at":"{day}T20:00:00Z","schema_version":2}}"#,
            self.id()
        )));
        tx.push((pid.clone(), format!(
            r#"{{"event_id":"{}","type":"fee","portfolio_id":"{pid}","amount":"5","trade_date":"{day}","occurred_at":"{day}T20:01:00Z","schema_version":2}}"#,
            self.id()
        )));
    }

    /// A dividend of 0.25 a share (15% tax) on every symbol held on weekday
    /// `d`, paid ten weekdays later; every other one (counted in
    /// `dividends`) reinvested in one share.
    fn dividends(
        &mut self,
        tx: &mut Vec<(String, String)>,
        held: &mut [u64],
        dividends: &mut u32,
        d: usize,
    ) {
        let book = self.book;
        let pid = self.pid.clone();
        let day = book.weekdays[d];
        let pay = book.weekdays[(d + 10).min(book.weekdays.len() - 1)];
        for s in 0..book.spec.symbols as u16 {
            let q = held[s as usize];
            if q == 0 {
                continue;
            }
            *dividends += 1;
            let amount = q * 25; // 0.25 a share, in cents
            let reinvest = if *dividends % 2 == 0 {
                let close = book.closes[s as usize][d] / self.factor(s, d);
                held[s as usize] += 1;
                format!(
                    r#","reinvest":{{"quantity":"1","price":"{}"}}"#,
                    cents(close.max(1))
                )
            } else {
                String::new()
            };
            tx.push((pid.clone(), format!(
                r#"{{"event_id":"{}","type":"dividend","portfolio_id":"{pid}","symbol":"{}","amount":"{}","tax":"{}"{},"trade_date":"{day}","pay_date":"{pay}"{reinvest},"occurred_at":"{day}T21:00:00Z","schema_version":2}}"#,
                self.id(),
                book.symbol(s),
                cents(amount),
                cents(amount * 15 / 100),
                v2_currency(s),
            )));
        }
    }
}

pub fn cents(c: u64) -> String {
    format!("{}.{:02}", c / 100, c % 100)
}

/// A deterministic version-4-shaped UUID: the book's tag and a counter.
pub fn event_id(tag: u32, n: u64) -> Uuid {
    let hi = 0xbe0c_0000_0000_4000_u64 | (u64::from(tag) << 16);
    let lo = 0x8000_0000_0000_0000_u64 | n;
    Uuid::from_u64_pair(hi, lo)
}

/// A small book as JSON events, for the demo and the tests.
#[derive(Debug, Clone)]
pub struct SampleBook {
    /// (key, payload) for the transactions topic, in production order; the
    /// last one is a buy dated months back (a late event).
    pub transactions: Vec<(String, Value)>,
    /// (key, payload) for the prices topic.
    pub prices: Vec<(String, Value)>,
    /// (key, raw payload) of two events that are not valid.
    pub bad: Vec<(String, Vec<u8>)>,
    pub portfolios: Vec<String>,
}

/// `portfolios` portfolios (`demo-000`, …) trading `symbols` symbols
/// (`SYM000`, …) over `days` days ending `today`, about one trade every
/// two weeks each; one buy of the first portfolio dated in the past is
/// moved to the end (it arrives late), and two bad events come along.
pub fn sample_book(
    seed: u64,
    portfolios: usize,
    symbols: usize,
    days: i64,
    today: NaiveDate,
) -> SampleBook {
    let weekdays = days * 5 / 7;
    let book = Book::generate(
        BookSpec {
            tag: 0xd,
            portfolio_prefix: "demo-",
            portfolios,
            symbol_prefix: "SYM",
            symbols,
            universe: symbols.min(8),
            trades_per_portfolio: (weekdays as usize / 12).max(2),
            days,
        },
        seed,
        today,
    );
    let parse = |(key, json): (String, String)| -> (String, Value) {
        (key, serde_json::from_str(&json).expect("generated JSON"))
    };
    let mut transactions: Vec<(String, Value)> = (0..book.trades.len())
        .map(|i| parse(book.trade_event(i)))
        .collect();
    let late = book
        .trades
        .iter()
        .position(|t| t.portfolio == 0 && !t.sell && t.day as usize > book.weekdays.len() / 4);
    if let Some(i) = late {
        let ev = transactions.remove(i);
        transactions.push(ev);
    }
    let mut prices = Vec::with_capacity(book.close_count());
    for day in 0..book.weekdays.len() {
        for s in 0..symbols {
            prices.push(parse(book.close_event(s, day)));
        }
    }
    let first = book.portfolio(0);
    let second = book.portfolio(1.min(portfolios.saturating_sub(1)) as u32);
    let bad = vec![
        (first, b"{not json".to_vec()),
        (
            second.clone(),
            serde_json::to_vec(
                &json!({"event_id": event_id(0xbad, 1).to_string(), "type": "gift",
                "portfolio_id": second, "symbol": book.symbol(0), "quantity": "1", "price": "1",
                "trade_date": today.to_string()}),
            )
            .expect("JSON"),
        ),
    ];
    SampleBook {
        transactions,
        prices,
        bad,
        portfolios: (0..portfolios).map(|p| book.portfolio(p as u32)).collect(),
    }
}
