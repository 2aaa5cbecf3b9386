//! A day of a portfolio's history as the fold produces it
//! ([`DailyRecord`]) and its exposure fields ([`Exposure`]): exact values,
//! and the reported form rounded per docs/valuation.md.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// One day of a portfolio's history (docs/valuation.md). Values produced by the fold
/// are exact; [`DailyRecord::rounded`] gives the reported form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DailyRecord {
    pub date: NaiveDate,
    pub market_value: Decimal,
    pub cost: Decimal,
    pub net_flow: Decimal,
    pub daily_return: Decimal,
    pub net_value: Decimal,
    pub return_rate: Decimal,
    pub profit: Decimal,
    /// Σ qty · price: the securities alone (`market_value` also counts
    /// cash and receivable dividends).
    pub holdings_value: Decimal,
    /// The cash balance; 0 without cash tracking.
    pub cash: Decimal,
    /// Dividends past their ex-date, not yet paid.
    pub receivable: Decimal,
    /// Net dividends (at their ex-dates) and net interest through `date`.
    pub income: Decimal,
    /// Σ over sells of proceeds less the cost they released.
    pub realized_pnl: Decimal,
    /// Σ In and Σ Out over days ≤ `date`: with the market value and the
    /// NAV, what a caller stores to resume the fold after this day. Never
    /// reported, so [`DailyRecord::rounded`] leaves them exact.
    pub cum_in: Decimal,
    pub cum_out: Decimal,
    /// How exposed and levered the day's holdings are (docs/valuation.md,
    /// exposure).
    #[serde(default)]
    pub exposure: Exposure,
}

/// A day's exposure (docs/valuation.md): the holdings split by the sign of
/// their positions, futures at their notional, and leverage.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Exposure {
    /// Σ value of positions with q > 0 (futures excluded).
    pub long_value: Decimal,
    /// Σ value of positions with q < 0 (≤ 0; futures excluded).
    pub short_value: Decimal,
    /// Σ q · S · m · FX over futures, signed.
    pub futures_notional: Decimal,
    /// long − short + Σ |future notional|.
    pub gross_exposure: Decimal,
    /// long + short + futures notional.
    pub net_exposure: Decimal,
    /// gross / V; `None` when V ≤ 0.
    pub leverage: Option<Decimal>,
    /// Σ q · AI · FX over bonds (part of the holdings' value).
    pub accrued_interest: Decimal,
}

impl Exposure {
    /// The exposure of holdings worth `holdings` of which `short_value`
    /// is the shorts' (≤ 0), in a portfolio worth `value`.
    pub fn of(
        holdings: Decimal,
        short_value: Decimal,
        value: Decimal,
    ) -> Result<Exposure, crate::decimal::ArithmeticError> {
        use crate::decimal::sub;
        let long_value = sub(holdings, short_value)?;
        let gross_exposure = sub(long_value, short_value)?;
        let leverage = Exposure::leverage_of(gross_exposure, value)?;
        Ok(Exposure {
            long_value,
            short_value,
            futures_notional: Decimal::ZERO,
            gross_exposure,
            net_exposure: holdings,
            leverage,
            accrued_interest: Decimal::ZERO,
        })
    }

    /// This exposure with futures of notional `net` (signed) and `gross`
    /// (Σ of the absolute values) added, in a portfolio worth `value`.
    pub fn with_futures(
        self,
        net: Decimal,
        gross: Decimal,
        value: Decimal,
    ) -> Result<Exposure, crate::decimal::ArithmeticError> {
        if gross.is_zero() {
            return Ok(self);
        }
        use crate::decimal::add;
        let gross_exposure = add(self.gross_exposure, gross)?;
        Ok(Exposure {
            futures_notional: net,
            gross_exposure,
            net_exposure: add(self.net_exposure, net)?,
            leverage: Exposure::leverage_of(gross_exposure, value)?,
            ..self
        })
    }

    /// This exposure with `accrued` (the bonds' accrued interest, part of
    /// the holdings) said.
    pub fn with_accrued(self, accrued: Decimal) -> Exposure {
        Exposure {
            accrued_interest: accrued,
            ..self
        }
    }

    /// gross / V, exact; `None` when V ≤ 0 (no capital to lever).
    pub fn leverage_of(
        gross_exposure: Decimal,
        value: Decimal,
    ) -> Result<Option<Decimal>, crate::decimal::ArithmeticError> {
        if value > Decimal::ZERO {
            Ok(Some(crate::decimal::div(gross_exposure, value)?))
        } else {
            Ok(None)
        }
    }

    /// Money half-even to 8 places, leverage to 12 (docs/valuation.md).
    pub fn rounded(&self) -> Exposure {
        use crate::decimal::{round_money, round_ratio};
        Exposure {
            long_value: round_money(self.long_value),
            short_value: round_money(self.short_value),
            futures_notional: round_money(self.futures_notional),
            gross_exposure: round_money(self.gross_exposure),
            net_exposure: round_money(self.net_exposure),
            leverage: self.leverage.map(round_ratio),
            accrued_interest: round_money(self.accrued_interest),
        }
    }
}

impl DailyRecord {
    /// profit = V + Σ Out − Σ In (docs/valuation.md), in this order of
    /// operations: a decimal rounds a sum that outgrows its 96-bit
    /// mantissa, so another order can differ in the last digit. The fold
    /// computes a record's profit with it, and storage derives the
    /// reported profit of a stored record with it.
    pub fn profit_of(
        value: Decimal,
        cum_in: Decimal,
        cum_out: Decimal,
    ) -> Result<Decimal, crate::decimal::ArithmeticError> {
        use crate::decimal::{add, sub};
        sub(add(value, cum_out)?, cum_in)
    }

    /// return rate = NAV − 1; the fold's and storage's one formula.
    pub fn return_rate_of(nav: Decimal) -> Result<Decimal, crate::decimal::ArithmeticError> {
        crate::decimal::sub(nav, Decimal::ONE)
    }

    /// Reported values rounded: money half-even to 8 places, ratios
    /// half-even to 12 (docs/valuation.md).
    pub fn rounded(&self) -> DailyRecord {
        use crate::decimal::{round_money, round_ratio};
        DailyRecord {
            date: self.date,
            market_value: round_money(self.market_value),
            cost: round_money(self.cost),
            net_flow: round_money(self.net_flow),
            daily_return: round_ratio(self.daily_return),
            net_value: round_ratio(self.net_value),
            return_rate: round_ratio(self.return_rate),
            profit: round_money(self.profit),
            holdings_value: round_money(self.holdings_value),
            cash: round_money(self.cash),
            receivable: round_money(self.receivable),
            income: round_money(self.income),
            realized_pnl: round_money(self.realized_pnl),
            // Not reported: kept exact for resuming.
            cum_in: self.cum_in,
            cum_out: self.cum_out,
            exposure: self.exposure.rounded(),
        }
    }
}
