#!/usr/bin/env python3
"""Reference pandas implementation of navd's daily NAV curve, for benchmarks.

The benchmark writes a v1 book (one portfolio, buy/sell trades only, no cash
events) to two CSV files and runs this script on them to report
"pandas time / Rust fold time" on the same data. It computes the curve the
way a quant would: vectorised, in float64 (navd itself uses exact decimals,
so the last reported places may differ).

    python3 tools/pandas_nav.py --trades TRADES.csv --closes CLOSES.csv \
        --from YYYY-MM-DD --to YYYY-MM-DD [--runs 5]

TRADES.csv: trade_date,seq,symbol,side,quantity,price[,fee]  (fee optional, 0)
CLOSES.csv: symbol,date,close

Prints one JSON line: runs, median_ms and min_ms (wall time of the
computation only, CSV reading excluded), days, and the last day's record
rounded as navd reports it (money 8 places, ratios 12).
"""

import argparse
import json
import statistics
import time

import numpy as np
import pandas as pd

QTY_DP = 10  # events carry at most 10 decimal places: keeps closed positions at exactly 0


def nav_curve(trades, closes, start, end):
    """Daily records from `start` (the first trade's day) to `end`, inclusive."""
    t = trades[trades.trade_date <= end].sort_values(["trade_date", "seq"], kind="stable")
    if len(t) and t.trade_date.iloc[0] < start:
        raise SystemExit("a trade is dated before --from")
    buy = (t.side == "buy").to_numpy()
    gross = t.quantity * t.price
    t = t.assign(
        dq=np.where(buy, t.quantity, -t.quantity),
        inflow=np.where(buy, gross + t.fee, 0.0),  # buys bring money in at the open
        outflow=np.where(buy, 0.0, gross - t.fee),  # sells take it out at the close
    )

    # A sell of more than is held (checked trade by trade) ends the curve the day before.
    running = t.groupby("symbol").dq.cumsum().round(QTY_DP)
    if (running < 0).any():
        end = min(end, t.trade_date[running < 0].min() - pd.Timedelta(days=1))
    days = pd.date_range(start, end, freq="D", name="date")

    by_day = t.groupby(["trade_date", "symbol"])
    qty = (by_day.dq.sum().unstack(fill_value=0.0)
           .reindex(days, fill_value=0.0).cumsum().round(QTY_DP))

    # Price: the latest close on or before the day, else the latest trade price.
    close = closes.pivot(index="date", columns="symbol", values="close")
    close = close.reindex(close.index.union(days)).ffill().reindex(index=days, columns=qty.columns)
    last_trade = by_day.price.last().unstack().reindex(days).ffill()
    value = (qty * close.fillna(last_trade)).sum(axis=1)  # NaN only where nothing was ever held

    flows = t.groupby("trade_date")[["inflow", "outflow"]].sum().reindex(days, fill_value=0.0)
    prev = value.shift(1, fill_value=0.0)
    num = value + flows.outflow
    den = prev + flows.inflow
    # r = 0 with no capital at work, or when nothing was held all day.
    flat = (den <= 0) | ((prev == 0) & (num == 0))
    r = np.divide(num, den, out=np.ones(len(days)), where=~flat.to_numpy()) - 1.0
    nav = np.cumprod(1.0 + r)
    return pd.DataFrame({"market_value": value, "daily_return": r, "net_value": nav}, index=days)


def fixed(x, places):
    s = f"{x:.{places}f}"
    return s[1:] if s.startswith("-") and float(s) == 0 else s  # no "-0.000…"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trades", required=True)
    p.add_argument("--closes", required=True)
    p.add_argument("--from", dest="start", required=True)
    p.add_argument("--to", dest="end", required=True)
    p.add_argument("--runs", type=int, default=5)
    a = p.parse_args()

    trades = pd.read_csv(a.trades, parse_dates=["trade_date"])
    if "fee" not in trades:
        trades["fee"] = 0.0
    trades[["quantity", "price", "fee"]] = trades[["quantity", "price", "fee"]].astype("float64")
    closes = (pd.read_csv(a.closes, parse_dates=["date"])
              .drop_duplicates(["symbol", "date"], keep="last"))  # a later close replaces
    start, end = pd.Timestamp(a.start), pd.Timestamp(a.end)

    times = []
    for _ in range(a.runs):
        t0 = time.perf_counter()
        curve = nav_curve(trades, closes, start, end)
        times.append((time.perf_counter() - t0) * 1000.0)

    out = {"runs": a.runs, "median_ms": round(statistics.median(times), 3),
           "min_ms": round(min(times), 3), "days": len(curve), "last": None}
    if len(curve):
        d, last = curve.index[-1], curve.iloc[-1]
        out["last"] = {"date": d.strftime("%Y-%m-%d"),
                       "net_value": fixed(last.net_value, 12),
                       "market_value": fixed(last.market_value, 8),
                       "daily_return": fixed(last.daily_return, 12)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
