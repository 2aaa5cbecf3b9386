//! The book of the bench's `scale` scenario: many small portfolios — each
//! a cash account with one deposit and ten buys of ten symbols over one
//! year — beside a close of every symbol every weekday. Deterministic from
//! a seed, and memory-lean: a portfolio's events are never stored but
//! derived again from a generator seeded by the portfolio's number
//! ([`ScaleBook::plan`]), so 100,000 portfolios hold ~5 MB (a day index of
//! 4 bytes an event, and the closes) instead of their 1.2 M payloads.

use chrono::{Datelike, Duration as Days, NaiveDate, Weekday};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::book::{cents, event_id};

/// Positions a portfolio ends with: one buy of each of that many symbols.
pub const POSITIONS: usize = 10;
/// Events of one portfolio: its settings (cash tracked), its deposit, its
/// buys.
pub const EVENTS_PER_PORTFOLIO: usize = 2 + POSITIONS;
/// What the deposit brings in: more than ten buys of at most 100 shares at
/// a few hundred can spend, so the cash never goes negative.
const DEPOSIT: &str = "500000";

/// What to generate.
#[derive(Debug, Clone)]
pub struct ScaleSpec {
    /// Event-id namespace, so books never share ids.
    pub tag: u32,
    pub portfolio_prefix: &'static str,
    pub portfolios: usize,
    pub symbol_prefix: &'static str,
    /// At least [`POSITIONS`]; each portfolio buys [`POSITIONS`] of them.
    pub symbols: usize,
    /// Calendar days of history ending today (today included).
    pub days: i64,
}

/// One portfolio's buys, in the order they happen (by weekday, then by
/// rank within the day).
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Weekday index of each buy, ascending.
    pub days: [u16; POSITIONS],
    /// The symbols, all different.
    pub symbols: [u16; POSITIONS],
    pub qty: [u16; POSITIONS],
    pub price_cents: [u32; POSITIONS],
}

/// Which topic an event goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    Transactions,
    Prices,
}

/// One event of the stream, as [`ScaleBook::for_each_event`] hands it out.
#[derive(Debug)]
pub struct Event<'a> {
    /// Weekday index it belongs to.
    pub day: usize,
    pub topic: Topic,
    pub key: &'a str,
    pub payload: &'a str,
}

#[derive(Debug)]
pub struct ScaleBook {
    pub spec: ScaleSpec,
    pub seed: u64,
    pub today: NaiveDate,
    /// The weekdays of the window, today included when it is one.
    pub weekdays: Vec<NaiveDate>,
    /// `closes[symbol * weekdays + day]` in cents.
    closes: Vec<u32>,
    /// The transactions in production order as `portfolio << 4 | k` (`k`:
    /// 0 settings, 1 deposit, 2.. the buys): a counting sort by weekday, so
    /// within a day by portfolio, then by `k`. Entries of day `d` are
    /// `order[day_start[d]..day_start[d + 1]]`.
    order: Vec<u32>,
    day_start: Vec<u32>,
}

