//! The instruments topic's parser (docs/events.md, instruments): every
//! golden definition parses, defaults apply, each refusal names its field,
//! a fingerprint tells a redelivery from a changed definition, and
//! `schemas/instruments.schema.json` accepts what the parser accepts and
//! refuses what both refuse by shape.

use projections::bond::{DayCount, Frequency};
use projections::instrument::{InstrumentKind, Right, Settlement};
use projections::{parse_instrument, EventError, Instrument};
use rust_decimal::Decimal;
use serde_json::Value;

const ID: &str = "00000000-0000-4000-8013-000000000099";

fn parse(fields: &str) -> Result<Instrument, EventError> {
    let text = format!(r#"{{"event_id":"{ID}","type":"instrument","schema_version":2{fields}}}"#);
    parse_instrument(text.as_bytes())
}

const OPTION: &str = r#","symbol":"UC C50","kind":"option","underlying":"UC","right":"call","strike":"50","expiry":"2024-06-21","currency":"USD""#;
const FUTURE: &str = r#","symbol":"ESZ6","kind":"future","multiplier":"50","currency":"USD""#;
const BOND: &str = r#","symbol":"B1","kind":"bond","face":"1000","coupon":"0.05","frequency":2,"day_count":"30/360","issue_date":"2024-01-15","maturity":"2027-01-15","currency":"USD""#;

#[test]
fn every_golden_definition_parses() {
    let mut n = 0;
    for text in [
        include_str!("../../fixtures/golden/shorts.json"),
        include_str!("../../fixtures/golden/futures-and-options.json"),
        include_str!("../../fixtures/golden/bonds.json"),
    ] {
        let g: Value = serde_json::from_str(text).unwrap();
        for v in g["instruments"].as_array().unwrap() {
            let i =
                parse_instrument(v.to_string().as_bytes()).unwrap_or_else(|e| panic!("{v}: {e}"));
            assert_eq!(i.symbol.as_str(), v["symbol"].as_str().unwrap());
            let d = i.definition.expect("a definition");
            assert_eq!(d.kind.name(), v["kind"].as_str().unwrap());
            n += 1;
        }
    }
    assert_eq!(n, 22);
}

#[test]
fn defaults_apply_per_kind() {
    let d = parse(r#","symbol":"MINI","kind":"equity""#)
        .unwrap()
        .definition
        .unwrap();
    assert_eq!((d.multiplier, d.currency), (Decimal::ONE, None));
    let d = parse(OPTION).unwrap().definition.unwrap();
    assert_eq!(d.multiplier, Decimal::ONE_HUNDRED);
    match d.kind {
        InstrumentKind::Option {
            right, settlement, ..
        } => assert_eq!((right, settlement), (Right::Call, Settlement::Physical)),
        other => panic!("{other:?}"),
    }
    let d = parse(BOND).unwrap().definition.unwrap();
    match d.kind {
        InstrumentKind::Bond(b) => {
            assert_eq!(b.redemption(), Decimal::ONE_HUNDRED);
            assert_eq!(
                (b.frequency(), b.day_count()),
                (Some(Frequency::SemiAnnual), Some(DayCount::Thirty360))
            );
        }
        other => panic!("{other:?}"),
    }
    // A zero-coupon bond needs neither frequency nor day count, and
    // ignores them when given.
    let zero = r#","symbol":"Z","kind":"bond","face":"1000","coupon":"0","issue_date":"2024-01-02","maturity":"2024-12-31","currency":"USD""#;
    assert!(parse(zero).is_ok());
    let ignored = parse(&format!(r#"{zero},"frequency":3,"day_count":"30/365""#)).unwrap();
    match ignored.definition.unwrap().kind {
        InstrumentKind::Bond(b) => assert_eq!((b.frequency(), b.day_count()), (None, None)),
        other => panic!("{other:?}"),
    }
    // The largest multiplier is 10^6 itself.
    let d = parse(&FUTURE.replace(r#""50""#, r#""1000000""#))
        .unwrap()
        .definition
        .unwrap();
    assert_eq!(d.multiplier, Decimal::from(1_000_000));
    // A future's expiry and underlying are read when given.
    let d = parse(&format!(
        r#"{FUTURE},"expiry":"2026-12-18","underlying":"SPX""#
    ))
    .unwrap()
    .definition
    .unwrap();
    match d.kind {
        InstrumentKind::Future { expiry, underlying } => {
            assert_eq!(expiry.map(|e| e.to_string()).as_deref(), Some("2026-12-18"));
            assert_eq!(underlying.map(|u| u.to_string()).as_deref(), Some("SPX"));
        }
        other => panic!("{other:?}"),
    }
    // Numbers may be strings of digits; null is absent.
    let d = parse(&format!(r#"{FUTURE},"expiry":null,"underlying":null"#))
        .unwrap()
        .definition
        .unwrap();
    assert_eq!(
        d.kind,
        InstrumentKind::Future {
            expiry: None,
            underlying: None
        }
    );
}

#[test]
fn a_cancellation_needs_only_the_symbol() {
    let i = parse(r#","symbol":"ESZ6","cancelled":true"#).unwrap();
    assert_eq!(i.definition, None);
    // `cancelled: false` is a definition like any other.
    assert!(parse(&format!(r#"{FUTURE},"cancelled":false"#))
        .unwrap()
        .definition
        .is_some());
}

#[test]
fn each_refusal_names_its_field() {
    let with = |base: &str, extra: &str| format!("{base}{extra}");
    let cases: Vec<(String, &str)> = vec![
        (
            r#","symbol":"X","kind":"swap","currency":"USD""#.into(),
            "kind",
        ),
        (with(FUTURE, r#","face":"100""#), "face"),
        (with(BOND, r#","multiplier":"1""#), "multiplier"),
        (
            with(r#","symbol":"E","kind":"equity""#, r#","strike":"1""#),
            "strike",
        ),
        (
            OPTION.replace(r#""underlying":"UC""#, r#""underlying":"UC C50""#),
            "underlying",
        ),
        (
            OPTION.replace(r#""strike":"50""#, r#""strike":"0""#),
            "strike",
        ),
        (
            OPTION.replace(r#""right":"call""#, r#""right":"straddle""#),
            "right",
        ),
        (with(OPTION, r#","settlement":"physically""#), "settlement"),
        (with(OPTION, r#","multiplier":"0""#), "multiplier"),
        (with(OPTION, r#","multiplier":"1000001""#), "multiplier"),
        (BOND.replace(r#""face":"1000""#, r#""face":"-1""#), "face"),
        (
            BOND.replace(r#""coupon":"0.05""#, r#""coupon":"1.5""#),
            "coupon",
        ),
        (
            BOND.replace(r#""coupon":"0.05""#, r#""coupon":"-0.01""#),
            "coupon",
        ),
        (
            BOND.replace(r#""frequency":2"#, r#""frequency":3"#),
            "frequency",
        ),
        (
            BOND.replace(r#""day_count":"30/360""#, r#""day_count":"30/365""#),
            "day_count",
        ),
        (
            BOND.replace(r#""maturity":"2027-01-15""#, r#""maturity":"2024-01-15""#),
            "maturity",
        ),
        (with(BOND, r#","redemption":"0""#), "redemption"),
        (with(FUTURE, r#","cancelled":"yes""#), "cancelled"),
        (r#","symbol":" X","kind":"equity""#.into(), "symbol"),
    ];
    for (fields, field) in &cases {
        match parse(fields) {
            Err(EventError::Invalid { field: f, .. }) => assert_eq!(f, *field, "{fields}"),
            other => panic!("{fields}: expected invalid {field}, got {other:?}"),
        }
    }
    let missing: Vec<(String, &str)> = vec![
        (OPTION.replace(r#","strike":"50""#, ""), "strike"),
        (OPTION.replace(r#","currency":"USD""#, ""), "currency"),
        (FUTURE.replace(r#","multiplier":"50""#, ""), "multiplier"),
        (BOND.replace(r#","frequency":2"#, ""), "frequency"),
        (BOND.replace(r#","day_count":"30/360""#, ""), "day_count"),
        (
            BOND.replace(r#","issue_date":"2024-01-15""#, ""),
            "issue_date",
        ),
        (r#","symbol":"X""#.into(), "kind"),
    ];
    for (fields, field) in &missing {
        assert_eq!(
            parse(fields).err(),
            Some(EventError::Missing(field)),
            "{fields}"
        );
    }
    // Schema version 2 only; the type is `instrument`.
    let v1 = format!(r#"{{"event_id":"{ID}","type":"instrument"{FUTURE}}}"#);
    assert!(matches!(
        parse_instrument(v1.as_bytes()),
        Err(EventError::Invalid {
            field: "schema_version",
            ..
        })
    ));
    let v3 = format!(r#"{{"event_id":"{ID}","type":"instrument","schema_version":3{FUTURE}}}"#);
    assert!(matches!(
        parse_instrument(v3.as_bytes()),
        Err(EventError::UnsupportedVersion(_))
    ));
    let other = format!(r#"{{"event_id":"{ID}","type":"future","schema_version":2{FUTURE}}}"#);
    assert!(matches!(
        parse_instrument(other.as_bytes()),
        Err(EventError::UnknownType(_))
    ));
}

#[test]
fn fingerprints_tell_a_redelivery_from_a_change() {
    let a = parse(FUTURE).unwrap();
    let b = parse(&FUTURE.replace(r#""50""#, r#""50.00""#)).unwrap();
    let c = parse(&FUTURE.replace(r#""50""#, r#""25""#)).unwrap();
    assert_eq!(a.fingerprint(), b.fingerprint());
    assert_ne!(a.fingerprint(), c.fingerprint());
    let gone = parse(r#","symbol":"ESZ6","cancelled":true"#).unwrap();
    assert_ne!(a.fingerprint(), gone.fingerprint());
    assert_ne!(
        parse(OPTION).unwrap().fingerprint(),
        parse(&OPTION.replace("call", "put")).unwrap().fingerprint()
    );
}

const SCHEMA: &str = include_str!("../../schemas/instruments.schema.json");

/// The schema's verdict on `payload`.
fn schema_accepts(payload: &str) -> bool {
    let schema: Value = serde_json::from_str(SCHEMA).unwrap();
    let v = jsonschema::draft202012::new(&schema).expect("a valid JSON Schema");
    v.is_valid(&serde_json::from_str::<Value>(payload).unwrap())
}

fn event(fields: &str) -> String {
    format!(r#"{{"event_id":"{ID}","type":"instrument","schema_version":2{fields}}}"#)
}

#[test]
fn the_schema_and_the_parser_agree() {
    // Accepted by both: every golden definition, the defaults, a
    // withdrawal, nulls, numbers as strings.
    let mut accepted: Vec<String> = Vec::new();
    for text in [
        include_str!("../../fixtures/golden/shorts.json"),
        include_str!("../../fixtures/golden/futures-and-options.json"),
        include_str!("../../fixtures/golden/bonds.json"),
    ] {
        let g: Value = serde_json::from_str(text).unwrap();
        accepted.extend(
            g["instruments"]
                .as_array()
                .unwrap()
                .iter()
                .map(Value::to_string),
        );
    }
    accepted.extend(
        [
            OPTION,
            FUTURE,
            BOND,
            r#","symbol":"MINI","kind":"equity","multiplier":10"#,
            r#","symbol":"ESZ6","cancelled":true"#,
            r#","symbol":"Z","kind":"bond","face":"1000","coupon":0,"issue_date":"2024-01-02","maturity":"2024-12-31","currency":"USD""#,
            r#","symbol":"F","kind":"future","multiplier":"50","currency":"USD","expiry":null"#,
        ]
        .map(event),
    );
    for payload in &accepted {
        assert!(
            parse_instrument(payload.as_bytes()).is_ok(),
            "parser: {payload}"
        );
        assert!(schema_accepts(payload), "schema: {payload}");
    }
    // Refused by both (shape: the schema sees it).
    let refused = [
        r#","symbol":"X","kind":"swap","currency":"USD""#.to_string(),
        format!(r#"{FUTURE},"face":"100""#),
        format!(r#"{BOND},"multiplier":"1""#),
        OPTION.replace(r#""strike":"50""#, r#""strike":"0""#),
        OPTION.replace(r#""right":"call""#, r#""right":"straddle""#),
        OPTION.replace(r#","currency":"USD""#, ""),
        FUTURE.replace(r#","multiplier":"50""#, ""),
        BOND.replace(r#","frequency":2"#, ""),
        BOND.replace(r#""frequency":2"#, r#""frequency":3"#),
        BOND.replace(r#""day_count":"30/360""#, r#""day_count":"30/365""#),
        BOND.replace(r#""coupon":"0.05""#, r#""coupon":1.5"#),
        format!(r#"{OPTION},"multiplier":2000000"#),
        r#","symbol":" X","kind":"equity""#.to_string(),
        r#","symbol":"X""#.to_string(),
    ]
    .map(|f| event(&f));
    for payload in &refused {
        assert!(
            parse_instrument(payload.as_bytes()).is_err(),
            "parser: {payload}"
        );
        assert!(!schema_accepts(payload), "schema: {payload}");
    }
    // Version 1 (or none) is refused by both.
    let v1 = format!(r#"{{"event_id":"{ID}","type":"instrument"{FUTURE}}}"#);
    assert!(parse_instrument(v1.as_bytes()).is_err());
    assert!(!schema_accepts(&v1));
}
