//! A stored transaction's columns: the names and order of those a
//! transaction is read from ([`TX_COLUMNS`], [`Col`]), a row read column
//! by column ([`TxRow`]), what each kind writes in the kind-dependent
//! columns ([`kind_columns`]) and the kind read back ([`kind_of`]).

use chrono::{DateTime, NaiveDate, Utc};
use projections::{
    CashMode, Currency, Dividend, Kind, LotMethod, LotPick, Reinvest, Symbol, Trade,
};
use rust_decimal::Decimal;
use uuid::Uuid;

/// The columns of [`TxColumns`], in the order of [`Col`].
pub(super) const TX_COLUMNS: [&str; 24] = [
    "event_id",
    "kind",
    "symbol",
    "quantity",
    "price",
    "fee",
    "trade_date",
    "occurred_at",
    "seq",
    "amount",
    "tax",
    "cost_basis",
    "pay_date",
    "reinvest_quantity",
    "reinvest_price",
    "cash_mode",
    "base_currency",
    "currency",
    "fx_rate",
    "allow_short",
    "accrued",
    "lot_method",
    "lot_picks",
    "acquired_on",
];

/// A column of [`TX_COLUMNS`].
#[derive(Debug, Clone, Copy)]
pub(super) enum Col {
    EventId,
    Kind,
    Symbol,
    Quantity,
    Price,
    Fee,
    TradeDate,
    OccurredAt,
    Seq,
    Amount,
    Tax,
    CostBasis,
    PayDate,
    ReinvestQuantity,
    ReinvestPrice,
    CashMode,
    BaseCurrency,
    Currency,
    FxRate,
    AllowShort,
    Accrued,
    LotMethod,
    LotPicks,
    AcquiredOn,
}

impl Col {
    pub(super) fn name(self) -> &'static str {
        TX_COLUMNS[self as usize]
    }
}

/// A stored transaction row, read column by column: from the driver's
/// rows ([`PgTx`]) or from a binary `COPY` ([`CopyRow`]).
pub(super) trait TxRow {
    /// Column `c` as text; `None`: `NULL`.
    fn text(&self, c: Col) -> anyhow::Result<Option<&str>>;
    fn decimal(&self, c: Col) -> anyhow::Result<Option<Decimal>>;
    fn date(&self, c: Col) -> anyhow::Result<Option<NaiveDate>>;
    fn instant(&self, c: Col) -> anyhow::Result<Option<DateTime<Utc>>>;
    fn uuid(&self, c: Col) -> anyhow::Result<Uuid>;
    fn int8(&self, c: Col) -> anyhow::Result<i64>;
    fn flag(&self, c: Col) -> anyhow::Result<Option<bool>>;
    /// `corrects` and `revision`, when the statement read them.
    fn correction(&self) -> anyhow::Result<Option<projections::Correction>>;
}

/// The columns of a `transactions` row that depend on the kind (`None`
/// where the kind has no such field), in [`transaction_row`]'s names.
#[derive(Debug, Default)]
pub(super) struct KindColumns<'a> {
    pub(super) sym: Option<&'a str>,
    pub(super) qty: Option<Decimal>,
    pub(super) price: Option<Decimal>,
    pub(super) fee: Option<Decimal>,
    pub(super) amount: Option<Decimal>,
    pub(super) tax: Option<Decimal>,
    pub(super) cost: Option<Decimal>,
    pub(super) pay: Option<NaiveDate>,
    pub(super) rq: Option<Decimal>,
    pub(super) rp: Option<Decimal>,
    pub(super) cash: Option<&'a str>,
    pub(super) ccy: Option<&'a str>,
    /// A settings event's `allow_short`, when true (NULL otherwise, as in
    /// every row stored before shorts).
    pub(super) short: Option<bool>,
    /// A bond trade's `accrued`, when given.
    pub(super) accrued: Option<Decimal>,
    /// A settings event's `lot_method`, when not `average` (NULL
    /// otherwise, as in every row stored before lots).
    pub(super) lot_method: Option<&'static str>,
    /// The lots a sell or transfer_out names, as JSON, when it names any.
    pub(super) lot_picks: Option<String>,
    /// A transfer_in's `acquired_on`, when given.
    pub(super) acquired_on: Option<NaiveDate>,
}