impl ScaleBook {
    pub fn generate(spec: ScaleSpec, seed: u64, today: NaiveDate) -> ScaleBook {
        assert!(spec.symbols >= POSITIONS && spec.symbols <= usize::from(u16::MAX));
        assert!(spec.portfolios < 1 << 28, "portfolio numbers take 28 bits");
        let weekdays = weekdays_through(today, spec.days);
        assert!(!weekdays.is_empty() && weekdays.len() <= usize::from(u16::MAX));
        let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(spec.tag) << 32) ^ 0xc105e);
        let closes = random_closes(&mut rng, spec.symbols, weekdays.len());
        let mut book = ScaleBook {
            spec,
            seed,
            today,
            weekdays,
            closes,
            order: Vec::new(),
            day_start: Vec::new(),
        };
        book.index();
        book
    }

    /// Builds the day index: counts each weekday's events, then fills them
    /// in portfolio order (two passes over the plans rather than a sort of
    /// wider keys, so the index stays at 4 bytes an event).
    fn index(&mut self) {
        let days = self.weekdays.len();
        let mut count = vec![0u32; days + 1];
        for p in 0..self.spec.portfolios as u32 {
            count[0] += 2;
            for d in self.plan(p).days {
                count[usize::from(d)] += 1;
            }
        }
        let mut start = vec![0u32; days + 1];
        for d in 0..days {
            start[d + 1] = start[d] + count[d];
        }
        let mut next = start.clone();
        let mut order = vec![0u32; self.events()];
        for p in 0..self.spec.portfolios as u32 {
            let plan = self.plan(p);
            for k in 0..EVENTS_PER_PORTFOLIO {
                let d = if k < 2 {
                    0
                } else {
                    usize::from(plan.days[k - 2])
                };
                order[next[d] as usize] = p << 4 | k as u32;
                next[d] += 1;
            }
        }
        self.order = order;
        self.day_start = start;
    }

    /// Transactions of the book.
    pub fn events(&self) -> usize {
        self.spec.portfolios * EVENTS_PER_PORTFOLIO
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
        format!("{}{s:04}", self.spec.symbol_prefix)
    }

    fn close(&self, symbol: usize, day: usize) -> u32 {
        self.closes[symbol * self.weekdays.len() + day]
    }

    /// Portfolio `p`'s buys, from a generator of its own: the same for one
    /// seed whichever portfolios are asked for, and in whatever order.
    pub fn plan(&self, p: u32) -> Plan {
        let mut rng = StdRng::seed_from_u64(
            self.seed ^ (u64::from(self.spec.tag) << 40) ^ (u64::from(p) << 1 | 1),
        );
        let weekdays = self.weekdays.len();
        let mut plan = Plan {
            days: [0; POSITIONS],
            symbols: [0; POSITIONS],
            qty: [0; POSITIONS],
            price_cents: [0; POSITIONS],
        };
        for (slot, s) in rand::seq::index::sample(&mut rng, self.spec.symbols, POSITIONS)
            .into_iter()
            .enumerate()
        {
            plan.symbols[slot] = s as u16;
        }
        for d in &mut plan.days {
            *d = rng.gen_range(0..weekdays) as u16;
        }
        plan.days.sort_unstable();
        for i in 0..POSITIONS {
            plan.qty[i] = rng.gen_range(1..=100);
            let close = self.close(usize::from(plan.symbols[i]), usize::from(plan.days[i]));
            plan.price_cents[i] = (f64::from(close) * rng.gen_range(0.995..1.005))
                .round()
                .max(1.0) as u32;
        }
        plan
    }

    /// (key, payload) of portfolio `p`'s event `k` (0 settings, 1 deposit,
    /// 2.. its buys in order), from its `plan`.
    pub fn transaction(&self, p: u32, plan: &Plan, k: usize) -> (String, String) {
        let pid = self.portfolio(p);
        let id = event_id(self.spec.tag, u64::from(p) << 4 | k as u64);
        let first = self.weekdays[0];
        let json = match k {
            0 => format!(
                r#"{{"event_id":"{id}","type":"portfolio_settings","portfolio_id":"{pid}","cash":"tracked","schema_version":2}}"#
            ),
            1 => format!(
                r#"{{"event_id":"{id}","type":"deposit","portfolio_id":"{pid}","amount":"{DEPOSIT}","trade_date":"{first}","occurred_at":"{first}T08:00:00Z","schema_version":2}}"#
            ),
            _ => {
                let i = k - 2;
                let d = self.weekdays[usize::from(plan.days[i])];
                // Buys of one day keep their order: a second apart.
                format!(
                    r#"{{"event_id":"{id}","type":"buy","portfolio_id":"{pid}","symbol":"{}","quantity":"{}","price":"{}","fee":"1.00","trade_date":"{d}","occurred_at":"{d}T14:00:{i:02}Z","schema_version":2}}"#,
                    self.symbol(plan.symbols[i]),
                    plan.qty[i],
                    cents(u64::from(plan.price_cents[i])),
                )
            }
        };
        (pid, json)
    }

    pub fn close_event(&self, symbol: usize, day: usize) -> (String, String) {
        let s = self.symbol(symbol as u16);
        let json = format!(
            r#"{{"symbol":"{s}","date":"{}","close":"{}"}}"#,
            self.weekdays[day],
            cents(u64::from(self.close(symbol, day)))
        );
        (s, json)
    }

    /// A close dated `date` (after the book), 1 % up from the last one.
    pub fn close_on(&self, symbol: usize, date: NaiveDate) -> (String, Vec<u8>) {
        let s = self.symbol(symbol as u16);
        let last = u64::from(self.close(symbol, self.weekdays.len() - 1));
        let json = format!(
            r#"{{"symbol":"{s}","date":"{date}","close":"{}"}}"#,
            cents(last + last / 100)
        );
        (s, json.into_bytes())
    }

    /// Every event in the order a platform would emit them: day by day, the
    /// day's transactions, then its closes. Stops at `f`'s first error.
    pub fn for_each_event<E>(
        &self,
        mut f: impl FnMut(Event<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        // Consecutive entries of a day are often one portfolio's (its
        // settings, deposit and first buys on day 0): its plan is kept.
        let mut last: Option<(u32, Plan)> = None;
        for day in 0..self.weekdays.len() {
            let (a, b) = (self.day_start[day], self.day_start[day + 1]);
            for &e in &self.order[a as usize..b as usize] {
                let (p, k) = (e >> 4, (e & 0xf) as usize);
                let plan = match last {
                    Some((q, plan)) if q == p => plan,
                    _ => {
                        let plan = self.plan(p);
                        last = Some((p, plan));
                        plan
                    }
                };
                let (key, payload) = self.transaction(p, &plan, k);
                f(Event {
                    day,
                    topic: Topic::Transactions,
                    key: &key,
                    payload: &payload,
                })?;
            }
            for s in 0..self.spec.symbols {
                let (key, payload) = self.close_event(s, day);
                f(Event {
                    day,
                    topic: Topic::Prices,
                    key: &key,
                    payload: &payload,
                })?;
            }
        }
        Ok(())
    }
}

