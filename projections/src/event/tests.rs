//! Tests of the event parsers (docs/events.md): accepted shapes, exact
//! numbers, and the reason every refusal gives.

use super::*;
use crate::types::{CashMode, Side, Trade};
use std::str::FromStr;

/// The trade of a parsed buy or sell, with its side.
fn tr(t: &Transaction) -> (Side, Trade) {
    let (side, trade) = t.as_trade().expect("a buy or sell");
    (side, trade.clone())
}

fn d(s: &str) -> Decimal {
    Decimal::from_str(s).unwrap()
}

const TX: &str = r#"{
      "event_id": "5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a01",
      "type": "buy",
      "portfolio_id": "p-1001",
      "symbol": "AAPL",
      "quantity": "10",
      "price": "187.23",
      "fee": "1.50",
      "trade_date": "2024-03-01",
      "occurred_at": "2024-03-01T14:30:00Z",
      "schema_version": 1
    }"#;

/// The spec's example with `field` replaced by the raw JSON `value`
/// (or removed when `value` is None).
fn tx_with(field: &str, value: Option<&str>) -> String {
    let mut v: serde_json::Map<String, serde_json::Value> = serde_json::from_str(TX).unwrap();
    v.remove(field);
    let mut text = serde_json::to_string(&v).unwrap();
    if let Some(value) = value {
        text.pop();
        text.push_str(&format!(",\"{field}\":{value}}}"));
    }
    text
}

fn tx_err(field: &str, value: Option<&str>) -> EventError {
    parse_transaction(tx_with(field, value).as_bytes()).unwrap_err()
}

fn assert_invalid(e: EventError, field: &str) {
    match e {
        EventError::Invalid { field: f, .. } => assert_eq!(f, field),
        other => panic!("expected invalid {field}, got {other:?}"),
    }
}

#[test]
fn parses_the_spec_example() {
    let t = parse_transaction(TX.as_bytes()).unwrap();
    assert_eq!(
        t.event_id.to_string(),
        "5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a01"
    );
    assert_eq!(tr(&t).0, Side::Buy);
    assert_eq!(t.portfolio_id.as_str(), "p-1001");
    assert_eq!(tr(&t).1.symbol.as_str(), "AAPL");
    assert_eq!(tr(&t).1.quantity, d("10"));
    assert_eq!(tr(&t).1.price, d("187.23"));
    assert_eq!(tr(&t).1.fee, d("1.5"));
    assert_eq!(t.trade_date, NaiveDate::from_ymd_opt(2024, 3, 1).unwrap());
    assert_eq!(
        t.occurred_at.unwrap().to_rfc3339(),
        "2024-03-01T14:30:00+00:00"
    );
    assert_eq!(t.seq, 0);
}