/// What a kind writes in the kind-dependent columns.
pub(super) fn kind_columns(kind: &Kind) -> KindColumns<'_> {
    let none = KindColumns::default;
    match kind {
        Kind::Cancel => none(),
        Kind::Buy(tr) | Kind::Sell(tr) => KindColumns {
            fee: Some(tr.fee),
            accrued: tr.accrued,
            lot_picks: picks_json(&tr.lots),
            ..moved(&tr.symbol, tr.quantity, Some(tr.price))
        },
        Kind::PortfolioSettings {
            cash,
            base_currency,
            allow_short,
            lot_method,
        } => KindColumns {
            cash: Some(cash.as_str()),
            ccy: base_currency.as_ref().map(Currency::as_str),
            short: allow_short.then_some(true),
            lot_method: lot_method.keeps_lots().then(|| lot_method.as_str()),
            ..none()
        },
        Kind::Deposit { amount } | Kind::Withdrawal { amount } => KindColumns {
            amount: Some(*amount),
            ..none()
        },
        Kind::Fee { amount, symbol }
        | Kind::Tax { amount, symbol }
        | Kind::FeeRefund { amount, symbol }
        | Kind::TaxRefund { amount, symbol } => KindColumns {
            amount: Some(*amount),
            sym: symbol.as_ref().map(Symbol::as_str),
            ..none()
        },
        Kind::Interest { amount, tax } => KindColumns {
            amount: Some(*amount),
            tax: Some(*tax),
            ..none()
        },
        Kind::TransferIn {
            symbol,
            quantity,
            price,
            cost,
            acquired_on,
        } => KindColumns {
            cost: *cost,
            acquired_on: *acquired_on,
            ..moved(symbol, *quantity, Some(*price))
        },
        Kind::TransferOut {
            symbol,
            quantity,
            price,
            lots,
        } => KindColumns {
            lot_picks: picks_json(lots),
            ..moved(symbol, *quantity, Some(*price))
        },
        Kind::Dividend(d) => dividend_columns(d),
        Kind::PaymentInLieu {
            symbol,
            amount,
            pay_date,
        } => KindColumns {
            sym: Some(symbol.as_str()),
            amount: Some(*amount),
            pay: Some(*pay_date),
            ..none()
        },
        Kind::ReturnOfCapital { symbol, amount } => KindColumns {
            sym: Some(symbol.as_str()),
            amount: Some(*amount),
            ..none()
        },
        Kind::Exercise { symbol, quantity } | Kind::Assignment { symbol, quantity } => {
            moved(symbol, *quantity, None)
        }
    }
}

/// The lots a disposal names, as stored: their JSON array; none when it
/// names none.
fn picks_json(picks: &[LotPick]) -> Option<String> {
    (!picks.is_empty()).then(|| serde_json::to_string(picks).expect("lot picks serialize"))
}

/// What an event that moves a quantity of `symbol` (at `price`) writes.
fn moved(symbol: &Symbol, qty: Decimal, price: Option<Decimal>) -> KindColumns<'_> {
    KindColumns {
        sym: Some(symbol.as_str()),
        qty: Some(qty),
        price,
        ..KindColumns::default()
    }
}

/// What a dividend writes: its amounts, pay date and reinvestment.
fn dividend_columns(d: &Dividend) -> KindColumns<'_> {
    KindColumns {
        sym: Some(d.symbol.as_str()),
        amount: Some(d.amount),
        tax: Some(d.tax),
        fee: Some(d.fee),
        pay: Some(d.pay_date),
        rq: d.reinvest.map(|r| r.quantity),
        rp: d.reinvest.map(|r| r.price),
        ..KindColumns::default()
    }
}

/// A stored transaction row of kind `name`, read column by column: a
/// column the kind needs and the row lacks is an error naming both.
struct StoredKind<'r, R> {
    r: &'r R,
    name: &'r str,
}