/// The weekdays of the `days` calendar days ending `today`, today included.
fn weekdays_through(today: NaiveDate, days: i64) -> Vec<NaiveDate> {
    let start = today - Days::days(days - 1);
    start
        .iter_days()
        .take_while(|d| *d <= today)
        .filter(|d| !matches!(d.weekday(), Weekday::Sat | Weekday::Sun))
        .collect()
}

/// `symbols × weekdays` closes in cents, symbol by symbol: a random start,
/// then a random walk of daily moves (never below 1.00).
fn random_closes(rng: &mut StdRng, symbols: usize, weekdays: usize) -> Vec<u32> {
    let mut out = Vec::with_capacity(symbols * weekdays);
    for _ in 0..symbols {
        let mut px: f64 = rng.gen_range(2_000.0..30_000.0);
        for _ in 0..weekdays {
            px *= 1.0 + rng.gen_range(-0.02..0.0205);
            px = px.max(100.0);
            out.push(px.round() as u32);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(portfolios: usize) -> ScaleSpec {
        ScaleSpec {
            tag: 7,
            portfolio_prefix: "sc-",
            portfolios,
            symbol_prefix: "X",
            symbols: 50,
            days: 365,
        }
    }

    fn today() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 6, 30).expect("date")
    }

    #[test]
    fn the_stream_is_deterministic_ordered_and_complete() {
        let collect = |seed| {
            let book = ScaleBook::generate(spec(40), seed, today());
            let mut out = Vec::new();
            book.for_each_event(|e| {
                out.push((e.day, e.topic, e.key.to_string(), e.payload.to_string()));
                Ok::<_, ()>(())
            })
            .expect("no error");
            (book, out)
        };
        let (book, a) = collect(1);
        assert_eq!(a, collect(1).1, "one seed, one stream");
        assert_ne!(a, collect(2).1, "another seed, another stream");
        assert_eq!(book.weekdays.last(), Some(&today()));
        let tx: Vec<_> = a.iter().filter(|e| e.1 == Topic::Transactions).collect();
        assert_eq!(tx.len(), 40 * EVENTS_PER_PORTFOLIO);
        assert_eq!(a.len() - tx.len(), book.close_count());
        assert!(a.windows(2).all(|w| w[0].0 <= w[1].0), "day by day");
        // Each portfolio: settings, deposit, then ten buys of ten symbols
        // in date order.
        let p = book.portfolio(3);
        let mine: Vec<serde_json::Value> = tx
            .iter()
            .filter(|e| e.2 == p)
            .map(|e| serde_json::from_str(&e.3).expect("JSON"))
            .collect();
        assert_eq!(mine[0]["type"], "portfolio_settings");
        assert_eq!(mine[1]["type"], "deposit");
        let mut symbols: Vec<&str> = mine[2..]
            .iter()
            .map(|v| v["symbol"].as_str().unwrap())
            .collect();
        let dates: Vec<&str> = mine[2..]
            .iter()
            .map(|v| v["trade_date"].as_str().unwrap())
            .collect();
        assert!(dates.windows(2).all(|w| w[0] <= w[1]));
        symbols.sort_unstable();
        symbols.dedup();
        assert_eq!(symbols.len(), POSITIONS);
    }
}
