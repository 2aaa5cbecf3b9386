//! The fields of each transaction type (docs/events.md): what a buy, a
//! settings event, a dividend, a payment in lieu and the rest carry, each
//! read and checked by its rules; the envelope (ids, dates, currency,
//! corrections) is the caller's.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde_json::value::RawValue;

use super::{
    echo, invalid, non_negative, parse_date, parse_number, string_of, EventError, Object, Rules,
    LOT_PICK_FIELDS, REINVEST_FIELDS,
};
use crate::types::{
    CashMode, Currency, Dividend, Kind, LotId, LotMethod, LotPick, Reinvest, Trade,
};

/// The most lots one disposal may name: a sale names the lots it sells,
/// not a history.
const MAX_LOT_PICKS: usize = 1000;

/// The fields of a transaction of type `ty` (one of
/// [`TRANSACTION_TYPES`](super::TRANSACTION_TYPES)), dated `trade_date`.
pub(super) fn parse_kind(
    ty: &str,
    obj: &Object<'_>,
    trade_date: NaiveDate,
    rules: &Rules,
) -> Result<Kind, EventError> {
    Ok(match ty {
        "buy" => Kind::Buy(parse_trade(obj, false)?),
        "sell" => Kind::Sell(parse_trade(obj, true)?),
        "portfolio_settings" => parse_settings(obj)?,
        "deposit" => Kind::Deposit {
            amount: obj.positive("amount")?,
        },
        "withdrawal" => Kind::Withdrawal {
            amount: obj.positive("amount")?,
        },
        "fee" | "tax" | "fee_refund" | "tax_refund" => {
            let amount = obj.positive("amount")?;
            let symbol = obj.optional_symbol()?;
            match ty {
                "fee" => Kind::Fee { amount, symbol },
                "tax" => Kind::Tax { amount, symbol },
                "fee_refund" => Kind::FeeRefund { amount, symbol },
                _ => Kind::TaxRefund { amount, symbol },
            }
        }
        "interest" => {
            let amount = obj.positive("amount")?;
            let tax = obj.optional_non_negative("tax")?;
            if tax > amount {
                return Err(invalid("tax", "must not exceed the amount"));
            }
            Kind::Interest { amount, tax }
        }
        "transfer_in" => Kind::TransferIn {
            symbol: obj.symbol()?,
            quantity: obj.positive("quantity")?,
            price: obj.non_negative("price")?,
            cost: match obj.get("cost") {
                None => None,
                Some(raw) => Some(non_negative("cost", parse_number("cost", raw)?)?),
            },
            acquired_on: acquired_on(obj, trade_date, rules)?,
        },
        "transfer_out" => {
            let quantity = obj.positive("quantity")?;
            Kind::TransferOut {
                symbol: obj.symbol()?,
                quantity,
                price: obj.non_negative("price")?,
                lots: lot_picks(obj, quantity)?,
            }
        }
        "dividend" => Kind::Dividend(parse_dividend(obj, trade_date, rules)?),
        "payment_in_lieu" => parse_in_lieu(obj, trade_date, rules)?,
        "return_of_capital" => Kind::ReturnOfCapital {
            symbol: obj.symbol()?,
            amount: obj.positive("amount")?,
        },
        "exercise" => Kind::Exercise {
            symbol: obj.symbol()?,
            quantity: obj.positive("quantity")?,
        },
        "assignment" => Kind::Assignment {
            symbol: obj.symbol()?,
            quantity: obj.positive("quantity")?,
        },
        // Answered before the fields of a kind are read.
        "cancel" => Kind::Cancel,
        _ => unreachable!("checked against TRANSACTION_TYPES"),
    })
}