impl<R: TxRow> StoredKind<'_, R> {
    /// The `numeric` column `c`, which the kind needs.
    fn need(&self, c: Col) -> anyhow::Result<Decimal> {
        let name = self.name;
        self.r
            .decimal(c)?
            .ok_or_else(|| anyhow::anyhow!("stored {name} without {}", c.name()))
    }

    fn opt(&self, c: Col) -> anyhow::Result<Option<Decimal>> {
        self.r.decimal(c)
    }

    fn symbol(&self) -> anyhow::Result<Symbol> {
        let name = self.name;
        Ok(Symbol::parse(self.opt_text(Col::Symbol)?.ok_or_else(
            || anyhow::anyhow!("stored {name} without symbol"),
        )?)?)
    }

    fn opt_text(&self, c: Col) -> anyhow::Result<Option<&str>> {
        self.r.text(c)
    }

    fn opt_symbol(&self) -> anyhow::Result<Option<Symbol>> {
        Ok(self.opt_text(Col::Symbol)?.map(Symbol::parse).transpose()?)
    }

    fn trade(&self) -> anyhow::Result<Trade> {
        Ok(Trade {
            symbol: self.symbol()?,
            quantity: self.need(Col::Quantity)?,
            price: self.need(Col::Price)?,
            fee: self.need(Col::Fee)?,
            accrued: self.r.decimal(Col::Accrued)?,
            lots: self.picks()?,
        })
    }

    /// The lots a stored disposal names (none: NULL).
    fn picks(&self) -> anyhow::Result<Vec<LotPick>> {
        match self.opt_text(Col::LotPicks)? {
            None => Ok(Vec::new()),
            Some(text) => Ok(serde_json::from_str(text)?),
        }
    }

    fn settings(&self) -> anyhow::Result<Kind> {
        Ok(Kind::PortfolioSettings {
            cash: self
                .opt_text(Col::CashMode)?
                .and_then(CashMode::parse)
                .unwrap_or_default(),
            base_currency: self
                .opt_text(Col::BaseCurrency)?
                .map(Currency::parse)
                .transpose()?,
            allow_short: self.r.flag(Col::AllowShort)?.unwrap_or(false),
            lot_method: self
                .opt_text(Col::LotMethod)?
                .and_then(LotMethod::parse)
                .unwrap_or_default(),
        })
    }

    fn pay_date(&self) -> anyhow::Result<NaiveDate> {
        let name = self.name;
        self.r
            .date(Col::PayDate)?
            .ok_or_else(|| anyhow::anyhow!("stored {name} without pay_date"))
    }

    fn dividend(&self) -> anyhow::Result<Dividend> {
        Ok(Dividend {
            symbol: self.symbol()?,
            amount: self.need(Col::Amount)?,
            tax: self.need(Col::Tax)?,
            fee: self.need(Col::Fee)?,
            pay_date: self.pay_date()?,
            reinvest: match (
                self.opt(Col::ReinvestQuantity)?,
                self.opt(Col::ReinvestPrice)?,
            ) {
                (Some(quantity), Some(price)) => Some(Reinvest { quantity, price }),
                _ => None,
            },
        })
    }
}

/// The event kind of a stored transaction row.
pub(super) fn kind_of(r: &impl TxRow) -> anyhow::Result<Kind> {
    let name = r
        .text(Col::Kind)?
        .ok_or_else(|| anyhow::anyhow!("stored transaction without kind"))?;
    let k = StoredKind { r, name };
    Ok(match name {
        "buy" => Kind::Buy(k.trade()?),
        "sell" => Kind::Sell(k.trade()?),
        "portfolio_settings" => k.settings()?,
        "deposit" => Kind::Deposit {
            amount: k.need(Col::Amount)?,
        },
        "withdrawal" => Kind::Withdrawal {
            amount: k.need(Col::Amount)?,
        },
        "fee" => Kind::Fee {
            amount: k.need(Col::Amount)?,
            symbol: k.opt_symbol()?,
        },
        "tax" => Kind::Tax {
            amount: k.need(Col::Amount)?,
            symbol: k.opt_symbol()?,
        },
        "fee_refund" => Kind::FeeRefund {
            amount: k.need(Col::Amount)?,
            symbol: k.opt_symbol()?,
        },
        "tax_refund" => Kind::TaxRefund {
            amount: k.need(Col::Amount)?,
            symbol: k.opt_symbol()?,
        },
        "interest" => Kind::Interest {
            amount: k.need(Col::Amount)?,
            tax: k.need(Col::Tax)?,
        },
        "transfer_in" => Kind::TransferIn {
            symbol: k.symbol()?,
            quantity: k.need(Col::Quantity)?,
            price: k.need(Col::Price)?,
            cost: k.opt(Col::CostBasis)?,
            acquired_on: r.date(Col::AcquiredOn)?,
        },
        "transfer_out" => Kind::TransferOut {
            symbol: k.symbol()?,
            quantity: k.need(Col::Quantity)?,
            price: k.need(Col::Price)?,
            lots: k.picks()?,
        },
        "dividend" => Kind::Dividend(k.dividend()?),
        "payment_in_lieu" => Kind::PaymentInLieu {
            symbol: k.symbol()?,
            amount: k.need(Col::Amount)?,
            pay_date: k.pay_date()?,
        },
        "return_of_capital" => Kind::ReturnOfCapital {
            symbol: k.symbol()?,
            amount: k.need(Col::Amount)?,
        },
        "exercise" => Kind::Exercise {
            symbol: k.symbol()?,
            quantity: k.need(Col::Quantity)?,
        },
        "assignment" => Kind::Assignment {
            symbol: k.symbol()?,
            quantity: k.need(Col::Quantity)?,
        },
        "cancel" => Kind::Cancel,
        other => anyhow::bail!("stored transaction of unknown kind `{other}`"),
    })
}
