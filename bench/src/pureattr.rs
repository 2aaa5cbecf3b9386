//! The pure attribution, timed without I/O: `projections::attribute` of
//! the ten-year book on the inputs [`purefold`](crate::purefold) builds
//! from the events sent — what the attribution read costs navd's CPU
//! before storage and HTTP, and what `corrections`' HTTP figure should be
//! compared with.

use std::time::Instant;

use anyhow::{anyhow, Result};
use chrono::NaiveDate;

use crate::procfs::thread_cpu;
use crate::purefold::{FoldInputs, FoldTiming};
use crate::report::{ms, Dist};

/// Attributes `inputs` from each of `froms` (in turn, `runs` times over)
/// through `to`, as the HTTP read does for each of its ranges: the median
/// times, and the components of the last answer.
pub(crate) fn time_attribution(
    inputs: &FoldInputs,
    froms: &[NaiveDate],
    to: NaiveDate,
    runs: usize,
) -> Result<(FoldTiming, usize)> {
    let (mut times, mut cpu) = (Vec::new(), Vec::new());
    let mut components = 0;
    for k in 0..runs.max(1) {
        let from = froms[k % froms.len().max(1)];
        let (t, c) = (Instant::now(), thread_cpu());
        let a = projections::attribute(&inputs.transactions, &inputs.prices, from, to)
            .map_err(|e| anyhow!("the pure attribution failed: {e}"))?
            .map_err(|i| anyhow!("the pure attribution found the book inconsistent: {i:?}"))?
            .ok_or_else(|| anyhow!("no record between {from} and {to}"))?;
        times.push(ms(t.elapsed()));
        cpu.push(ms(thread_cpu() - c));
        components = a.components.len();
    }
    let timing = FoldTiming {
        wall_ms: Dist::of(times).p50,
        cpu_ms: Dist::of(cpu).p50,
    };
    Ok((timing, components))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use navd_testkit::book::{Book, BookSpec};

    use super::*;
    use crate::purefold::SentEvents;

    /// The `corrections` scenario's ten-year book (seed 42), attributed
    /// from early weekdays to the last, as its HTTP figure asks: run with
    /// `cargo test --release -p navd-bench pureattr -- --ignored
    /// --nocapture` (also the harness to profile under `perf`; set
    /// `NAVD_ATTR_RUNS` for more runs).
    #[test]
    #[ignore = "the ten-year book: seconds in release, minutes in debug"]
    fn ten_year_attribution() {
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
        let book = Book::generate(spec.clone(), 42, crate::pinned::TODAY.parse().unwrap());
        let last = *book.weekdays.last().unwrap();
        let sent = SentEvents::of_book(&book, &BTreeSet::from([0]), &[], &[]).unwrap();
        let inputs = sent.inputs(&book.portfolio(0), last).unwrap();
        let froms: Vec<NaiveDate> = (1..24).map(|k| book.weekdays[k]).collect();
        let runs = std::env::var("NAVD_ATTR_RUNS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(21);
        let (t, components) = time_attribution(&inputs, &froms, last, runs).unwrap();
        println!(
            "pure attribution of the 10-year book ({components} components): median {:.1} ms (thread CPU {:.1} ms)",
            t.wall_ms, t.cpu_ms
        );
        assert!(components > 0);
        // The walk alone (fold, taps, values), without the linking.
        let mut walk_cpu = Vec::new();
        for from in &froms {
            let c = thread_cpu();
            projections::walk_components(&inputs.transactions, &inputs.prices, *from, last, |_| {
                Ok(())
            })
            .unwrap()
            .unwrap();
            walk_cpu.push(ms(thread_cpu() - c));
        }
        let fold_cpu: Vec<f64> = (0..froms.len())
            .map(|_| {
                let c = thread_cpu();
                projections::fold(&inputs.transactions, &inputs.prices, last).unwrap();
                ms(thread_cpu() - c)
            })
            .collect();
        // As the service walks it: the stored log in chunks of 1,024 in
        // the key's order, as `stream_transactions` hands them over.
        let mut stored: Vec<projections::Transaction> =
            projections::effective(&inputs.transactions);
        stored.sort_by_key(|t| (t.trade_date, t.seq));
        let chunked_cpu: Vec<f64> = froms
            .iter()
            .map(|from| {
                let chunks: Vec<Vec<projections::Transaction>> =
                    stored.chunks(1024).map(<[_]>::to_vec).collect();
                let start = projections::DayState::initial_for(
                    stored[0].trade_date,
                    projections::cash_mode_of(&stored),
                    projections::base_currency_of(&stored),
                );
                let c = thread_cpu();
                projections::attribute_of(start, chunks.into_iter(), &inputs.prices, *from, last)
                    .unwrap()
                    .unwrap()
                    .unwrap();
                ms(thread_cpu() - c)
            })
            .collect();
        println!(
            "of which the walk (thread CPU) {:.1} ms; the plain fold {:.1} ms; chunked as the service reads it {:.1} ms",
            Dist::of(walk_cpu).p50,
            Dist::of(fold_cpu).p50,
            Dist::of(chunked_cpu).p50
        );
        // NAVD_ATTR_DUMP=file: every decimal of a few ranges' answers, to
        // compare two builds digit for digit.
        if let Ok(path) = std::env::var("NAVD_ATTR_DUMP") {
            std::fs::write(path, answers(&book, spec, &inputs)).unwrap();
        }
    }

    /// A few ranges' answers of `book` (`inputs`) and of the v2 book of
    /// the same spec (cash, fees, dividends, splits, EUR holdings), every
    /// decimal written out.
    fn answers(book: &Book, spec: BookSpec, inputs: &FoldInputs) -> String {
        let last = *book.weekdays.last().unwrap();
        let n = book.weekdays.len();
        let mut out = String::new();
        for from in [
            book.weekdays[0],
            book.weekdays[1],
            book.weekdays[n / 3],
            last,
        ] {
            for to in [book.weekdays[n / 2], last] {
                let a = projections::attribute(&inputs.transactions, &inputs.prices, from, to);
                out.push_str(&format!("{from} {to}: {a:?}\n"));
            }
        }
        let spec = BookSpec {
            tag: 5,
            portfolio_prefix: "v2-",
            symbol_prefix: "W",
            ..spec
        };
        let v2 = Book::generate(spec, 42, crate::pinned::TODAY.parse().unwrap());
        let sent = SentEvents::of_v2(&v2.v2_events()).unwrap();
        let inputs = sent.inputs(&v2.portfolio(0), last).unwrap();
        for from in [v2.weekdays[0], v2.weekdays[1], v2.weekdays[n / 3], last] {
            for to in [v2.weekdays[n / 2], last] {
                let a = projections::attribute(&inputs.transactions, &inputs.prices, from, to);
                out.push_str(&format!("v2 {from} {to}: {a:?}\n"));
            }
        }
        out
    }
}