/// A buy's or sell's fields (`sell`: the lots it names are read).
fn parse_trade(obj: &Object<'_>, sell: bool) -> Result<Trade, EventError> {
    let quantity = obj.positive("quantity")?;
    Ok(Trade {
        symbol: obj.symbol()?,
        quantity,
        price: obj.non_negative("price")?,
        fee: obj.optional_non_negative("fee")?,
        accrued: match obj.get("accrued") {
            None => None,
            Some(raw) => Some(non_negative("accrued", parse_number("accrued", raw)?)?),
        },
        lots: if sell {
            lot_picks(obj, quantity)?
        } else {
            Vec::new()
        },
    })
}

/// A disposal's `lots`: `[{"lot": "<event_id>", "quantity": "…"}]`, each
/// quantity > 0, together at most the disposal's `quantity`.
fn lot_picks(obj: &Object<'_>, quantity: Decimal) -> Result<Vec<LotPick>, EventError> {
    let Some(raw) = obj.get("lots") else {
        return Ok(Vec::new());
    };
    let items: Vec<&RawValue> = serde_json::from_str(raw.get())
        .map_err(|_| invalid("lots", "must be an array of {lot, quantity}"))?;
    if items.len() > MAX_LOT_PICKS {
        return Err(invalid(
            "lots",
            format!("names {} lots, more than {MAX_LOT_PICKS}", items.len()),
        ));
    }
    let mut picks = Vec::with_capacity(items.len());
    let mut named = Decimal::ZERO;
    for item in items {
        if !item.get().starts_with('{') {
            return Err(invalid("lots", "must be an array of {lot, quantity}"));
        }
        let inner = Object::parse(item.get(), LOT_PICK_FIELDS)?;
        let lot = match inner.get("lot") {
            None => return Err(EventError::Missing("lots.lot")),
            Some(raw) => LotId::parse(&string_of("lots.lot", raw)?)
                .map_err(|reason| invalid("lots.lot", reason))?,
        };
        let q = match inner.get("quantity") {
            None => return Err(EventError::Missing("lots.quantity")),
            Some(raw) => parse_number("lots.quantity", raw)?,
        };
        if q <= Decimal::ZERO {
            return Err(invalid("lots.quantity", "must be greater than 0"));
        }
        // Below 10^12 each and at most MAX_LOT_PICKS of them: no overflow.
        named += q;
        picks.push(LotPick { lot, quantity: q });
    }
    if named > quantity {
        return Err(invalid(
            "lots",
            format!(
                "the lots named add up to {}, more than the quantity {}",
                named.normalize(),
                quantity.normalize()
            ),
        ));
    }
    Ok(picks)
}

/// A `transfer_in`'s `acquired_on`: when the securities were first
/// acquired, never after the transfer's own date.
fn acquired_on(
    obj: &Object<'_>,
    trade_date: NaiveDate,
    rules: &Rules,
) -> Result<Option<NaiveDate>, EventError> {
    let Some(raw) = obj.get("acquired_on") else {
        return Ok(None);
    };
    let day = parse_date("acquired_on", &string_of("acquired_on", raw)?, rules)?;
    if day > trade_date {
        return Err(invalid(
            "acquired_on",
            format!("{day} is after the transfer's trade_date {trade_date}"),
        ));
    }
    Ok(Some(day))
}

/// A `portfolio_settings` event's fields.
fn parse_settings(obj: &Object<'_>) -> Result<Kind, EventError> {
    let cash = match obj.get("cash") {
        None => CashMode::None,
        Some(raw) => {
            let text = string_of("cash", raw)?;
            CashMode::parse(&text).ok_or_else(|| {
                invalid(
                    "cash",
                    format!("must be `none` or `tracked`, not `{}`", echo(&text)),
                )
            })?
        }
    };
    let allow_short = match obj.get("allow_short").map(RawValue::get) {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(invalid("allow_short", "must be true or false")),
    };
    let lot_method = match obj.get("lot_method") {
        None => LotMethod::Average,
        Some(raw) => {
            let text = string_of("lot_method", raw)?;
            LotMethod::parse(&text).ok_or_else(|| {
                invalid(
                    "lot_method",
                    format!(
                        "must be `average`, `fifo`, `lifo` or `hifo`, not `{}`",
                        echo(&text)
                    ),
                )
            })?
        }
    };
    if allow_short && cash != CashMode::Tracked {
        return Err(invalid(
            "allow_short",
            "allow_short needs cash: tracked (a short's proceeds live in the account)",
        ));
    }
    Ok(Kind::PortfolioSettings {
        cash,
        base_currency: match obj.get("base_currency") {
            None => None,
            Some(raw) => Some(Currency::parse_field(
                "base_currency",
                &string_of("base_currency", raw)?,
            )?),
        },
        allow_short,
        lot_method,
    })
}

