//! The comparison of `backfill`: the same curve computed by pandas
//! (`tools/pandas_nav.py`, embedded) on the backfill book written as CSV.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Result;
use chrono::NaiveDate;
use navd_testkit::book::{cents, Book};
use serde_json::{json, Value};

/// The same curve in pandas, on the backfill book's trades and closes
/// written as CSV: its timing, its last record, or why it did not run.
pub(crate) fn pandas_curve(
    dir: &Path,
    book: &Book,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Value> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let has_pandas = Command::new(&python)
        .args(["-c", "import pandas"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_pandas {
        return Ok(
            json!({"skipped": format!("{python} with pandas not found (pip install pandas)")}),
        );
    }
    let script = dir.join("pandas_nav.py");
    std::fs::write(&script, include_str!("../../tools/pandas_nav.py"))?;
    let (tp, cp) = (dir.join("pandas-trades.csv"), dir.join("pandas-closes.csv"));
    std::fs::write(&tp, trades_csv(book))?;
    std::fs::write(&cp, closes_csv(book))?;
    let out = Command::new(&python)
        .arg(&script)
        .arg("--trades")
        .arg(&tp)
        .arg("--closes")
        .arg(&cp)
        .args([
            "--from",
            &from.to_string(),
            "--to",
            &to.to_string(),
            "--runs",
            "5",
        ])
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "pandas_nav.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// The first portfolio's trades.
fn trades_csv(book: &Book) -> String {
    let mut trades = String::from("trade_date,seq,symbol,side,quantity,price,fee\n");
    for (i, t) in book.trades.iter().filter(|t| t.portfolio == 0).enumerate() {
        trades.push_str(&format!(
            "{},{i},{},{},{},{},1.00\n",
            book.weekdays[t.day as usize],
            book.symbol(t.symbol),
            if t.sell { "sell" } else { "buy" },
            t.qty,
            cents(t.price_cents)
        ));
    }
    trades
}

/// Every close of the book.
fn closes_csv(book: &Book) -> String {
    let mut closes = String::from("symbol,date,close\n");
    for (s, series) in book.closes.iter().enumerate() {
        for (d, c) in series.iter().enumerate() {
            closes.push_str(&format!(
                "{},{},{}\n",
                book.symbol(s as u16),
                book.weekdays[d],
                cents(*c)
            ));
        }
    }
    closes
}