#[test]
fn numbers_as_json_numbers_are_exact() {
    let t = parse_transaction(
        tx_with("price", Some("0.1"))
            .replace(r#""fee":"1.50""#, r#""fee":0.2"#)
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(tr(&t).1.price + tr(&t).1.fee, d("0.3"));
    assert_eq!(tr(&t).1.price.to_string(), "0.1");
    let t = parse_transaction(tx_with("quantity", Some("1234567890123.123456789")).as_bytes())
        .unwrap_err();
    assert_invalid(t, "quantity");
    let t =
        parse_transaction(tx_with("quantity", Some("99999999999.9999999999")).as_bytes()).unwrap();
    assert_eq!(tr(&t).1.quantity, d("99999999999.9999999999"));
}

#[test]
fn numbers_as_strings_are_exact() {
    let t = parse_transaction(tx_with("price", Some(r#""0.1""#)).as_bytes()).unwrap();
    let u = parse_transaction(tx_with("price", Some(r#""0.2""#)).as_bytes()).unwrap();
    assert_eq!(tr(&t).1.price + tr(&u).1.price, d("0.3"));
}

#[test]
fn exponents_and_trailing_zeros() {
    assert_eq!(parse_decimal("1e3").unwrap(), d("1000"));
    assert_eq!(parse_decimal("1.5E-3").unwrap(), d("0.0015"));
    assert_eq!(parse_decimal("1.50000000000000").unwrap(), d("1.5"));
    assert_eq!(parse_decimal("0.00000000000000e5").unwrap(), Decimal::ZERO);
    assert_eq!(parse_decimal("-0").unwrap(), Decimal::ZERO);
    assert_eq!(parse_decimal("007").unwrap(), d("7"));
    assert_eq!(parse_decimal("12345e-10").unwrap(), d("0.0000012345"));
    assert!(parse_decimal("12345e-14").is_err());
    assert_eq!(
        parse_decimal("999999999999.9999999999").unwrap(),
        d("999999999999.9999999999")
    );
    assert!(parse_decimal("-999999999999.99999999990").is_ok());
    assert!(parse_decimal("1e-11").is_err());
    assert!(parse_decimal("1e12").is_err());
    assert!(parse_decimal("1e99999999999999999999").is_err());
    assert!(parse_decimal("1e-99999999999999999999").is_err());
    assert_eq!(
        parse_decimal("0e99999999999999999999").unwrap(),
        Decimal::ZERO
    );
    for bad in [
        "", "-", "+1", " 1", "1 ", "1.", ".5", "1e", "1e+", "NaN", "1,5", "0x10",
    ] {
        assert!(parse_decimal(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn rejects_not_json_and_not_objects() {
    assert!(matches!(
        parse_transaction(b"{nope"),
        Err(EventError::NotJson(_))
    ));
    assert!(matches!(
        parse_transaction(b""),
        Err(EventError::NotJson(_))
    ));
    assert!(matches!(
        parse_transaction(b"\xff\xfe"),
        Err(EventError::NotJson(_))
    ));
    assert!(matches!(
        parse_transaction(b"{} x"),
        Err(EventError::NotJson(_))
    ));
    assert_eq!(parse_transaction(b"[1,2]"), Err(EventError::NotObject));
    assert_eq!(parse_price(b"\"AAPL\""), Err(EventError::NotObject));
}

#[test]
fn rejects_missing_fields() {
    for f in [
        "event_id",
        "type",
        "portfolio_id",
        "symbol",
        "quantity",
        "price",
        "trade_date",
    ] {
        assert_eq!(tx_err(f, None), EventError::Missing(f), "{f}");
        assert_eq!(tx_err(f, Some("null")), EventError::Missing(f), "{f}");
    }
}

#[test]
fn optional_fields_default() {
    let t = parse_transaction(tx_with("fee", None).as_bytes()).unwrap();
    assert_eq!(tr(&t).1.fee, Decimal::ZERO);
    let t = parse_transaction(tx_with("fee", Some("null")).as_bytes()).unwrap();
    assert_eq!(tr(&t).1.fee, Decimal::ZERO);
    let t = parse_transaction(tx_with("occurred_at", None).as_bytes()).unwrap();
    assert_eq!(t.occurred_at, None);
    let t = parse_transaction(tx_with("schema_version", None).as_bytes()).unwrap();
    assert_eq!(tr(&t).0, Side::Buy);
    let t = parse_transaction(tx_with("schema_version", Some(r#""1""#)).as_bytes()).unwrap();
    assert_eq!(tr(&t).0, Side::Buy);
}

#[test]
fn rejects_bad_quantities_prices_and_fees() {
    assert_invalid(tx_err("quantity", Some(r#""-1""#)), "quantity");
    assert_invalid(tx_err("quantity", Some("-1")), "quantity");
    assert_invalid(tx_err("quantity", Some(r#""0""#)), "quantity");
    assert_invalid(tx_err("quantity", Some("0.0")), "quantity");
    assert_invalid(tx_err("quantity", Some("true")), "quantity");
    assert_invalid(tx_err("quantity", Some(r#""ten""#)), "quantity");
    assert_invalid(tx_err("price", Some(r#""-0.01""#)), "price");
    assert_invalid(tx_err("fee", Some("-1")), "fee");
    // Too many decimals, too large, as strings and as numbers.
    assert_invalid(tx_err("quantity", Some(r#""1.00000000001""#)), "quantity");
    assert_invalid(tx_err("price", Some("0.00000000001")), "price");
    assert_invalid(tx_err("price", Some(r#""1000000000000""#)), "price");
    assert_invalid(tx_err("price", Some("1000000000000")), "price");
    assert_invalid(tx_err("price", Some("1e12")), "price");
    assert_invalid(tx_err("fee", Some("-1000000000000")), "fee");
    // Zero price is allowed.
    let t = parse_transaction(tx_with("price", Some("0")).as_bytes()).unwrap();
    assert_eq!(tr(&t).1.price, Decimal::ZERO);
    let msg = tx_err("quantity", Some("1.00000000001")).to_string();
    assert!(
        msg.contains("quantity") && msg.contains("decimal places"),
        "{msg}"
    );
}

#[test]
fn rejects_unknown_type_and_version() {
    assert_eq!(
        tx_err("type", Some(r#""short""#)),
        EventError::UnknownType("short".into())
    );
    assert_eq!(
        tx_err("type", Some(r#""BUY""#)),
        EventError::UnknownType("BUY".into())
    );
    assert_invalid(tx_err("type", Some("1")), "type");
    assert_eq!(
        tx_err("schema_version", Some("3")),
        EventError::UnsupportedVersion("3".into())
    );
    assert_eq!(
        tx_err("schema_version", Some("1.5")),
        EventError::UnsupportedVersion("1.5".into())
    );
    assert_eq!(
        tx_err("schema_version", Some("1.0")),
        EventError::UnsupportedVersion("1.0".into())
    );
    assert!(matches!(
        tx_err("schema_version", Some(r#""v1""#)),
        EventError::UnsupportedVersion(_)
    ));
}

#[test]
fn rejects_bad_dates_ids_and_instants() {
    for bad in [
        r#""2024-3-1""#,
        r#""2024-02-30""#,
        r#""20240301""#,
        r#""2024-03-01T00:00:00Z""#,
        r#"" 2024-03-01""#,
        "20240301",
    ] {
        assert_invalid(tx_err("trade_date", Some(bad)), "trade_date");
    }
    for bad in [r#""""#, r#""-p""#, r#""p 1""#, r#""p/1""#, "7"] {
        assert_invalid(tx_err("portfolio_id", Some(bad)), "portfolio_id");
    }
    let long = format!("\"{}\"", "a".repeat(65));
    assert_invalid(tx_err("portfolio_id", Some(&long)), "portfolio_id");
    let long = format!("\"{}\"", "a".repeat(33));
    assert_invalid(tx_err("symbol", Some(&long)), "symbol");
    assert_invalid(tx_err("symbol", Some(r#""A$""#)), "symbol");
    for bad in [
        r#""not-a-uuid""#,
        r#""5b0c1c9e2f0a4a0e9a431f3e8f1f2a01""#,
        r#""5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a0g""#,
    ] {
        assert_invalid(tx_err("event_id", Some(bad)), "event_id");
    }
    assert_invalid(tx_err("occurred_at", Some(r#""yesterday""#)), "occurred_at");
    assert_invalid(
        tx_err("occurred_at", Some(r#""2024-03-01T14:30:00""#)),
        "occurred_at",
    );
    let t = parse_transaction(
        tx_with("occurred_at", Some(r#""2024-03-01T16:30:00+02:00""#)).as_bytes(),
    )
    .unwrap();
    assert_eq!(
        t.occurred_at.unwrap().to_rfc3339(),
        "2024-03-01T14:30:00+00:00"
    );
}

#[test]
fn unknown_fields_ignored_duplicates_refused() {
    let t = parse_transaction(tx_with("note", Some(r#"{"any": [1, 2.5e400]}"#)).as_bytes());
    assert!(t.is_ok());
    let dup = TX.replace(r#""fee": "1.50","#, r#""fee": "1.50", "fee": "2","#);
    assert_invalid(parse_transaction(dup.as_bytes()).unwrap_err(), "fee");
}

#[test]
fn escaped_strings_are_decoded() {
    let t = parse_transaction(tx_with("symbol", Some(r#""\u0041APL""#)).as_bytes()).unwrap();
    assert_eq!(tr(&t).1.symbol.as_str(), "AAPL");
    let esc = TX.replace(r#""symbol""#, r#""sym\u0062ol""#);
    assert_eq!(
        tr(&parse_transaction(esc.as_bytes()).unwrap())
            .1
            .symbol
            .as_str(),
        "AAPL"
    );
}

#[test]
fn prices() {
    let p =
        parse_price(br#"{ "symbol": "AAPL", "date": "2024-03-01", "close": "189.10" }"#).unwrap();
    assert_eq!(p.symbol.as_str(), "AAPL");
    assert_eq!(p.close, d("189.1"));
    let p = parse_price(br#"{ "symbol": "AAPL", "date": "2024-03-01", "close": 189.10 }"#).unwrap();
    assert_eq!(p.close, d("189.1"));
    let e = |s: &str| parse_price(s.as_bytes()).unwrap_err();
    assert_invalid(
        e(r#"{"symbol":"A","date":"2024-03-01","close":"0"}"#),
        "close",
    );
    assert_invalid(
        e(r#"{"symbol":"A","date":"2024-03-01","close":-1}"#),
        "close",
    );
    assert_invalid(e(r#"{"symbol":"A","date":"2024-3-01","close":1}"#), "date");
    assert_invalid(
        e(r#"{"symbol":"A","date":"2024-03-01","close":1e-11}"#),
        "close",
    );
    assert_eq!(
        e(r#"{"symbol":"A","date":"2024-03-01"}"#),
        EventError::Missing("close")
    );
    assert_eq!(
        e(r#"{"symbol":"A","date":"2024-03-01","close":1,"schema_version":3}"#),
        EventError::UnsupportedVersion("3".into())
    );
}

#[test]
fn dates_before_the_earliest_are_refused_at_the_boundary() {
    let rules = Rules {
        earliest: NaiveDate::from_ymd_opt(2000, 1, 1).unwrap(),
    };
    let tx = |field: &str, value: &str| {
        parse_transaction_with(tx_with(field, Some(value)).as_bytes(), &rules)
    };
    // The earliest day itself is accepted, the day before is not.
    assert!(tx("trade_date", r#""2000-01-01""#).is_ok());
    assert_invalid(
        tx("trade_date", r#""1999-12-31""#).unwrap_err(),
        "trade_date",
    );
    assert!(tx("occurred_at", r#""2000-01-01T00:00:00Z""#).is_ok());
    let e = tx("occurred_at", r#""1999-12-31T23:59:59Z""#).unwrap_err();
    assert_invalid(e.clone(), "occurred_at");
    assert!(
        e.to_string()
            .contains("before the earliest accepted date 2000-01-01"),
        "{e}"
    );
    // An offset that moves the instant into the day before counts in UTC.
    assert_invalid(
        tx("occurred_at", r#""2000-01-01T00:30:00+01:00""#).unwrap_err(),
        "occurred_at",
    );
    let price = |date: &str| {
        parse_price_with(
            format!(r#"{{"symbol": "A", "date": "{date}", "close": "1"}}"#).as_bytes(),
            &rules,
        )
    };
    assert!(price("2000-01-01").is_ok());
    assert_invalid(price("1999-12-31").unwrap_err(), "date");
    // The default bound is 1900-01-01.
    assert!(parse_transaction(tx_with("trade_date", Some(r#""1900-01-01""#)).as_bytes()).is_ok());
    assert_invalid(tx_err("trade_date", Some(r#""1899-12-31""#)), "trade_date");
}

#[test]
fn echoed_text_is_escaped_and_cut() {
    assert_eq!(echo("ok"), "ok");
    assert_eq!(echo("a\u{0}b\u{1b}"), "a\\u{0}b\\u{1b}");
    // Invisible format characters are shown, not hidden.
    assert_eq!(echo("x\u{202E}y\u{200B}"), "x\\u{202e}y\\u{200b}");
    let long = "é".repeat(100);
    let e = echo(&long);
    assert_eq!(e.chars().count(), ECHO_MAX_CHARS + 1);
    assert!(e.ends_with('…'));
    // A library's message quoting the input is escaped too: uuid's
    // error names the offending character.
    let e = tx_err(
        "event_id",
        Some(r#""5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a0\u0000""#),
    );
    let text = e.to_string();
    assert!(
        text.contains("UUID: failed to parse"),
        "the library's words: {text}"
    );
    assert!(!text.chars().any(char::is_control), "{text:?}");
}

/// A v2 event of `ty` with `fields` (raw JSON text after the common ones).
fn v2(ty: &str, fields: &str) -> Result<Transaction, EventError> {
    let text = format!(
        r#"{{"event_id":"5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a01","type":"{ty}","portfolio_id":"p-1","trade_date":"2024-05-07","schema_version":2{fields}}}"#
    );
    parse_transaction(text.as_bytes())
}

#[test]
fn v2_kinds_parse() {
    let t = v2(
            "dividend",
            r#","symbol":"XYZ","amount":"100","tax":"15","pay_date":"2024-05-09","reinvest":{"quantity":"1.7","price":50}"#,
        )
        .unwrap();
    match t.kind {
        Kind::Dividend(div) => {
            assert_eq!(div.net(), d("85"));
            assert_eq!(div.pay_date.to_string(), "2024-05-09");
            assert_eq!(div.reinvest.unwrap().quantity, d("1.7"));
        }
        other => panic!("{other:?}"),
    }
    let t = v2("dividend", r#","symbol":"XYZ","amount":"1""#).unwrap();
    assert!(matches!(t.kind, Kind::Dividend(ref x) if x.pay_date == t.trade_date));
    let t = v2(
        "portfolio_settings",
        r#","cash":"tracked","base_currency":"EUR""#,
    )
    .unwrap();
    assert!(matches!(
        t.kind,
        Kind::PortfolioSettings { cash: CashMode::Tracked, base_currency: Some(ref c), .. } if c.as_str() == "EUR"
    ));
    // A settings event needs no date.
    let text = r#"{"event_id":"5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a01","type":"portfolio_settings","portfolio_id":"p-1","schema_version":2}"#;
    let t = parse_transaction(text.as_bytes()).unwrap();
    assert!(matches!(
        t.kind,
        Kind::PortfolioSettings {
            cash: CashMode::None,
            base_currency: None,
            allow_short: false,
            lot_method: crate::types::LotMethod::Average,
        }
    ));
    assert!(matches!(
        v2("deposit", r#","amount":5"#).unwrap().kind,
        Kind::Deposit { .. }
    ));
    assert!(matches!(
        v2("interest", r#","amount":"20","tax":"5""#).unwrap().kind,
        Kind::Interest { tax, .. } if tax == d("5")
    ));
    assert!(matches!(
        v2("transfer_in", r#","symbol":"W","quantity":"50","price":"40","cost":"1500""#).unwrap().kind,
        Kind::TransferIn { cost: Some(c), .. } if c == d("1500")
    ));
    assert!(matches!(
        v2("fee", r#","amount":"1","symbol":"W""#).unwrap().kind,
        Kind::Fee {
            symbol: Some(_),
            ..
        }
    ));
    // A v2 buy means what a v1 buy means.
    let t = v2("buy", r#","symbol":"A","quantity":1,"price":2"#).unwrap();
    assert!(matches!(t.kind, Kind::Buy(_)));
}

/// Every refusal names the field it is about.
#[test]
fn v2_refusals_name_their_field() {
    let cases: &[(&str, &str, &str)] = &[
        ("deposit", r#","amount":"0""#, "amount"),
        ("withdrawal", r#","amount":"-1""#, "amount"),
        // Spaces only inside a symbol (OCC option symbols have them).
        ("fee", r#","amount":"1","symbol":" ab""#, "symbol"),
        ("fee", r#","amount":"1","symbol":"ab ""#, "symbol"),
        ("fee", r#","amount":"1","symbol":"a\tb""#, "symbol"),
        (
            "portfolio_settings",
            r#","cash":"none","allow_short":true"#,
            "allow_short",
        ),
        (
            "portfolio_settings",
            r#","allow_short":true"#,
            "allow_short",
        ),
        (
            "portfolio_settings",
            r#","cash":"tracked","allow_short":"yes""#,
            "allow_short",
        ),
        ("payment_in_lieu", r#","symbol":"X","amount":"0""#, "amount"),
        (
            "payment_in_lieu",
            r#","symbol":"X","amount":"5","pay_date":"2024-05-06""#,
            "pay_date",
        ),
        (
            "payment_in_lieu",
            r#","symbol":"X","amount":"5","tax":"0""#,
            "tax",
        ),
        (
            "payment_in_lieu",
            r#","symbol":"X","amount":"5","fee":"0""#,
            "fee",
        ),
        (
            "payment_in_lieu",
            r#","symbol":"X","amount":"5","reinvest":{"quantity":"1","price":"1"}"#,
            "reinvest",
        ),
        ("tax_refund", r#","amount":"x""#, "amount"),
        ("interest", r#","amount":"10","tax":"11""#, "tax"),
        ("interest", r#","amount":"10","tax":"-1""#, "tax"),
        (
            "transfer_in",
            r#","symbol":"W","quantity":"0","price":"1""#,
            "quantity",
        ),
        (
            "transfer_in",
            r#","symbol":"W","quantity":"1","price":"-1""#,
            "price",
        ),
        (
            "transfer_in",
            r#","symbol":"W","quantity":"1","price":"1","cost":"-1""#,
            "cost",
        ),
        (
            "transfer_out",
            r#","symbol":"W","quantity":"-2","price":"1""#,
            "quantity",
        ),
        ("dividend", r#","symbol":"X","amount":"0""#, "amount"),
        (
            "dividend",
            r#","symbol":"X","amount":"10","tax":"-1""#,
            "tax",
        ),
        (
            "dividend",
            r#","symbol":"X","amount":"10","fee":"-1""#,
            "fee",
        ),
        (
            "dividend",
            r#","symbol":"X","amount":"10","tax":"6","fee":"5""#,
            "amount",
        ),
        (
            "dividend",
            r#","symbol":"X","amount":"10","pay_date":"2024-05-06""#,
            "pay_date",
        ),
        (
            "dividend",
            r#","symbol":"X","amount":"10","reinvest":{"quantity":"0","price":"1"}"#,
            "reinvest.quantity",
        ),
        (
            "dividend",
            r#","symbol":"X","amount":"10","reinvest":{"quantity":"1","price":"-1"}"#,
            "reinvest.price",
        ),
        (
            "dividend",
            r#","symbol":"X","amount":"10","reinvest":5"#,
            "reinvest",
        ),
        ("portfolio_settings", r#","cash":"all""#, "cash"),
        (
            "portfolio_settings",
            r#","base_currency":"GBX""#,
            "base_currency",
        ),
        (
            "portfolio_settings",
            r#","base_currency":"GBp""#,
            "base_currency",
        ),
        (
            "portfolio_settings",
            r#","base_currency":"eur""#,
            "base_currency",
        ),
    ];
    for (ty, fields, field) in cases {
        match v2(ty, fields) {
            Err(EventError::Invalid { field: f, .. }) => assert_eq!(f, *field, "{ty} {fields}"),
            other => panic!("{ty} {fields}: expected invalid {field}, got {other:?}"),
        }
    }
    assert_eq!(
        v2("dividend", r#","amount":"10""#),
        Err(EventError::Missing("symbol"))
    );
    assert_eq!(v2("deposit", ""), Err(EventError::Missing("amount")));
    assert_eq!(
        v2(
            "dividend",
            r#","symbol":"X","amount":"10","reinvest":{"price":"1"}"#
        ),
        Err(EventError::Missing("reinvest.quantity"))
    );
    let e = v2("portfolio_settings", r#","base_currency":"GBX""#).unwrap_err();
    assert!(e.to_string().contains("GBP"), "{e}");
}

/// A version-1 event may not use what version 2 added.
#[test]
fn v1_events_cannot_use_v2_types_or_fields() {
    for ty in ["deposit", "dividend", "portfolio_settings", "transfer_in"] {
        let e = tx_err("type", Some(&format!("\"{ty}\"")));
        assert_invalid(e.clone(), "type");
        assert!(e.to_string().contains("needs schema_version 2"), "{e}");
    }
    for (field, value) in [
        ("amount", "1"),
        ("pay_date", "\"2024-03-02\""),
        ("cash", "\"none\""),
    ] {
        let e = tx_err(field, Some(value));
        assert_invalid(e.clone(), field);
        assert!(e.to_string().contains("needs schema_version 2"), "{e}");
    }
}

#[test]
fn splits_parse_and_refuse() {
    let ok = r#"{"event_id":"5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a01","type":"split","symbol":"NVDA","ex_date":"2024-06-10","numerator":10,"denominator":"1","schema_version":2}"#;
    let s = parse_split(ok.as_bytes()).unwrap();
    assert_eq!((s.numerator, s.denominator), (10, 1));
    assert_eq!(s.ex_date.to_string(), "2024-06-10");
    for (from, to, field) in [
        (r#""numerator":10"#, r#""numerator":0"#, "numerator"),
        (r#""numerator":10"#, r#""numerator":1.5"#, "numerator"),
        (
            r#""numerator":10"#,
            r#""numerator":1000000001"#,
            "numerator",
        ),
        (r#""denominator":"1""#, r#""denominator":-1"#, "denominator"),
        (
            r#""ex_date":"2024-06-10""#,
            r#""ex_date":"1800-01-01""#,
            "ex_date",
        ),
        (r#""symbol":"NVDA""#, r#""symbol":"""#, "symbol"),
    ] {
        let e = parse_split(ok.replace(from, to).as_bytes()).unwrap_err();
        assert_invalid(e, field);
    }
    assert_eq!(
        parse_split(
            ok.replace(r#""type":"split""#, r#""type":"merger""#)
                .as_bytes()
        ),
        Err(EventError::UnknownType("merger".into()))
    );
    let s = parse_split(
        ok.replace(r#""numerator":10"#, r#""numerator":1000000000"#)
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(s.numerator, 1_000_000_000);
}

#[test]
fn shorts_settings_and_payments_in_lieu_parse() {
    let t = v2(
        "portfolio_settings",
        r#","cash":"tracked","allow_short":true"#,
    )
    .unwrap();
    assert!(matches!(
        t.kind,
        Kind::PortfolioSettings {
            cash: CashMode::Tracked,
            allow_short: true,
            ..
        }
    ));
    // Absent, null and false are the default.
    for extra in ["", r#","allow_short":null"#, r#","allow_short":false"#] {
        let t = v2("portfolio_settings", &format!(r#","cash":"none"{extra}"#)).unwrap();
        assert!(matches!(
            t.kind,
            Kind::PortfolioSettings {
                allow_short: false,
                ..
            }
        ));
    }
    let t = v2(
        "payment_in_lieu",
        r#","symbol":"AAPL  261218C00150000","amount":"50","pay_date":"2024-05-09""#,
    )
    .unwrap();
    match t.kind {
        Kind::PaymentInLieu {
            symbol,
            amount,
            pay_date,
        } => {
            assert_eq!(symbol.as_str(), "AAPL  261218C00150000");
            assert_eq!(amount, Decimal::from(50));
            assert_eq!(pay_date.to_string(), "2024-05-09");
        }
        other => panic!("{other:?}"),
    }
    // The pay date defaults to the ex-date.
    let t = v2("payment_in_lieu", r#","symbol":"X","amount":"5""#).unwrap();
    assert!(matches!(t.kind, Kind::PaymentInLieu { pay_date, .. } if pay_date == t.trade_date));
    assert_eq!(
        v2("payment_in_lieu", r#","amount":"5""#),
        Err(EventError::Missing("symbol"))
    );
    // A version-1 event may not carry the new field.
    let text = r#"{"event_id":"5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a01","type":"buy","portfolio_id":"p-1","trade_date":"2024-05-07","symbol":"X","quantity":1,"price":1,"allow_short":true}"#;
    assert!(matches!(
        parse_transaction(text.as_bytes()),
        Err(EventError::Invalid {
            field: "allow_short",
            ..
        })
    ));
}

#[test]
fn settings_fingerprints_without_shorts_read_as_before() {
    let plain = v2("portfolio_settings", r#","cash":"tracked""#).unwrap();
    let explicit = v2(
        "portfolio_settings",
        r#","cash":"tracked","allow_short":false"#,
    )
    .unwrap();
    let short = v2(
        "portfolio_settings",
        r#","cash":"tracked","allow_short":true"#,
    )
    .unwrap();
    assert_eq!(plain.fingerprint(), explicit.fingerprint());
    assert!(plain.fingerprint().ends_with("|tracked||2024-05-07|"));
    assert_ne!(plain.fingerprint(), short.fingerprint());
}