/// A `payment_in_lieu` event's fields; its ex-date is `trade_date`. It
/// carries no reinvestment, tax or fee: what a short owes is the whole
/// dividend.
fn parse_in_lieu(
    obj: &Object<'_>,
    trade_date: NaiveDate,
    rules: &Rules,
) -> Result<Kind, EventError> {
    for field in ["reinvest", "tax", "fee"] {
        if obj.get(field).is_some() {
            return Err(invalid(
                field,
                "does not belong to a payment_in_lieu (it is the whole dividend a short owes)",
            ));
        }
    }
    let symbol = obj.symbol()?;
    let amount = obj.positive("amount")?;
    let pay_date = pay_date(obj, trade_date, rules)?;
    Ok(Kind::PaymentInLieu {
        symbol,
        amount,
        pay_date,
    })
}

/// A `dividend` event's fields; its ex-date is `trade_date`.
fn parse_dividend(
    obj: &Object<'_>,
    trade_date: NaiveDate,
    rules: &Rules,
) -> Result<Dividend, EventError> {
    let symbol = obj.symbol()?;
    let amount = obj.positive("amount")?;
    let tax = obj.optional_non_negative("tax")?;
    let fee = obj.optional_non_negative("fee")?;
    if tax + fee > amount {
        return Err(invalid(
            "amount",
            "must cover tax + fee (the net dividend would be negative)",
        ));
    }
    let pay_date = pay_date(obj, trade_date, rules)?;
    let reinvest = match obj.get("reinvest") {
        None => None,
        Some(raw) => Some(parse_reinvest(raw)?),
    };
    Ok(Dividend {
        symbol,
        amount,
        tax,
        fee,
        pay_date,
        reinvest,
    })
}

/// A dividend's `reinvest` object: `{quantity, price}`.
fn parse_reinvest(raw: &RawValue) -> Result<Reinvest, EventError> {
    let text = raw.get();
    if !text.starts_with('{') {
        return Err(invalid("reinvest", "must be an object {quantity, price}"));
    }
    let inner = Object::parse(text, REINVEST_FIELDS)?;
    let quantity = match inner.get("quantity") {
        None => return Err(EventError::Missing("reinvest.quantity")),
        Some(raw) => parse_number("reinvest.quantity", raw)?,
    };
    if quantity <= Decimal::ZERO {
        return Err(invalid("reinvest.quantity", "must be greater than 0"));
    }
    let price = match inner.get("price") {
        None => return Err(EventError::Missing("reinvest.price")),
        Some(raw) => parse_number("reinvest.price", raw)?,
    };
    Ok(Reinvest {
        quantity,
        price: non_negative("reinvest.price", price)?,
    })
}

/// A dividend's or payment in lieu's `pay_date`: its ex-date (the
/// `trade_date`) when absent, never before it.
fn pay_date(
    obj: &Object<'_>,
    trade_date: NaiveDate,
    rules: &Rules,
) -> Result<NaiveDate, EventError> {
    let pay_date = match obj.get("pay_date") {
        None => trade_date,
        Some(raw) => parse_date("pay_date", &string_of("pay_date", raw)?, rules)?,
    };
    if pay_date < trade_date {
        return Err(invalid(
            "pay_date",
            format!("{pay_date} is before the ex-date (trade_date) {trade_date}"),
        ));
    }
    Ok(pay_date)
}
