//! The JSON Schemas of `schemas/` agree with the parsers.
//!
//! A corpus of good and bad events goes through both the schema of its
//! topic and the parser (under the default rules). For every entry they
//! must agree: both accept, or both refuse and both name the same field (the
//! parser's reason names it; some schema error sits at that field, or is
//! the `required` error for it). Entries marked `ParserOnly` break a value
//! rule JSON Schema cannot express (decimal places, calendar days, tax ≤
//! amount, a rate's `to` equal to its `from`, a duplicate key, …): the
//! schema must accept them and the parser refuse them, naming the field.
//! So every event navd accepts is valid against its schema, and the
//! schemas refuse nothing navd accepts.
//!
//! The golden books' events and the examples of docs/events.md go through
//! both as well, and mutated schemas show that the corpus notices a schema
//! drifting from the parser.

use jsonschema::error::ValidationErrorKind;
use jsonschema::Validator;
use projections::{
    parse_corporate_action, parse_fx, parse_price, parse_transaction, CorporateEvent, EventError,
    TRANSACTION_TYPES,
};
use serde_json::Value;

const TRANSACTIONS_SCHEMA: &str = include_str!("../../schemas/transactions.schema.json");
const PRICES_SCHEMA: &str = include_str!("../../schemas/prices.schema.json");
const CORPORATE_ACTIONS_SCHEMA: &str = include_str!("../../schemas/corporate_actions.schema.json");
const FX_SCHEMA: &str = include_str!("../../schemas/fx.schema.json");

const GOLDEN: &[(&str, &str)] = &[
    (
        "benchmark",
        include_str!("../../fixtures/golden/benchmark.json"),
    ),
    (
        "cash-and-income",
        include_str!("../../fixtures/golden/cash-and-income.json"),
    ),
    (
        "currencies",
        include_str!("../../fixtures/golden/currencies.json"),
    ),
    (
        "dividends",
        include_str!("../../fixtures/golden/dividends.json"),
    ),
    (
        "mwr-and-periods",
        include_str!("../../fixtures/golden/mwr-and-periods.json"),
    ),
    (
        "small-book",
        include_str!("../../fixtures/golden/small-book.json"),
    ),
    ("splits", include_str!("../../fixtures/golden/splits.json")),
    (
        "tear-sheet",
        include_str!("../../fixtures/golden/tear-sheet.json"),
    ),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Topic {
    Transactions,
    Prices,
    CorporateActions,
    Fx,
}

#[derive(Debug, Clone, Copy)]
enum Expect {
    /// Both accept.
    Accept,
    /// Both refuse, naming this field ("": the payload as a whole).
    Refuse(&'static str),
    /// A value rule the schema cannot check: the schema accepts, the parser
    /// refuses naming this field.
    ParserOnly(&'static str),
}

#[derive(Debug)]
struct Case {
    name: String,
    topic: Topic,
    payload: String,
    expect: Expect,
}

/// The four schemas, compiled.
struct Schemas {
    transactions: Validator,
    prices: Validator,
    corporate_actions: Validator,
    fx: Validator,
}

impl Schemas {
    fn compile(texts: [&Value; 4]) -> Self {
        // Compiling also checks each schema against the 2020-12 meta-schema.
        let compile = |v: &Value| jsonschema::draft202012::new(v).expect("a valid JSON Schema");
        Schemas {
            transactions: compile(texts[0]),
            prices: compile(texts[1]),
            corporate_actions: compile(texts[2]),
            fx: compile(texts[3]),
        }
    }

    fn of(&self, topic: Topic) -> &Validator {
        match topic {
            Topic::Transactions => &self.transactions,
            Topic::Prices => &self.prices,
            Topic::CorporateActions => &self.corporate_actions,
            Topic::Fx => &self.fx,
        }
    }
}

fn schema_values() -> [Value; 4] {
    [
        TRANSACTIONS_SCHEMA,
        PRICES_SCHEMA,
        CORPORATE_ACTIONS_SCHEMA,
        FX_SCHEMA,
    ]
    .map(|t| serde_json::from_str(t).expect("schema file is JSON"))
}

/// One schema error: where in the event, and the property a `required`
/// keyword missed.
#[derive(Debug)]
struct SchemaError {
    path: String,
    missing: Option<String>,
    message: String,
}

/// The schema's verdict: `Ok` or its errors. A payload that is not JSON
/// is refused as a whole.
fn schema_verdict(schemas: &Schemas, topic: Topic, payload: &str) -> Result<(), Vec<SchemaError>> {
    let instance: Value = match serde_json::from_str(payload) {
        Ok(v) => v,
        Err(e) => {
            return Err(vec![SchemaError {
                path: String::new(),
                missing: None,
                message: format!("not JSON: {e}"),
            }])
        }
    };
    let errors: Vec<SchemaError> = schemas
        .of(topic)
        .iter_errors(&instance)
        .map(|e| SchemaError {
            path: e.instance_path.to_string(),
            missing: match &e.kind {
                ValidationErrorKind::Required { property } => property.as_str().map(str::to_string),
                _ => None,
            },
            message: e.to_string(),
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// The parser's verdict: the kind of event accepted, or the refusal.
fn parser_verdict(topic: Topic, payload: &str) -> Result<&'static str, EventError> {
    let bytes = payload.as_bytes();
    match topic {
        Topic::Transactions => parse_transaction(bytes).map(|t| t.kind.name()),
        Topic::Prices => parse_price(bytes).map(|_| "price"),
        Topic::CorporateActions => parse_corporate_action(bytes).map(|e| match e {
            CorporateEvent::Split(_) => "split",
            CorporateEvent::Action(a) => a.kind.name(),
        }),
        Topic::Fx => parse_fx(bytes).map(|_| "fx"),
    }
}

/// The field a refusal names ("" for the payload as a whole).
fn named_field(e: &EventError) -> &'static str {
    match e {
        EventError::Missing(f) => f,
        EventError::Invalid { field, .. } => field,
        EventError::UnknownType(_) => "type",
        EventError::UnsupportedVersion(_) => "schema_version",
        EventError::NotJson(_) | EventError::NotObject => "",
    }
}

/// Whether some schema error is about `field` (`a.b` is the nested `/a/b`):
/// at its location, or the `required` error for it.
fn schema_names(errors: &[SchemaError], field: &str) -> bool {
    let pointer = if field.is_empty() {
        String::new()
    } else {
        format!("/{}", field.replace('.', "/"))
    };
    let (parent, last) = pointer.rsplit_once('/').unwrap_or(("", ""));
    // An array's items are named without their index: `lots.lot` is
    // `/lots/0/lot`.
    let unindexed = |path: &str| -> String {
        path.split('/')
            .filter(|seg| seg.is_empty() || !seg.bytes().all(|b| b.is_ascii_digit()))
            .collect::<Vec<_>>()
            .join("/")
    };
    errors.iter().any(|e| {
        let path = unindexed(&e.path);
        path == pointer || (path == parent && e.missing.as_deref() == Some(last))
    })
}

fn describe(errors: &[SchemaError]) -> String {
    errors
        .iter()
        .map(|e| format!("{:?}: {}", e.path, e.message))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why the schema and the parser disagree on `case`, if they do.
fn disagreement(schemas: &Schemas, case: &Case) -> Option<String> {
    let schema = schema_verdict(schemas, case.topic, &case.payload);
    let parser = parser_verdict(case.topic, &case.payload);
    let problem = match (case.expect, &schema, &parser) {
        (Expect::Accept, Ok(()), Ok(_)) => None,
        (Expect::Refuse(field), Err(errors), Err(e)) => {
            if named_field(e) != field {
                Some(format!("the parser names `{}` ({e})", named_field(e)))
            } else if !schema_names(errors, field) {
                Some(format!(
                    "no schema error names `{field}`: {}",
                    describe(errors)
                ))
            } else {
                None
            }
        }
        (Expect::ParserOnly(field), Ok(()), Err(e)) => (named_field(e) != field)
            .then(|| format!("the parser names `{}` ({e})", named_field(e))),
        _ => Some(format!(
            "schema: {}; parser: {}",
            match &schema {
                Ok(()) => "accepts".to_string(),
                Err(errors) => format!("refuses ({})", describe(errors)),
            },
            match &parser {
                Ok(kind) => format!("accepts a {kind}"),
                Err(e) => format!("refuses ({e})"),
            }
        )),
    };
    problem.map(|p| {
        format!(
            "{} [{:?}, expected {:?}]: {p}\n    {}",
            case.name, case.topic, case.expect, case.payload
        )
    })
}

fn disagreements(schemas: &Schemas, corpus: &[Case]) -> Vec<String> {
    corpus
        .iter()
        .filter_map(|c| disagreement(schemas, c))
        .collect()
}

// ---------------------------------------------------------------------
// The corpus. Payloads are raw JSON text: the parser reads numbers from
// their text (`1.0` is not `1` to it), so they are never re-serialized.

const ID: &str = r#""5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a01""#;

/// The docs' buy, version 1.
const BUY: &[(&str, &str)] = &[
    ("event_id", ID),
    ("type", r#""buy""#),
    ("portfolio_id", r#""p-1001""#),
    ("symbol", r#""AAPL""#),
    ("quantity", r#""10""#),
    ("price", r#""187.23""#),
    ("fee", r#""1.50""#),
    ("trade_date", r#""2024-03-01""#),
    ("occurred_at", r#""2024-03-01T14:30:00Z""#),
    ("schema_version", "1"),
];

/// A version-2 event of type `ty` with `fields` after the common ones.
fn v2(ty: &str, fields: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut out = vec![
        ("event_id".to_string(), ID.to_string()),
        ("type".to_string(), format!("\"{ty}\"")),
        ("portfolio_id".to_string(), r#""p-1""#.to_string()),
        ("trade_date".to_string(), r#""2024-05-07""#.to_string()),
        ("schema_version".to_string(), "2".to_string()),
    ];
    out.extend(fields.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    out
}

fn owned(fields: &[(&str, &str)]) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `fields` with `changes`: a field set to a raw JSON text (in place, or
/// added at the end) or removed (`None`); as one JSON object's text.
fn with(fields: &[(String, String)], changes: &[(&str, Option<&str>)]) -> String {
    let mut fields = fields.to_vec();
    for (key, value) in changes {
        match (fields.iter().position(|(k, _)| k == key), value) {
            (Some(i), Some(v)) => fields[i].1 = v.to_string(),
            (Some(i), None) => {
                fields.remove(i);
            }
            (None, Some(v)) => fields.push((key.to_string(), v.to_string())),
            (None, None) => panic!("no field `{key}` to remove"),
        }
    }
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("\"{k}\": {v}"))
        .collect();
    format!("{{{}}}", body.join(", "))
}

const PRICE: &[(&str, &str)] = &[
    ("symbol", r#""AAPL""#),
    ("date", r#""2024-03-01""#),
    ("close", r#""189.10""#),
];

const SPLIT: &[(&str, &str)] = &[
    ("event_id", ID),
    ("type", r#""split""#),
    ("symbol", r#""NVDA""#),
    ("ex_date", r#""2024-06-10""#),
    ("numerator", "10"),
    ("denominator", r#""1""#),
    ("schema_version", "2"),
];

/// The docs' rate: 1 USD = 0.89 EUR on 4 March 2024.
const FX: &[(&str, &str)] = &[
    ("from", r#""USD""#),
    ("to", r#""EUR""#),
    ("date", r#""2024-03-04""#),
    ("rate", r#""0.8900""#),
];

/// Currency codes every currency field refuses, each with what it is.
const BAD_CURRENCIES: &[(&str, &str)] = &[
    ("lower case", r#""eur""#),
    ("mixed case", r#""Eur""#),
    ("GBX (pence)", r#""GBX""#),
    ("GBp (pence, as quoted)", r#""GBp""#),
    ("gbx", r#""gbx""#),
    ("ZAC (cents)", r#""ZAC""#),
    ("ILA (agorot)", r#""ILA""#),
    ("of two letters", r#""EU""#),
    ("of four letters", r#""EURO""#),
    ("with a digit", r#""E1R""#),
    ("with a space", r#"" EUR""#),
    ("with an accent", r#""ÉUR""#),
    ("empty", r#""""#),
    ("a number", "978"),
    ("a boolean", "true"),
    ("an array", r#"["EUR"]"#),
    ("an object", r#"{"code": "EUR"}"#),
];

struct Corpus(Vec<Case>);

impl Corpus {
    fn add(&mut self, topic: Topic, name: &str, payload: String, expect: Expect) {
        self.0.push(Case {
            name: name.to_string(),
            topic,
            payload,
            expect,
        });
    }
    fn tx(&mut self, name: &str, payload: String, expect: Expect) {
        self.add(Topic::Transactions, name, payload, expect);
    }
    fn price(&mut self, name: &str, payload: String, expect: Expect) {
        self.add(Topic::Prices, name, payload, expect);
    }
    fn split(&mut self, name: &str, payload: String, expect: Expect) {
        self.add(Topic::CorporateActions, name, payload, expect);
    }
    fn fx(&mut self, name: &str, payload: String, expect: Expect) {
        self.add(Topic::Fx, name, payload, expect);
    }
}

fn corpus() -> Vec<Case> {
    use Expect::{Accept, ParserOnly, Refuse};
    let mut c = Corpus(Vec::new());
    let buy = owned(BUY);
    let b = |changes: &[(&str, Option<&str>)]| with(&buy, changes);

    // --- buy and sell (version 1) ---------------------------------------
    c.tx("buy: the docs' example", b(&[]), Accept);
    c.tx(
        "buy: versionless, minimal",
        b(&[
            ("fee", None),
            ("occurred_at", None),
            ("schema_version", None),
        ]),
        Accept,
    );
    c.tx(
        "sell: schema_version \"1\"",
        b(&[
            ("type", Some(r#""sell""#)),
            ("schema_version", Some(r#""1""#)),
        ]),
        Accept,
    );
    c.tx(
        "buy: JSON numbers, an exponent, price 0",
        b(&[
            ("quantity", Some("1.5e2")),
            ("price", Some("0")),
            ("fee", Some("0.25")),
        ]),
        Accept,
    );
    c.tx(
        "buy: number strings with leading and trailing zeros, fee -0",
        b(&[
            ("quantity", Some(r#""007""#)),
            ("price", Some(r#""1.500000000000000""#)),
            ("fee", Some(r#""-0""#)),
        ]),
        Accept,
    );
    c.tx(
        "buy: the largest magnitude and the most decimal places",
        b(&[("price", Some(r#""999999999999.9999999999""#))]),
        Accept,
    );
    c.tx(
        "buy: occurred_at with an offset, fractions, lower-case t and z",
        b(&[(
            "occurred_at",
            Some(r#""2024-03-01t16:30:00.123456789+02:00""#),
        )]),
        Accept,
    );
    c.tx(
        "buy: occurred_at with a space and a negative offset",
        b(&[("occurred_at", Some(r#""2024-03-01 09:30:00-05:00""#))]),
        Accept,
    );
    c.tx(
        "buy: unknown fields are ignored",
        b(&[
            ("note", Some(r#"{"any": [1, 2.5, null]}"#)),
            ("currency_note", Some(r#""EUR""#)),
            ("rate", Some(r#""1.08""#)),
        ]),
        Accept,
    );
    c.tx(
        "buy v1: null version-2 fields are absent",
        b(&[("amount", Some("null")), ("cash", Some("null"))]),
        Accept,
    );
    c.tx(
        "buy: null fee and occurred_at are absent",
        b(&[("fee", Some("null")), ("occurred_at", Some("null"))]),
        Accept,
    );
    c.tx(
        "buy: escapes in keys and values, upper-case UUID",
        with(
            &buy,
            &[
                ("symbol", None),
                (
                    "event_id",
                    Some(r#""5B0C1C9E-2F0A-4A0E-9A43-1F3E8F1F2A01""#),
                ),
                ("sym\\u0062ol", Some(r#""\u0041APL""#)),
            ],
        ),
        Accept,
    );
    c.tx(
        "buy v2: fields of other types are ignored",
        with(
            &v2(
                "buy",
                &[("symbol", r#""A""#), ("quantity", "1"), ("price", "2")],
            ),
            &[("amount", Some(r#""not read""#)), ("cash", Some("7"))],
        ),
        Accept,
    );

    c.tx("not JSON", "this is not json".to_string(), Refuse(""));
    c.tx("not an object", "[1, 2]".to_string(), Refuse(""));
    c.tx("a string", r#""buy""#.to_string(), Refuse(""));
    c.tx(
        "missing event_id",
        b(&[("event_id", None)]),
        Refuse("event_id"),
    );
    c.tx("missing type", b(&[("type", None)]), Refuse("type"));
    c.tx(
        "missing portfolio_id",
        b(&[("portfolio_id", None)]),
        Refuse("portfolio_id"),
    );
    c.tx(
        "buy: missing trade_date",
        b(&[("trade_date", None)]),
        Refuse("trade_date"),
    );
    c.tx(
        "buy: null trade_date",
        b(&[("trade_date", Some("null"))]),
        Refuse("trade_date"),
    );
    c.tx(
        "buy: missing symbol",
        b(&[("symbol", None)]),
        Refuse("symbol"),
    );
    c.tx(
        "buy: null symbol",
        b(&[("symbol", Some("null"))]),
        Refuse("symbol"),
    );
    c.tx(
        "buy: missing quantity",
        b(&[("quantity", None)]),
        Refuse("quantity"),
    );
    c.tx("buy: missing price", b(&[("price", None)]), Refuse("price"));
    for (what, bad) in [
        ("a boolean", "true"),
        ("an array", r#"["10"]"#),
        ("an object", r#"{"value": 10}"#),
        ("zero", r#""0""#),
        ("zero as a number", "0"),
        ("zero with decimals", r#""0.000""#),
        ("negative", r#""-1""#),
        ("negative as a number", "-1"),
        ("a space", r#"" 10""#),
        ("a plus sign", r#""+10""#),
        ("a trailing dot", r#""10.""#),
        ("a leading dot", r#"".5""#),
        ("NaN", r#""NaN""#),
        ("Infinity", r#""Infinity""#),
        ("a decimal comma", r#""1,5""#),
        ("hex", r#""0x10""#),
        ("an empty string", r#""""#),
        ("an exponent without digits", r#""1e""#),
    ] {
        c.tx(
            &format!("buy: quantity {what}"),
            b(&[("quantity", Some(bad))]),
            Refuse("quantity"),
        );
    }
    c.tx(
        "buy: negative price",
        b(&[("price", Some(r#""-0.01""#))]),
        Refuse("price"),
    );
    c.tx(
        "sell: negative fee",
        b(&[("type", Some(r#""sell""#)), ("fee", Some("-1"))]),
        Refuse("fee"),
    );
    for (what, bad) in [
        ("not a UUID", r#""not-a-uuid""#),
        ("without hyphens", r#""5b0c1c9e2f0a4a0e9a431f3e8f1f2a01""#),
        ("braced", r#""{5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a01}""#),
        (
            "a non-hex digit",
            r#""5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a0g""#,
        ),
        ("a number", "5"),
    ] {
        c.tx(
            &format!("event_id {what}"),
            b(&[("event_id", Some(bad))]),
            Refuse("event_id"),
        );
    }
    for (what, bad) in [
        ("without zero padding", r#""2024-3-1""#),
        ("without hyphens", r#""20240301""#),
        ("with a time", r#""2024-03-01T00:00:00Z""#),
        ("month 13", r#""2024-13-01""#),
        ("day 32", r#""2024-03-32""#),
        ("as a number", "20240301"),
    ] {
        c.tx(
            &format!("trade_date {what}"),
            b(&[("trade_date", Some(bad))]),
            Refuse("trade_date"),
        );
    }
    let long_id = format!("\"{}\"", "a".repeat(65));
    for (what, bad) in [
        ("empty", r#""""#),
        ("starting with a hyphen", r#""-p""#),
        ("with a space", r#""p 1""#),
        ("with a slash", r#""p/1""#),
        ("of 65 characters", long_id.as_str()),
        ("a number", "7"),
    ] {
        c.tx(
            &format!("portfolio_id {what}"),
            b(&[("portfolio_id", Some(bad))]),
            Refuse("portfolio_id"),
        );
    }
    c.tx(
        "portfolio_id of 64 characters, starting with a digit",
        b(&[(
            "portfolio_id",
            Some(&format!("\"9{}\"", "a:._-".repeat(12) + "bcd")),
        )]),
        Accept,
    );
    let long_symbol = format!("\"{}\"", "A".repeat(33));
    for (what, bad) in [
        ("empty", r#""""#),
        ("of 33 characters", long_symbol.as_str()),
        ("with a dollar", r#""A$""#),
        ("a number", "7"),
    ] {
        c.tx(
            &format!("buy: symbol {what}"),
            b(&[("symbol", Some(bad))]),
            Refuse("symbol"),
        );
    }
    c.tx(
        "buy: symbol of 32 characters starting with a dot",
        b(&[("symbol", Some(&format!("\".{}\"", "B".repeat(31))))]),
        Accept,
    );
    for (what, bad) in [
        ("without an offset", r#""2024-03-01T14:30:00""#),
        ("in words", r#""yesterday""#),
        ("a date only", r#""2024-03-01""#),
        ("hour 24", r#""2024-03-01T24:00:00Z""#),
        ("as a number", "1709303400"),
    ] {
        c.tx(
            &format!("buy: occurred_at {what}"),
            b(&[("occurred_at", Some(bad))]),
            Refuse("occurred_at"),
        );
    }
    for (what, bad) in [
        ("unknown", r#""gift""#),
        ("in upper case", r#""Buy""#),
        ("a number", "1"),
    ] {
        c.tx(
            &format!("type {what}"),
            b(&[("type", Some(bad))]),
            Refuse("type"),
        );
    }
    for (what, bad) in [
        ("3", "3"),
        ("\"3\"", r#""3""#),
        ("0", "0"),
        ("\"v2\"", r#""v2""#),
        ("\"01\"", r#""01""#),
        ("true", "true"),
    ] {
        c.tx(
            &format!("schema_version {what}"),
            b(&[("schema_version", Some(bad))]),
            Refuse("schema_version"),
        );
    }

    // Version 1 (or none) cannot use what version 2 added.
    for ty in ["deposit", "dividend", "portfolio_settings", "transfer_in"] {
        c.tx(
            &format!("v1 {ty}"),
            with(
                &v2(ty, &[("amount", "1"), ("symbol", r#""X""#)]),
                &[("schema_version", Some("1"))],
            ),
            Refuse("type"),
        );
    }
    c.tx(
        "versionless deposit",
        with(
            &v2("deposit", &[("amount", "1")]),
            &[("schema_version", None)],
        ),
        Refuse("type"),
    );
    for (field, value) in [
        ("amount", "1"),
        ("tax", r#""0""#),
        ("cost", "5"),
        ("pay_date", r#""2024-03-02""#),
        ("reinvest", r#"{"quantity": 1, "price": 1}"#),
        ("cash", r#""none""#),
        ("base_currency", r#""USD""#),
        ("currency", r#""USD""#),
        ("fx_rate", r#""1.08""#),
    ] {
        c.tx(
            &format!("buy v1 with {field}"),
            b(&[(field, Some(value))]),
            Refuse(field),
        );
    }
    c.tx(
        "versionless buy with pay_date",
        b(&[
            ("schema_version", None),
            ("pay_date", Some(r#""2024-03-02""#)),
        ]),
        Refuse("pay_date"),
    );

    // Value rules only navd checks.
    c.tx(
        "buy: a key given twice",
        b(&[]).replace(r#""fee": "1.50","#, r#""fee": "1.50", "fee": "2","#),
        ParserOnly("fee"),
    );
    c.tx(
        "buy: 11 decimal places",
        b(&[("quantity", Some(r#""0.00000000001""#))]),
        ParserOnly("quantity"),
    );
    c.tx(
        "buy: 11 decimal places through an exponent",
        b(&[("quantity", Some("1e-11"))]),
        ParserOnly("quantity"),
    );
    c.tx(
        "buy: 10^12",
        b(&[("price", Some(r#""1000000000000""#))]),
        ParserOnly("price"),
    );
    c.tx(
        "buy: 10^12 as a JSON number",
        b(&[("price", Some("1e12"))]),
        ParserOnly("price"),
    );
    c.tx(
        "buy: 30 February",
        b(&[("trade_date", Some(r#""2024-02-30""#))]),
        ParserOnly("trade_date"),
    );
    c.tx(
        "buy: before the earliest date",
        b(&[("trade_date", Some(r#""1899-12-31""#))]),
        ParserOnly("trade_date"),
    );
    c.tx(
        "buy: occurred_at before the earliest date in UTC",
        b(&[("occurred_at", Some(r#""1900-01-01T00:30:00+01:00""#))]),
        ParserOnly("occurred_at"),
    );
    c.tx(
        "buy: occurred_at on 31 April",
        b(&[("occurred_at", Some(r#""2024-04-31T10:00:00Z""#))]),
        ParserOnly("occurred_at"),
    );
    c.tx(
        "buy: schema_version 1.0",
        b(&[("schema_version", Some("1.0"))]),
        ParserOnly("schema_version"),
    );
    c.tx(
        "deposit: schema_version 2.0",
        with(
            &v2("deposit", &[("amount", "1")]),
            &[("schema_version", Some("2.0"))],
        ),
        ParserOnly("schema_version"),
    );

    // --- portfolio_settings --------------------------------------------
    let settings = v2(
        "portfolio_settings",
        &[("cash", r#""tracked""#), ("base_currency", r#""EUR""#)],
    );
    c.tx("settings: tracked, EUR", with(&settings, &[]), Accept);
    c.tx(
        "settings: no date, no cash, no currency",
        with(
            &settings,
            &[
                ("trade_date", None),
                ("cash", None),
                ("base_currency", None),
            ],
        ),
        Accept,
    );
    c.tx(
        "settings: cash none, nulls",
        with(
            &settings,
            &[
                ("cash", Some(r#""none""#)),
                ("base_currency", Some("null")),
                ("trade_date", Some("null")),
            ],
        ),
        Accept,
    );
    for (what, bad) in [
        ("all", r#""all""#),
        ("Tracked", r#""Tracked""#),
        ("a boolean", "true"),
    ] {
        c.tx(
            &format!("settings: cash {what}"),
            with(&settings, &[("cash", Some(bad))]),
            Refuse("cash"),
        );
    }
    for bad in ["GBX", "ZAC", "ILA", "gbx", "eur", "EURO", "E1R", "GBp"] {
        c.tx(
            &format!("settings: base_currency {bad}"),
            with(&settings, &[("base_currency", Some(&format!("\"{bad}\"")))]),
            Refuse("base_currency"),
        );
    }
    c.tx(
        "settings: allow_short with cash tracked",
        with(&settings, &[("allow_short", Some("true"))]),
        Accept,
    );
    c.tx(
        "settings: allow_short false, cash none",
        with(
            &settings,
            &[("allow_short", Some("false")), ("cash", Some(r#""none""#))],
        ),
        Accept,
    );
    for (what, cash) in [("cash none", Some(r#""none""#)), ("no cash", None)] {
        c.tx(
            &format!("settings: allow_short with {what}"),
            with(&settings, &[("allow_short", Some("true")), ("cash", cash)]),
            Refuse("allow_short"),
        );
    }
    c.tx(
        "settings: allow_short a string",
        with(&settings, &[("allow_short", Some(r#""true""#))]),
        Refuse("allow_short"),
    );
    c.tx(
        "settings: a malformed trade_date",
        with(&settings, &[("trade_date", Some(r#""2024-3-1""#))]),
        Refuse("trade_date"),
    );
    c.tx(
        "settings: a trade_date before the earliest date",
        with(&settings, &[("trade_date", Some(r#""1800-01-01""#))]),
        ParserOnly("trade_date"),
    );

    // --- deposit, withdrawal -------------------------------------------
    c.tx(
        "deposit",
        with(&v2("deposit", &[("amount", r#""10000""#)]), &[]),
        Accept,
    );
    c.tx(
        "withdrawal: amount as a number, schema_version \"2\"",
        with(
            &v2("withdrawal", &[("amount", "1000.5")]),
            &[("schema_version", Some(r#""2""#))],
        ),
        Accept,
    );
    c.tx(
        "deposit: a quantity is another type's field, ignored",
        with(
            &v2("deposit", &[("amount", "5"), ("quantity", r#""garbage""#)]),
            &[],
        ),
        Accept,
    );
    c.tx(
        "deposit: amount 0",
        with(&v2("deposit", &[("amount", r#""0""#)]), &[]),
        Refuse("amount"),
    );
    c.tx(
        "withdrawal: missing amount",
        with(&v2("withdrawal", &[]), &[]),
        Refuse("amount"),
    );
    c.tx(
        "deposit: missing trade_date",
        with(&v2("deposit", &[("amount", "1")]), &[("trade_date", None)]),
        Refuse("trade_date"),
    );

    // --- fee, tax, fee_refund, tax_refund ------------------------------
    for ty in ["fee", "tax", "fee_refund", "tax_refund"] {
        c.tx(
            &format!("{ty} with a symbol"),
            with(
                &v2(ty, &[("amount", r#""12.5""#), ("symbol", r#""ACME""#)]),
                &[],
            ),
            Accept,
        );
        c.tx(
            &format!("{ty} without a symbol"),
            with(&v2(ty, &[("amount", "30")]), &[]),
            Accept,
        );
        c.tx(
            &format!("{ty}: negative amount"),
            with(&v2(ty, &[("amount", "-1")]), &[]),
            Refuse("amount"),
        );
    }
    c.tx(
        "fee: a bad symbol",
        with(&v2("fee", &[("amount", "1"), ("symbol", r#""a/b""#)]), &[]),
        Refuse("symbol"),
    );
    for bad in [r#"" ab""#, r#""ab ""#] {
        c.tx(
            &format!("fee: a symbol starting or ending with a space: {bad}"),
            with(&v2("fee", &[("amount", "1"), ("symbol", bad)]), &[]),
            Refuse("symbol"),
        );
    }
    c.tx(
        "tax_refund: amount not a number",
        with(&v2("tax_refund", &[("amount", r#""x""#)]), &[]),
        Refuse("amount"),
    );

    // --- interest ------------------------------------------------------
    c.tx(
        "interest with tax",
        with(
            &v2("interest", &[("amount", r#""20""#), ("tax", r#""5""#)]),
            &[],
        ),
        Accept,
    );
    c.tx(
        "interest: tax equal to the amount",
        with(&v2("interest", &[("amount", "20"), ("tax", "20")]), &[]),
        Accept,
    );
    c.tx(
        "interest without tax",
        with(&v2("interest", &[("amount", "0.01")]), &[]),
        Accept,
    );
    c.tx(
        "interest: negative tax",
        with(
            &v2("interest", &[("amount", "10"), ("tax", r#""-1""#)]),
            &[],
        ),
        Refuse("tax"),
    );
    c.tx(
        "interest: tax above the amount",
        with(&v2("interest", &[("amount", "10"), ("tax", "11")]), &[]),
        ParserOnly("tax"),
    );

    // --- transfers -----------------------------------------------------
    let transfer = |ty: &str, extra: &[(&str, &str)]| {
        let mut f = vec![
            ("symbol", r#""WIDG""#),
            ("quantity", r#""50""#),
            ("price", r#""40""#),
        ];
        f.extend_from_slice(extra);
        v2(ty, &f)
    };
    c.tx(
        "transfer_in with a cost basis",
        with(&transfer("transfer_in", &[("cost", r#""1500""#)]), &[]),
        Accept,
    );
    c.tx(
        "transfer_in without a cost basis, price 0",
        with(&transfer("transfer_in", &[]), &[("price", Some("0"))]),
        Accept,
    );
    c.tx(
        "transfer_out",
        with(&transfer("transfer_out", &[]), &[]),
        Accept,
    );
    c.tx(
        "transfer_in: negative cost",
        with(&transfer("transfer_in", &[("cost", "-1")]), &[]),
        Refuse("cost"),
    );
    c.tx(
        "transfer_in: quantity 0",
        with(
            &transfer("transfer_in", &[]),
            &[("quantity", Some(r#""0""#))],
        ),
        Refuse("quantity"),
    );
    c.tx(
        "transfer_out: missing price",
        with(&transfer("transfer_out", &[]), &[("price", None)]),
        Refuse("price"),
    );
    c.tx(
        "transfer_out: missing symbol",
        with(&transfer("transfer_out", &[]), &[("symbol", None)]),
        Refuse("symbol"),
    );

    // --- payment_in_lieu ---------------------------------------------------
    let in_lieu = v2(
        "payment_in_lieu",
        &[
            ("symbol", r#""AAPL  261218C00150000""#),
            ("amount", r#""50""#),
            ("pay_date", r#""2024-05-09""#),
        ],
    );
    let l = |changes: &[(&str, Option<&str>)]| with(&in_lieu, changes);
    c.tx("payment_in_lieu: everything", l(&[]), Accept);
    c.tx(
        "payment_in_lieu: paid on its ex-date",
        l(&[("pay_date", None)]),
        Accept,
    );
    c.tx(
        "payment_in_lieu: no symbol",
        l(&[("symbol", None)]),
        Refuse("symbol"),
    );
    c.tx(
        "payment_in_lieu: amount 0",
        l(&[("amount", Some("0"))]),
        Refuse("amount"),
    );
    for field in ["tax", "fee"] {
        c.tx(
            &format!("payment_in_lieu: a {field}, even 0"),
            l(&[(field, Some(r#""0""#))]),
            Refuse(field),
        );
    }
    c.tx(
        "payment_in_lieu: a reinvestment",
        l(&[("reinvest", Some(r#"{"quantity": "1", "price": "1"}"#))]),
        Refuse("reinvest"),
    );
    c.tx(
        "payment_in_lieu: paid before its ex-date",
        l(&[("pay_date", Some(r#""2024-05-06""#))]),
        ParserOnly("pay_date"),
    );

    // --- dividend ------------------------------------------------------
    let dividend = v2(
        "dividend",
        &[
            ("symbol", r#""XYZ""#),
            ("amount", r#""100""#),
            ("tax", r#""15""#),
            ("fee", r#""0.5""#),
            ("pay_date", r#""2024-05-09""#),
            ("reinvest", r#"{"quantity": "1.7", "price": 50}"#),
        ],
    );
    let d = |changes: &[(&str, Option<&str>)]| with(&dividend, changes);
    c.tx("dividend: everything", d(&[]), Accept);
    c.tx(
        "dividend: minimal",
        d(&[
            ("tax", None),
            ("fee", None),
            ("pay_date", None),
            ("reinvest", None),
        ]),
        Accept,
    );
    c.tx(
        "dividend: paid on its ex-date, nulls",
        d(&[
            ("pay_date", Some(r#""2024-05-07""#)),
            ("reinvest", Some("null")),
            ("fee", Some("null")),
        ]),
        Accept,
    );
    c.tx(
        "dividend: tax + fee equal to the amount, unknown field in reinvest",
        d(&[
            ("tax", Some("99.5")),
            (
                "reinvest",
                Some(r#"{"quantity": 1, "price": "0", "note": "x"}"#),
            ),
        ]),
        Accept,
    );
    c.tx(
        "dividend: missing symbol",
        d(&[("symbol", None)]),
        Refuse("symbol"),
    );
    c.tx(
        "dividend: missing amount",
        d(&[("amount", None)]),
        Refuse("amount"),
    );
    c.tx(
        "dividend: amount 0",
        d(&[("amount", Some("0")), ("tax", None), ("fee", None)]),
        Refuse("amount"),
    );
    c.tx(
        "dividend: negative tax",
        d(&[("tax", Some(r#""-1""#))]),
        Refuse("tax"),
    );
    c.tx(
        "dividend: negative fee",
        d(&[("fee", Some("-0.5"))]),
        Refuse("fee"),
    );
    c.tx(
        "dividend: a malformed pay_date",
        d(&[("pay_date", Some(r#""9 May""#))]),
        Refuse("pay_date"),
    );
    c.tx(
        "dividend: reinvest a number",
        d(&[("reinvest", Some("5"))]),
        Refuse("reinvest"),
    );
    c.tx(
        "dividend: reinvest an array",
        d(&[("reinvest", Some(r#"[1.7, 50]"#))]),
        Refuse("reinvest"),
    );
    c.tx(
        "dividend: reinvest without quantity",
        d(&[("reinvest", Some(r#"{"price": "1"}"#))]),
        Refuse("reinvest.quantity"),
    );
    c.tx(
        "dividend: reinvest without price",
        d(&[("reinvest", Some(r#"{"quantity": "1"}"#))]),
        Refuse("reinvest.price"),
    );
    c.tx(
        "dividend: reinvest quantity 0",
        d(&[("reinvest", Some(r#"{"quantity": "0", "price": "1"}"#))]),
        Refuse("reinvest.quantity"),
    );
    c.tx(
        "dividend: reinvest price negative",
        d(&[("reinvest", Some(r#"{"quantity": 1, "price": -1}"#))]),
        Refuse("reinvest.price"),
    );
    c.tx(
        "dividend: tax + fee above the amount",
        d(&[("tax", Some(r#""99.6""#))]),
        ParserOnly("amount"),
    );
    c.tx(
        "dividend: paid before its ex-date",
        d(&[("pay_date", Some(r#""2024-05-06""#))]),
        ParserOnly("pay_date"),
    );
    c.tx(
        "dividend: pay_date 31 June",
        d(&[("pay_date", Some(r#""2024-06-31""#))]),
        ParserOnly("pay_date"),
    );
    c.tx(
        "dividend: reinvest quantity with 11 decimal places",
        d(&[(
            "reinvest",
            Some(r#"{"quantity": "1.00000000001", "price": 1}"#),
        )]),
        ParserOnly("reinvest.quantity"),
    );
    // The parser names the inner key without its `reinvest.` prefix here.
    c.tx(
        "dividend: a key given twice in reinvest",
        d(&[(
            "reinvest",
            Some(r#"{"quantity": 1, "price": 1, "price": 2}"#),
        )]),
        ParserOnly("price"),
    );

    // --- currency, fx_rate (version 2, every type but settings) --------
    let trade = v2(
        "buy",
        &[
            ("symbol", r#""SAP""#),
            ("quantity", r#""10""#),
            ("price", r#""150.25""#),
            ("currency", r#""EUR""#),
            ("fx_rate", r#""1.0850""#),
        ],
    );
    let f = |changes: &[(&str, Option<&str>)]| with(&trade, changes);
    c.tx("buy v2: currency and fx_rate", f(&[]), Accept);
    c.tx(
        "sell v2: currency without fx_rate (the day's rate)",
        f(&[("type", Some(r#""sell""#)), ("fx_rate", None)]),
        Accept,
    );
    c.tx(
        "buy v2: currency with a null fx_rate",
        f(&[("fx_rate", Some("null"))]),
        Accept,
    );
    c.tx(
        "buy v2: null currency and fx_rate are absent",
        f(&[("currency", Some("null")), ("fx_rate", Some("null"))]),
        Accept,
    );
    c.tx(
        "buy v2: schema_version \"2\", fx_rate as a JSON number",
        f(&[
            ("schema_version", Some(r#""2""#)),
            ("fx_rate", Some("1.085")),
        ]),
        Accept,
    );
    for (what, good) in [
        ("with an exponent", r#""1.085e0""#),
        ("as a number with an exponent", "1085E-3"),
        (
            "with trailing zeros past 10 places",
            r#""1.085000000000000""#,
        ),
        ("of 10 decimal places", r#""0.0000000001""#),
        ("the largest", "999999999999.9999999999"),
        ("with leading zeros", r#""001.085""#),
    ] {
        c.tx(
            &format!("buy v2: fx_rate {what}"),
            f(&[("fx_rate", Some(good))]),
            Accept,
        );
    }
    // Every type but settings takes them.
    for (ty, fields) in [
        ("deposit", &[("amount", r#""1000""#)][..]),
        ("withdrawal", &[("amount", "50")][..]),
        ("fee", &[("amount", r#""2""#), ("symbol", r#""SAP""#)][..]),
        ("tax", &[("amount", r#""2""#)][..]),
        ("fee_refund", &[("amount", r#""2""#)][..]),
        ("tax_refund", &[("amount", r#""2""#)][..]),
        ("interest", &[("amount", r#""3""#), ("tax", r#""1""#)][..]),
        (
            "transfer_in",
            &[("symbol", r#""SAP""#), ("quantity", "5"), ("price", "150")][..],
        ),
        (
            "transfer_out",
            &[("symbol", r#""SAP""#), ("quantity", "5"), ("price", "150")][..],
        ),
        (
            "dividend",
            &[("symbol", r#""SAP""#), ("amount", "22"), ("tax", "5.8")][..],
        ),
    ] {
        let event = v2(ty, fields);
        c.tx(
            &format!("{ty} in GBP at a charged rate"),
            with(
                &event,
                &[("currency", Some(r#""GBP""#)), ("fx_rate", Some("1.27"))],
            ),
            Accept,
        );
        c.tx(
            &format!("{ty}: currency GBX"),
            with(&event, &[("currency", Some(r#""GBX""#))]),
            Refuse("currency"),
        );
        c.tx(
            &format!("{ty}: fx_rate without currency"),
            with(&event, &[("fx_rate", Some("1.27"))]),
            Refuse("fx_rate"),
        );
    }
    for (what, bad) in BAD_CURRENCIES {
        c.tx(
            &format!("buy v2: currency {what}"),
            f(&[("currency", Some(bad))]),
            Refuse("currency"),
        );
    }
    for (what, bad) in [
        ("0", r#""0""#),
        ("0 as a number", "0"),
        ("0 with decimals", r#""0.0000""#),
        ("-0", r#""-0""#),
        ("negative", r#""-1.085""#),
        ("negative as a number", "-1.085"),
        ("not a number", r#""one""#),
        ("a decimal comma", r#""1,085""#),
        ("a plus sign", r#""+1.085""#),
        ("a space", r#"" 1.085""#),
        ("empty", r#""""#),
        ("a boolean", "true"),
        ("an object", r#"{"rate": "1.085"}"#),
    ] {
        c.tx(
            &format!("buy v2: fx_rate {what}"),
            f(&[("fx_rate", Some(bad))]),
            Refuse("fx_rate"),
        );
    }
    c.tx(
        "buy v2: fx_rate without currency",
        f(&[("currency", None)]),
        Refuse("fx_rate"),
    );
    c.tx(
        "buy v2: fx_rate with a null currency",
        f(&[("currency", Some("null"))]),
        Refuse("fx_rate"),
    );
    c.tx(
        "buy v2: fx_rate 0 and no currency",
        f(&[("currency", None), ("fx_rate", Some("0"))]),
        Refuse("fx_rate"),
    );
    for (what, bad) in [
        ("of 11 decimal places", r#""1.08500000001""#),
        ("of 11 decimal places as a number", "1e-11"),
        ("of 13 integer digits", r#""1000000000000""#),
        ("10^12 as a number", "1e12"),
    ] {
        c.tx(
            &format!("buy v2: fx_rate {what}"),
            f(&[("fx_rate", Some(bad))]),
            ParserOnly("fx_rate"),
        );
    }
    c.tx(
        "buy v2: currency given twice",
        f(&[]).replace(
            r#""currency": "EUR""#,
            r#""currency": "EUR", "currency": "USD""#,
        ),
        ParserOnly("currency"),
    );
    c.tx(
        "buy v2: fx_rate given twice",
        f(&[]).replace(
            r#""fx_rate": "1.0850""#,
            r#""fx_rate": "1.0850", "fx_rate": "1.0850""#,
        ),
        ParserOnly("fx_rate"),
    );
    // Below version 2 both are refused, naming the field, even when valid;
    // with both, `currency` is named (it comes first).
    c.tx(
        "buy v1 with currency and fx_rate",
        f(&[("schema_version", Some("1"))]),
        Refuse("currency"),
    );
    c.tx(
        "versionless buy with currency",
        f(&[("schema_version", None), ("fx_rate", None)]),
        Refuse("currency"),
    );
    c.tx(
        "sell v\"1\" with a malformed currency: the version rule first",
        f(&[
            ("type", Some(r#""sell""#)),
            ("schema_version", Some(r#""1""#)),
            ("currency", Some(r#""eur""#)),
            ("fx_rate", None),
        ]),
        Refuse("currency"),
    );
    c.tx(
        "versionless buy with fx_rate only",
        f(&[("schema_version", None), ("currency", None)]),
        Refuse("fx_rate"),
    );
    c.tx(
        "buy v1: null currency and fx_rate are absent",
        b(&[("currency", Some("null")), ("fx_rate", Some("null"))]),
        Accept,
    );
    // Settings ignore both at version 2, whatever they hold; below it a
    // settings event is refused on its type first.
    c.tx(
        "settings v2: currency and fx_rate are ignored",
        with(
            &settings,
            &[("currency", Some(r#""GBP""#)), ("fx_rate", Some("1.27"))],
        ),
        Accept,
    );
    c.tx(
        "settings v2: even malformed ones",
        with(
            &settings,
            &[("currency", Some(r#""GBX""#)), ("fx_rate", Some(r#""-1""#))],
        ),
        Accept,
    );
    c.tx(
        "settings v2: fx_rate without currency is ignored",
        with(&settings, &[("fx_rate", Some("0"))]),
        Accept,
    );
    c.tx(
        "settings v1 with currency",
        with(
            &settings,
            &[
                ("schema_version", Some("1")),
                ("currency", Some(r#""EUR""#)),
            ],
        ),
        Refuse("type"),
    );

    // --- corrections: corrects, revision, cancel (version 2) ----------
    const ORIGINAL: &str = r#""9d7e1f0a-3b1c-4c2d-8e4f-5a6b7c8d9e0f""#;
    let amend = v2(
        "buy",
        &[
            ("symbol", r#""SAP""#),
            ("quantity", r#""12""#),
            ("price", r#""150""#),
            ("corrects", ORIGINAL),
            ("revision", "1"),
        ],
    );
    let a = |changes: &[(&str, Option<&str>)]| with(&amend, changes);
    c.tx("amend: a buy with corrects and revision", a(&[]), Accept);
    c.tx(
        "amend: revision as a string of digits, 10^6",
        a(&[("revision", Some(r#""1000000""#))]),
        Accept,
    );
    c.tx(
        "amend: another type than the original's",
        a(&[("type", Some(r#""transfer_out""#)), ("revision", Some("2"))]),
        Accept,
    );
    let cancel = with(
        &v2("cancel", &[("corrects", ORIGINAL), ("revision", "1")]),
        &[("trade_date", None)],
    );
    c.tx("cancel: corrects and revision only", cancel.clone(), Accept);
    c.tx(
        "cancel: other fields are ignored",
        a(&[("type", Some(r#""cancel""#)), ("quantity", Some(r#""-1""#))]),
        Accept,
    );
    c.tx(
        "amend: corrects without revision",
        a(&[("revision", None)]),
        Refuse("revision"),
    );
    c.tx(
        "amend: revision without corrects",
        a(&[("corrects", None)]),
        Refuse("corrects"),
    );
    for (what, bad) in [
        ("0", "0"),
        ("negative", "-1"),
        ("above 10^6", "1000001"),
        ("a fraction", "1.5"),
        ("a boolean", "true"),
    ] {
        c.tx(
            &format!("amend: revision {what}"),
            a(&[("revision", Some(bad))]),
            Refuse("revision"),
        );
    }
    for (what, bad) in [("\"0\"", r#""0""#), ("\"1000001\"", r#""1000001""#)] {
        c.tx(
            &format!("amend: revision {what}"),
            a(&[("revision", Some(bad))]),
            ParserOnly("revision"),
        );
    }
    for (what, bad) in [("\"+1\"", r#""+1""#), ("\"1.0\"", r#""1.0""#)] {
        c.tx(
            &format!("amend: revision {what}"),
            a(&[("revision", Some(bad))]),
            Refuse("revision"),
        );
    }
    c.tx(
        "amend: corrects not a UUID",
        a(&[("corrects", Some(r#""p-1""#))]),
        Refuse("corrects"),
    );
    c.tx(
        "amend: corrects names the event itself",
        a(&[("corrects", Some(ID))]),
        ParserOnly("corrects"),
    );
    c.tx(
        "cancel without corrects and revision",
        with(&v2("cancel", &[]), &[("trade_date", None)]),
        Refuse("corrects"),
    );
    c.tx(
        "settings with corrects and revision",
        with(
            &settings,
            &[("corrects", Some(ORIGINAL)), ("revision", Some("1"))],
        ),
        Refuse("corrects"),
    );
    c.tx(
        "buy v1 with corrects and revision",
        b(&[("corrects", Some(ORIGINAL)), ("revision", Some("1"))]),
        Refuse("corrects"),
    );

    // --- prices --------------------------------------------------------
    let price = owned(PRICE);
    let p = |changes: &[(&str, Option<&str>)]| with(&price, changes);
    c.price("price: the docs' example", p(&[]), Accept);
    c.price(
        "price: close as a number, schema_version 2",
        p(&[("close", Some("189.1")), ("schema_version", Some("2"))]),
        Accept,
    );
    c.price(
        "price: an exponent, an unknown field",
        p(&[
            ("close", Some(r#""1.891e2""#)),
            ("source", Some(r#""exchange""#)),
        ]),
        Accept,
    );
    c.price(
        "price: close 0",
        p(&[("close", Some(r#""0""#))]),
        Refuse("close"),
    );
    c.price(
        "price: negative close",
        p(&[("close", Some("-1"))]),
        Refuse("close"),
    );
    c.price(
        "price: close not a number",
        p(&[("close", Some(r#""abc""#))]),
        Refuse("close"),
    );
    c.price(
        "price: missing close",
        p(&[("close", None)]),
        Refuse("close"),
    );
    c.price(
        "price: missing symbol",
        p(&[("symbol", None)]),
        Refuse("symbol"),
    );
    c.price(
        "price: null date",
        p(&[("date", Some("null"))]),
        Refuse("date"),
    );
    c.price(
        "price: a malformed date",
        p(&[("date", Some(r#""2024-3-01""#))]),
        Refuse("date"),
    );
    c.price(
        "price: a bad symbol",
        p(&[("symbol", Some(r#""A B ""#))]),
        Refuse("symbol"),
    );
    c.price(
        "price: an OCC option symbol",
        p(&[("symbol", Some(r#""UX    240621C00100000""#))]),
        Accept,
    );
    c.price(
        "price: schema_version 3",
        p(&[("schema_version", Some("3"))]),
        Refuse("schema_version"),
    );
    c.price("price: not an object", "[]".to_string(), Refuse(""));
    c.price(
        "price: 11 decimal places",
        p(&[("close", Some("1e-11"))]),
        ParserOnly("close"),
    );
    c.price(
        "price: 29 February of a common year",
        p(&[("date", Some(r#""2023-02-29""#))]),
        ParserOnly("date"),
    );
    c.price(
        "price: close given twice",
        p(&[]).replace(
            r#""close": "189.10""#,
            r#""close": "189.10", "close": "190""#,
        ),
        ParserOnly("close"),
    );

    c.price(
        "price: in EUR, versionless",
        p(&[("currency", Some(r#""EUR""#))]),
        Accept,
    );
    c.price(
        "price: in GBP at schema_version 1",
        p(&[
            ("currency", Some(r#""GBP""#)),
            ("schema_version", Some("1")),
        ]),
        Accept,
    );
    c.price(
        "price: in JPY at schema_version \"2\"",
        p(&[
            ("currency", Some(r#""JPY""#)),
            ("schema_version", Some(r#""2""#)),
        ]),
        Accept,
    );
    c.price(
        "price: a null currency is the default",
        p(&[("currency", Some("null"))]),
        Accept,
    );
    for (what, bad) in BAD_CURRENCIES {
        c.price(
            &format!("price: currency {what}"),
            p(&[("currency", Some(bad))]),
            Refuse("currency"),
        );
    }
    c.price(
        "price: currency given twice",
        p(&[("currency", Some(r#""EUR""#))]).replace(
            r#""currency": "EUR""#,
            r#""currency": "EUR", "currency": "EUR""#,
        ),
        ParserOnly("currency"),
    );

    // --- splits --------------------------------------------------------
    let split = owned(SPLIT);
    let s = |changes: &[(&str, Option<&str>)]| with(&split, changes);
    c.split("split: 10 for 1", s(&[]), Accept);
    c.split(
        "split: reverse, strings",
        s(&[
            ("numerator", Some(r#""1""#)),
            ("denominator", Some(r#""3""#)),
        ]),
        Accept,
    );
    c.split(
        "split: 1/1 cancels",
        s(&[("numerator", Some("1")), ("denominator", Some("1"))]),
        Accept,
    );
    c.split(
        "split: the largest terms, written with decimals and an exponent",
        s(&[
            ("numerator", Some(r#""1000000000.000""#)),
            ("denominator", Some("1e9")),
        ]),
        Accept,
    );
    c.split(
        "split: whole numbers written 10.0 and \"2.5e1\"",
        s(&[
            ("numerator", Some("10.0")),
            ("denominator", Some(r#""2.5e1""#)),
        ]),
        Accept,
    );
    c.split(
        "split: versionless (navd does not ask for version 2)",
        s(&[("schema_version", None)]),
        Accept,
    );
    for (what, bad) in [
        ("0", "0"),
        ("1.5", "1.5"),
        ("1000000001", "1000000001"),
        ("\"1000000001\"", r#""1000000001""#),
        ("-1", "-1"),
        ("\"abc\"", r#""abc""#),
        ("true", "true"),
        ("\"0e1\"", r#""0e1""#),
    ] {
        c.split(
            &format!("split: numerator {what}"),
            s(&[("numerator", Some(bad))]),
            Refuse("numerator"),
        );
    }
    c.split(
        "split: missing denominator",
        s(&[("denominator", None)]),
        Refuse("denominator"),
    );
    c.split(
        "split: type merger with a split's fields (a ratio, no new_symbol)",
        s(&[("type", Some(r#""merger""#))]),
        Refuse("new_symbol"),
    );
    c.split(
        "split: type dividend",
        s(&[("type", Some(r#""dividend""#))]),
        Refuse("type"),
    );
    actions(&mut c);
    c.split("split: missing type", s(&[("type", None)]), Refuse("type"));
    c.split(
        "split: missing ex_date",
        s(&[("ex_date", None)]),
        Refuse("ex_date"),
    );
    c.split(
        "split: a malformed ex_date",
        s(&[("ex_date", Some(r#""2024-6-10""#))]),
        Refuse("ex_date"),
    );
    c.split(
        "split: an empty symbol",
        s(&[("symbol", Some(r#""""#))]),
        Refuse("symbol"),
    );
    c.split(
        "split: a bad event_id",
        s(&[("event_id", Some(r#""split-1""#))]),
        Refuse("event_id"),
    );
    c.split(
        "split: schema_version \"3\"",
        s(&[("schema_version", Some(r#""3""#))]),
        Refuse("schema_version"),
    );
    c.split(
        "split: before the earliest date",
        s(&[("ex_date", Some(r#""1800-01-01""#))]),
        ParserOnly("ex_date"),
    );
    c.split(
        "split: 30 February",
        s(&[("ex_date", Some(r#""2024-02-30""#))]),
        ParserOnly("ex_date"),
    );
    c.split(
        "split: \"1e10\" is out of range",
        s(&[("numerator", Some(r#""1e10""#))]),
        ParserOnly("numerator"),
    );
    c.split(
        "split: \"1.5e0\" is not whole",
        s(&[("denominator", Some(r#""1.5e0""#))]),
        ParserOnly("denominator"),
    );

    // --- exchange rates ------------------------------------------------
    let fx = owned(FX);
    let r = |changes: &[(&str, Option<&str>)]| with(&fx, changes);
    c.fx("fx: the docs' example", r(&[]), Accept);
    c.fx(
        "fx: schema_version 2, rate as a number",
        r(&[("schema_version", Some("2")), ("rate", Some("0.89"))]),
        Accept,
    );
    c.fx(
        "fx: schema_version \"1\", an unknown field",
        r(&[
            ("schema_version", Some(r#""1""#)),
            ("source", Some(r#""ECB""#)),
        ]),
        Accept,
    );
    c.fx(
        "fx: null schema_version",
        r(&[("schema_version", Some("null"))]),
        Accept,
    );
    for (what, good) in [
        ("with an exponent", r#""8.9e-1""#),
        ("as a number with an exponent", "89E-2"),
        ("of 10 decimal places", r#""0.0000000001""#),
        ("the largest", r#""999999999999.9999999999""#),
        (
            "with trailing zeros past 10 places",
            r#""0.890000000000000""#,
        ),
    ] {
        c.fx(
            &format!("fx: rate {what}"),
            r(&[("rate", Some(good))]),
            Accept,
        );
    }
    c.fx(
        "fx: the reverse pair",
        r(&[
            ("from", Some(r#""EUR""#)),
            ("to", Some(r#""USD""#)),
            ("rate", Some(r#""1.1236""#)),
        ]),
        Accept,
    );
    c.fx(
        "fx: on the earliest date",
        r(&[("date", Some(r#""1900-01-01""#))]),
        Accept,
    );
    for field in ["from", "to", "date", "rate"] {
        c.fx(
            &format!("fx: missing {field}"),
            r(&[(field, None)]),
            Refuse(field),
        );
        c.fx(
            &format!("fx: null {field}"),
            r(&[(field, Some("null"))]),
            Refuse(field),
        );
    }
    for (what, bad) in BAD_CURRENCIES {
        c.fx(
            &format!("fx: from {what}"),
            r(&[("from", Some(bad))]),
            Refuse("from"),
        );
    }
    for (what, bad) in [
        ("lower case", r#""eur""#),
        ("GBp", r#""GBp""#),
        ("ZAC", r#""ZAC""#),
        ("ILA", r#""ILA""#),
        ("of four letters", r#""EURO""#),
        ("a number", "978"),
    ] {
        c.fx(
            &format!("fx: to {what}"),
            r(&[("to", Some(bad))]),
            Refuse("to"),
        );
    }
    for (what, bad) in [
        ("without zero padding", r#""2024-3-4""#),
        ("with a time", r#""2024-03-04T00:00:00Z""#),
        ("month 13", r#""2024-13-04""#),
        ("as a number", "20240304"),
    ] {
        c.fx(
            &format!("fx: date {what}"),
            r(&[("date", Some(bad))]),
            Refuse("date"),
        );
    }
    for (what, bad) in [
        ("0", r#""0""#),
        ("0 as a number", "0"),
        ("-0", r#""-0""#),
        ("negative", r#""-0.89""#),
        ("negative as a number", "-0.89"),
        ("not a number", r#""abc""#),
        ("a decimal comma", r#""0,89""#),
        ("empty", r#""""#),
        ("a boolean", "true"),
    ] {
        c.fx(
            &format!("fx: rate {what}"),
            r(&[("rate", Some(bad))]),
            Refuse("rate"),
        );
    }
    c.fx(
        "fx: schema_version 3",
        r(&[("schema_version", Some("3"))]),
        Refuse("schema_version"),
    );
    c.fx("fx: not JSON", "USD/EUR 0.89".to_string(), Refuse(""));
    c.fx(
        "fx: not an object",
        r#"["USD", "EUR"]"#.to_string(),
        Refuse(""),
    );
    c.fx(
        "fx: a currency to itself",
        r(&[("to", Some(r#""USD""#))]),
        ParserOnly("to"),
    );
    c.fx(
        "fx: 30 February",
        r(&[("date", Some(r#""2024-02-30""#))]),
        ParserOnly("date"),
    );
    c.fx(
        "fx: before the earliest date",
        r(&[("date", Some(r#""1899-12-31""#))]),
        ParserOnly("date"),
    );
    for (what, bad) in [
        ("of 11 decimal places", r#""0.89000000001""#),
        ("of 11 decimal places as a number", "1e-11"),
        ("10^12", r#""1000000000000""#),
        ("10^12 as a number", "1e12"),
    ] {
        c.fx(
            &format!("fx: rate {what}"),
            r(&[("rate", Some(bad))]),
            ParserOnly("rate"),
        );
    }
    c.fx(
        "fx: rate given twice",
        r(&[]).replace(
            r#""rate": "0.8900""#,
            r#""rate": "0.8900", "rate": "0.8950""#,
        ),
        ParserOnly("rate"),
    );
    c.fx(
        "fx: schema_version 1.0",
        r(&[("schema_version", Some("1.0"))]),
        ParserOnly("schema_version"),
    );
    c.0
}

#[test]
fn the_schemas_and_the_parsers_agree_on_every_corpus_entry() {
    let values = schema_values();
    let schemas = Schemas::compile([&values[0], &values[1], &values[2], &values[3]]);
    let corpus = corpus();
    assert!(corpus.len() >= 60, "{} entries", corpus.len());
    let failures = disagreements(&schemas, &corpus);
    assert!(
        failures.is_empty(),
        "{} of {} entries disagree:\n{}",
        failures.len(),
        corpus.len(),
        failures.join("\n")
    );
}

/// Each topic has accepted, refused and parser-only entries, and every
/// transaction type is accepted at least once and named by the schema.
#[test]
fn the_corpus_covers_every_type_and_outcome() {
    let corpus = corpus();
    for topic in [
        Topic::Transactions,
        Topic::Prices,
        Topic::CorporateActions,
        Topic::Fx,
    ] {
        let of = |f: fn(&Expect) -> bool| {
            corpus
                .iter()
                .filter(|c| c.topic == topic && f(&c.expect))
                .count()
        };
        assert!(of(|e| matches!(e, Expect::Accept)) > 0, "{topic:?}");
        assert!(of(|e| matches!(e, Expect::Refuse(_))) > 0, "{topic:?}");
        assert!(of(|e| matches!(e, Expect::ParserOnly(_))) > 0, "{topic:?}");
    }
    for ty in TRANSACTION_TYPES {
        let accepted = corpus.iter().any(|c| {
            c.topic == Topic::Transactions
                && matches!(c.expect, Expect::Accept)
                && parser_verdict(c.topic, &c.payload) == Ok(ty)
        });
        assert!(accepted, "no accepted `{ty}` in the corpus");
    }
    let values = schema_values();
    let types: Vec<&str> = values[0]["properties"]["type"]["enum"]
        .as_array()
        .expect("the type enum")
        .iter()
        .map(|v| v.as_str().expect("a type name"))
        .collect();
    assert_eq!(
        types, TRANSACTION_TYPES,
        "the schema's types are the parser's"
    );
}

/// Every event of the golden books, as the fold tests read them: the schema
/// and the parser agree, and both accept it.
#[test]
fn the_golden_events_are_valid_against_the_schemas() {
    let values = schema_values();
    let schemas = Schemas::compile([&values[0], &values[1], &values[2], &values[3]]);
    let mut corpus = Corpus(Vec::new());
    for (file, text) in GOLDEN {
        let book: Value = serde_json::from_str(text).expect("golden JSON");
        let batches = [Some(&book), book.get("then")];
        for batch in batches.into_iter().flatten() {
            for (key, topic) in [
                ("transactions", Topic::Transactions),
                ("prices", Topic::Prices),
                ("corporate_actions", Topic::CorporateActions),
                ("fx", Topic::Fx),
            ] {
                for (i, event) in batch[key].as_array().into_iter().flatten().enumerate() {
                    corpus.add(
                        topic,
                        &format!("{file} {key}[{i}]"),
                        event.to_string(),
                        Expect::Accept,
                    );
                }
            }
        }
    }
    assert!(corpus.0.len() > 200, "{} golden events", corpus.0.len());
    let failures = disagreements(&schemas, &corpus.0);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The pages with producers' examples: the topics, the instruments topic,
/// and futures, options and bonds.
const DOCS: [&str; 3] = [
    include_str!("../../docs/events.md"),
    include_str!("../../docs/instruments.md"),
    include_str!("../../docs/contracts.md"),
];

/// An example of the instruments topic (its key, when a kcat line gives
/// one, and its payload): the topic has no JSON Schema, its parser alone
/// checks it.
type InstrumentExample = (Option<String>, String);

/// An example of a topic with a schema: its topic, its key when a kcat
/// line gives one, and its payload.
type Example = (Topic, Option<String>, String);

/// The examples of docs/events.md: its JSON blocks (topic told by their
/// content) and its kcat lines (topic from `-t`, with their key); those
/// of the instruments topic apart.
fn doc_examples() -> (Vec<Example>, Vec<InstrumentExample>) {
    let topic_named = |name: &str| match name {
        "nav.transactions" => Some(Topic::Transactions),
        "nav.prices" => Some(Topic::Prices),
        "nav.corporate_actions" => Some(Topic::CorporateActions),
        "nav.fx" => Some(Topic::Fx),
        "nav.instruments" => None,
        other => panic!("unknown topic {other}"),
    };
    let mut out = Vec::new();
    let mut instruments = Vec::new();
    let text = DOCS.join("\n");
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        // Blocks inside a list item are indented.
        if line.trim_start() == "```json" {
            let block: Vec<&str> = lines
                .by_ref()
                .take_while(|l| l.trim_start() != "```")
                .collect();
            let text = block.join("\n");
            let v: Value = serde_json::from_str(&text).expect("a JSON example");
            if v["type"] == "instrument" {
                instruments.push((None, text));
                continue;
            }
            let topic = if v.get("close").is_some() {
                Topic::Prices
            } else if v.get("rate").is_some() {
                Topic::Fx
            } else if matches!(
                v["type"].as_str(),
                Some("split" | "spin_off" | "merger" | "symbol_change")
            ) {
                Topic::CorporateActions
            } else {
                Topic::Transactions
            };
            out.push((topic, None, text));
        } else if let Some(rest) = line.strip_prefix("echo '") {
            let (key, tail) = rest.split_once('|').expect("a key");
            let payload = tail.rsplit_once('\'').expect("a closing quote").0;
            let next = lines.next().expect("the kcat line");
            let topic = next
                .split_whitespace()
                .skip_while(|w| *w != "-t")
                .nth(1)
                .expect("a topic");
            match topic_named(topic) {
                Some(topic) => out.push((topic, Some(key.to_string()), payload.to_string())),
                None => instruments.push((Some(key.to_string()), payload.to_string())),
            }
        }
    }
    (out, instruments)
}

/// Every example of the producers' pages (docs/events.md, instruments.md,
/// contracts.md) is accepted by its schema and its
/// parser, and a kcat line's key is the event's own.
#[test]
fn the_examples_of_the_docs_are_valid() {
    let values = schema_values();
    let schemas = Schemas::compile([&values[0], &values[1], &values[2], &values[3]]);
    let (examples, instruments) = doc_examples();
    assert!(examples.len() >= 12, "{} examples", examples.len());
    assert!(
        instruments.len() >= 4,
        "{} instrument examples",
        instruments.len()
    );
    for (key, payload) in &instruments {
        let i = projections::parse_instrument(payload.as_bytes())
            .unwrap_or_else(|e| panic!("{payload}: {e}"));
        if let Some(key) = key {
            assert_eq!(i.symbol.as_str(), key, "the key of {payload}");
        }
    }
    let mut kinds = Vec::new();
    for (topic, key, payload) in &examples {
        if let Err(errors) = schema_verdict(&schemas, *topic, payload) {
            panic!("{payload}: {}", describe(&errors));
        }
        let kind = parser_verdict(*topic, payload).unwrap_or_else(|e| panic!("{payload}: {e}"));
        kinds.push(kind);
        if let Some(key) = key {
            let v: Value = serde_json::from_str(payload).unwrap();
            let text = |field: &str| v[field].as_str().unwrap_or_default().to_string();
            let own = match topic {
                Topic::Transactions => text("portfolio_id"),
                Topic::Prices | Topic::CorporateActions => text("symbol"),
                Topic::Fx => format!("{}/{}", text("from"), text("to")),
            };
            assert_eq!(&own, key, "the key of {payload}");
        }
    }
    for kind in ["buy", "dividend", "price", "split", "fx"] {
        assert!(kinds.contains(&kind), "no {kind} example: {kinds:?}");
    }
}

/// The branch of the transactions schema whose `$comment` starts with
/// `comment`.
fn branch<'s>(schemas: &'s mut [Value; 4], comment: &str) -> &'s mut Value {
    schemas[0]["allOf"]
        .as_array_mut()
        .expect("allOf")
        .iter_mut()
        .find(|b| {
            b["$comment"]
                .as_str()
                .is_some_and(|c| c.starts_with(comment))
        })
        .unwrap_or_else(|| panic!("no branch `{comment}`"))
}

/// A schema that drifts from the parser is caught: each mutation below
/// loosens or tightens one rule, and some corpus entry then disagrees.
#[test]
fn the_corpus_catches_a_schema_that_drifts() {
    type Mutation = fn(&mut [Value; 4]);
    let mutations: &[(&str, Mutation)] = &[
        ("the version-1 rule dropped", |s| {
            s[0]["allOf"].as_array_mut().unwrap().remove(0);
        }),
        ("trade_date optional everywhere", |s| {
            branch(s, "trade_date")["else"]["required"] = Value::Array(vec![]);
        }),
        ("buy without required fields", |s| {
            branch(s, "buy, sell")["then"]["required"] = Value::Array(vec![]);
        }),
        ("a dividend's reinvest without required fields", |s| {
            branch(s, "dividend")["then"]["properties"]["reinvest"]["required"] =
                Value::Array(vec![]);
        }),
        ("positive strings may be zero", |s| {
            s[0]["$defs"]["positive"]["anyOf"][1]["pattern"] =
                Value::from("^[0-9]+(\\.[0-9]+)?([eE][+-]?[0-9]+)?$");
        }),
        ("positive numbers may be zero", |s| {
            let n = &mut s[0]["$defs"]["positive"]["anyOf"][0];
            n.as_object_mut().unwrap().remove("exclusiveMinimum");
            n["minimum"] = Value::from(0);
        }),
        ("non-negative strings refuse -0", |s| {
            s[0]["$defs"]["nonNegative"]["anyOf"][1]["pattern"] =
                Value::from("^[0-9]+(\\.[0-9]+)?([eE][+-]?[0-9]+)?$");
        }),
        ("minor units accepted as currencies", |s| {
            s[0]["$defs"]["currency"]
                .as_object_mut()
                .unwrap()
                .remove("not");
        }),
        ("null not allowed for an optional field", |s| {
            branch(s, "buy, sell")["then"]["properties"]["fee"] =
                serde_json::json!({"$ref": "#/$defs/nonNegative"});
        }),
        ("any UUID-like text", |s| {
            s[0]["$defs"]["uuid"]["pattern"] = Value::from("^[0-9A-Fa-f-]{32,38}$");
        }),
        ("occurred_at without an offset", |s| {
            s[0]["$defs"]["instant"]["pattern"] =
                Value::from("^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9:.]+([Zz]|[+-][0-9:]+)?$");
        }),
        ("versions 3 and up", |s| {
            s[0]["properties"]["schema_version"]["enum"]
                .as_array_mut()
                .unwrap()
                .push(Value::from(3));
        }),
        ("prices without a close", |s| {
            s[1]["required"] = serde_json::json!(["symbol", "date"]);
        }),
        ("split terms from 0", |s| {
            s[2]["$defs"]["splitTerm"]["anyOf"][0]["minimum"] = Value::from(0);
        }),
        ("split terms may be fractions", |s| {
            s[2]["$defs"]["splitTerm"]["anyOf"][0]["type"] = Value::from("number");
        }),
        ("any type of corporate action", |s| {
            s[2]["properties"]["type"] = serde_json::json!({"type": "string"});
        }),
        ("currency at version 1", |s| {
            s[0]["allOf"][0]["then"]["properties"]
                .as_object_mut()
                .unwrap()
                .remove("currency");
        }),
        // No mutation drops `fx_rate` from the version-1 rule: no event
        // could notice. A version-1 fx_rate comes with a currency (refused
        // naming `currency`) or without one (refused naming `fx_rate` by
        // the currency rule as well); the rule is there for its message.
        ("fx_rate without currency", |s| {
            let b = branch(s, "currency, fx_rate")["else"]
                .as_object_mut()
                .unwrap();
            b.remove("if");
            b.remove("then");
        }),
        ("currency and fx_rate checked on settings too", |s| {
            let b = branch(s, "currency, fx_rate");
            *b = b["else"].clone();
        }),
        ("currency and fx_rate not checked at all", |s| {
            let b = branch(s, "currency, fx_rate");
            b["else"] = serde_json::json!({});
        }),
        ("fx_rate may be zero", |s| {
            branch(s, "currency, fx_rate")["else"]["properties"]["fx_rate"]["anyOf"][1] =
                serde_json::json!({"$ref": "#/$defs/nonNegative"});
        }),
        ("a close's currency in any case", |s| {
            s[1]["$defs"]["currency"]["pattern"] = Value::from("^[A-Za-z]{3}$");
        }),
        ("a close's currency a minor unit", |s| {
            s[1]["$defs"]["currency"]
                .as_object_mut()
                .unwrap()
                .remove("not");
        }),
        ("a close's currency not null", |s| {
            s[1]["properties"]["currency"] = serde_json::json!({"$ref": "#/$defs/currency"});
        }),
        ("a close's currency of 2 to 4 letters", |s| {
            s[1]["$defs"]["currency"]["pattern"] = Value::from("^[A-Z]{2,4}$");
        }),
        ("rates without a rate", |s| {
            s[3]["required"] = serde_json::json!(["from", "to", "date"]);
        }),
        ("rates may be zero", |s| {
            let n = &mut s[3]["$defs"]["positive"]["anyOf"][0];
            n.as_object_mut().unwrap().remove("exclusiveMinimum");
            n["minimum"] = Value::from(0);
        }),
        ("rate strings may be zero", |s| {
            s[3]["$defs"]["positive"]["anyOf"][1]["pattern"] =
                Value::from("^[0-9]+(\\.[0-9]+)?([eE][+-]?[0-9]+)?$");
        }),
        ("rates between minor units", |s| {
            s[3]["$defs"]["currency"]
                .as_object_mut()
                .unwrap()
                .remove("not");
        }),
        ("rates in lower case", |s| {
            s[3]["$defs"]["currency"]["pattern"] = Value::from("^[A-Za-z]{3}$");
        }),
        ("rates with any date text", |s| {
            s[3]["$defs"]["date"] = serde_json::json!({"type": "string"});
        }),
        ("rates of versions 3 and up", |s| {
            s[3]["properties"]["schema_version"]["enum"]
                .as_array_mut()
                .unwrap()
                .push(Value::from(3));
        }),
    ];
    let corpus = corpus();
    for (what, mutate) in mutations {
        let mut values = schema_values();
        let before = values.clone();
        mutate(&mut values);
        assert_ne!(values, before, "{what}: the mutation changed nothing");
        let schemas = Schemas::compile([&values[0], &values[1], &values[2], &values[3]]);
        assert!(
            !disagreements(&schemas, &corpus).is_empty(),
            "{what}: no corpus entry notices"
        );
    }
    // And the schemas as they are pass, so the check above is the mutation's.
    let values = schema_values();
    let schemas = Schemas::compile([&values[0], &values[1], &values[2], &values[3]]);
    assert!(disagreements(&schemas, &corpus).is_empty());
}

/// The corpus builder itself: a change replaces in place, adds at the end,
/// removes; raw number text is kept as written.
#[test]
fn the_builder_keeps_raw_text() {
    let base = owned(&[("a", "1"), ("b", "\"x\"")]);
    assert_eq!(
        with(
            &base,
            &[("a", Some("1.0")), ("c", Some("1e3")), ("b", None)]
        ),
        r#"{"a": 1.0, "c": 1e3}"#
    );
    assert_eq!(with(&base, &[]), r#"{"a": 1, "b": "x"}"#);
}

/// The spin-offs, mergers and symbol changes of docs/events.md, and every
/// refusal of theirs.
fn actions(c: &mut Corpus) {
    use Expect::{Accept, ParserOnly, Refuse};
    let spin = owned(SPIN_OFF);
    let sp = |changes: &[(&str, Option<&str>)]| with(&spin, changes);
    c.split("spin_off: the docs' example", sp(&[]), Accept);
    c.split(
        "spin_off: cost_allocation as a number, no price",
        sp(&[("cost_allocation", Some("0.5")), ("price", None)]),
        Accept,
    );
    c.split(
        "spin_off: new_symbol equal to symbol",
        sp(&[("new_symbol", Some(r#""PAR""#))]),
        ParserOnly("new_symbol"),
    );
    c.split(
        "spin_off: missing new_symbol",
        sp(&[("new_symbol", None)]),
        Refuse("new_symbol"),
    );
    c.split(
        "spin_off: missing cost_allocation",
        sp(&[("cost_allocation", None)]),
        Refuse("cost_allocation"),
    );
    for bad in ["1.5", "-0.1", "\"abc\""] {
        c.split(
            &format!("spin_off: cost_allocation {bad}"),
            sp(&[("cost_allocation", Some(bad))]),
            Refuse("cost_allocation"),
        );
    }
    c.split(
        "spin_off: cost_allocation \"1.5\"",
        sp(&[("cost_allocation", Some(r#""1.5""#))]),
        ParserOnly("cost_allocation"),
    );
    c.split(
        "spin_off: no ratio",
        sp(&[("numerator", None), ("denominator", None)]),
        Refuse("numerator"),
    );
    c.split(
        "spin_off: a numerator alone",
        sp(&[("denominator", None)]),
        Refuse("denominator"),
    );
    c.split(
        "spin_off: numerator 0",
        sp(&[("numerator", Some("0"))]),
        Refuse("numerator"),
    );
    c.split(
        "spin_off: price 0",
        sp(&[("price", Some(r#""0""#))]),
        Refuse("price"),
    );
    let merger = owned(MERGER);
    let m = |changes: &[(&str, Option<&str>)]| with(&merger, changes);
    c.split("merger: shares and cash", m(&[]), Accept);
    c.split(
        "merger: shares alone, no ratio (1 for 1)",
        m(&[
            ("numerator", None),
            ("denominator", None),
            ("cash", None),
            ("cost_allocation", None),
        ]),
        Accept,
    );
    c.split(
        "merger: a take-over for cash in another currency",
        m(&[
            ("new_symbol", None),
            ("numerator", None),
            ("denominator", None),
            ("currency", Some(r#""USD""#)),
        ]),
        Accept,
    );
    c.split(
        "merger: a write-off (cash 0), cost_allocation ignored",
        m(&[
            ("new_symbol", None),
            ("numerator", None),
            ("denominator", None),
            ("cash", Some("0")),
            ("cost_allocation", Some("0.3")),
        ]),
        Accept,
    );
    c.split(
        "merger: neither new_symbol nor cash",
        m(&[
            ("new_symbol", None),
            ("numerator", None),
            ("denominator", None),
            ("cash", None),
        ]),
        Refuse("cash"),
    );
    c.split(
        "merger: a ratio without new_symbol",
        m(&[("new_symbol", None)]),
        Refuse("new_symbol"),
    );
    c.split(
        "merger: a denominator alone",
        m(&[("numerator", None)]),
        Refuse("numerator"),
    );
    c.split(
        "merger: cash < 0",
        m(&[("cash", Some(r#""-5""#))]),
        Refuse("cash"),
    );
    c.split(
        "merger: shares and cash without cost_allocation",
        m(&[("cost_allocation", None)]),
        ParserOnly("cost_allocation"),
    );
    c.split(
        "merger: cash in pence",
        m(&[("currency", Some(r#""GBX""#))]),
        Refuse("currency"),
    );
    let roc = v2(
        "return_of_capital",
        &[("symbol", r#""ROC""#), ("amount", r#""300""#)],
    );
    let rc = |changes: &[(&str, Option<&str>)]| with(&roc, changes);
    c.tx("return_of_capital: the docs' example", rc(&[]), Accept);
    c.tx(
        "return_of_capital: in another currency at a rate",
        rc(&[
            ("currency", Some(r#""USD""#)),
            ("fx_rate", Some(r#""0.92""#)),
        ]),
        Accept,
    );
    c.tx(
        "return_of_capital: missing symbol",
        rc(&[("symbol", None)]),
        Refuse("symbol"),
    );
    c.tx(
        "return_of_capital: amount 0",
        rc(&[("amount", Some(r#""0""#))]),
        Refuse("amount"),
    );
    c.tx(
        "return_of_capital: version 1",
        rc(&[("schema_version", Some("1"))]),
        Refuse("type"),
    );
    let bond = v2(
        "sell",
        &[
            ("symbol", r#""BOND5""#),
            ("quantity", r#""100""#),
            ("price", r#""99.75""#),
            ("accrued", r#""34.72""#),
        ],
    );
    let bd = |changes: &[(&str, Option<&str>)]| with(&bond, changes);
    c.tx("sell: a bond with its accrued interest", bd(&[]), Accept);
    c.tx(
        "buy: a bond with no accrued interest (on a coupon date)",
        bd(&[("type", Some(r#""buy""#)), ("accrued", Some("0"))]),
        Accept,
    );
    c.tx(
        "sell: negative accrued interest",
        bd(&[("accrued", Some(r#""-1""#))]),
        Refuse("accrued"),
    );
    c.tx(
        "sell: accrued interest in version 1",
        bd(&[("schema_version", Some("1"))]),
        Refuse("accrued"),
    );
    let sale = v2(
        "sell",
        &[
            ("symbol", r#""SPC""#),
            ("quantity", r#""12""#),
            ("price", r#""24""#),
            (
                "lots",
                r#"[{"lot": "00000000-0000-4000-8015-000000000034", "quantity": "8"}]"#,
            ),
        ],
    );
    let sl = |changes: &[(&str, Option<&str>)]| with(&sale, changes);
    c.tx("sell: naming a lot (the docs' example)", sl(&[]), Accept);
    c.tx(
        "sell: naming the lot an automatic exercise delivered",
        sl(&[(
            "lots",
            Some(r#"[{"lot": "expiry:UX    240621C00100000", "quantity": "8"}]"#),
        )]),
        Accept,
    );
    c.tx(
        "sell: lots not an array",
        sl(&[("lots", Some(r#""00000000-0000-4000-8015-000000000034""#))]),
        Refuse("lots"),
    );
    c.tx(
        "sell: a lot named by something else than an event_id",
        sl(&[("lots", Some(r#"[{"lot": "first", "quantity": "8"}]"#))]),
        Refuse("lots.lot"),
    );
    c.tx(
        "sell: a lot named with quantity 0",
        sl(&[(
            "lots",
            Some(r#"[{"lot": "00000000-0000-4000-8015-000000000034", "quantity": "0"}]"#),
        )]),
        Refuse("lots.quantity"),
    );
    c.tx(
        "sell: lots in version 1",
        sl(&[("schema_version", Some("1"))]),
        Refuse("lots"),
    );
    let settings = v2("portfolio_settings", &[("lot_method", r#""fifo""#)]);
    c.tx(
        "portfolio_settings: lot_method fifo",
        with(&settings, &[]),
        Accept,
    );
    c.tx(
        "portfolio_settings: an unknown lot_method",
        with(&settings, &[("lot_method", Some(r#""first-in""#))]),
        Refuse("lot_method"),
    );
    let arrived = v2(
        "transfer_in",
        &[
            ("symbol", r#""TRA""#),
            ("quantity", r#""10""#),
            ("price", r#""50""#),
            ("cost", r#""400""#),
            ("acquired_on", r#""2020-02-29""#),
        ],
    );
    c.tx("transfer_in: with acquired_on", with(&arrived, &[]), Accept);
    c.tx(
        "transfer_in: acquired_on not a date",
        with(&arrived, &[("acquired_on", Some(r#""2020/02/29""#))]),
        Refuse("acquired_on"),
    );
    for ty in ["exercise", "assignment"] {
        let ex = v2(ty, &[("symbol", r#""UC C50""#), ("quantity", r#""1""#)]);
        let e = |changes: &[(&str, Option<&str>)]| with(&ex, changes);
        c.tx(&format!("{ty}: the docs' example"), e(&[]), Accept);
        c.tx(
            &format!("{ty}: an OCC symbol, several contracts"),
            e(&[
                ("symbol", Some(r#""UX    240621C00100000""#)),
                ("quantity", Some(r#""3""#)),
            ]),
            Accept,
        );
        c.tx(
            &format!("{ty}: missing symbol"),
            e(&[("symbol", None)]),
            Refuse("symbol"),
        );
        c.tx(
            &format!("{ty}: missing quantity"),
            e(&[("quantity", None)]),
            Refuse("quantity"),
        );
        c.tx(
            &format!("{ty}: quantity 0"),
            e(&[("quantity", Some(r#""0""#))]),
            Refuse("quantity"),
        );
        c.tx(
            &format!("{ty}: version 1"),
            e(&[("schema_version", Some("1"))]),
            Refuse("type"),
        );
    }
    let rename = owned(RENAME);
    let r = |changes: &[(&str, Option<&str>)]| with(&rename, changes);
    c.split("symbol_change: the docs' example", r(&[]), Accept);
    c.split(
        "symbol_change: missing new_symbol",
        r(&[("new_symbol", None)]),
        Refuse("new_symbol"),
    );
    c.split(
        "symbol_change: new_symbol equal to symbol",
        r(&[("new_symbol", Some(r#""OLD""#))]),
        ParserOnly("new_symbol"),
    );
    c.split(
        "symbol_change: an empty new_symbol",
        r(&[("new_symbol", Some(r#""""#))]),
        Refuse("new_symbol"),
    );
    c.split(
        "merger: cancelled, with nothing else",
        with(
            &owned(MERGER),
            &[
                ("new_symbol", None),
                ("numerator", None),
                ("denominator", None),
                ("cash", None),
                ("cost_allocation", None),
                ("cancelled", Some("true")),
            ],
        ),
        Accept,
    );
    c.split(
        "split: cancelled, without its ratio",
        with(
            &owned(SPLIT),
            &[
                ("numerator", None),
                ("denominator", None),
                ("cancelled", Some("true")),
            ],
        ),
        Accept,
    );
    c.split(
        "spin_off: cancelled \"yes\"",
        sp(&[("cancelled", Some(r#""yes""#))]),
        Refuse("cancelled"),
    );
    c.split(
        "symbol_change: cancelled false is an action",
        r(&[("cancelled", Some("false"))]),
        Accept,
    );
}

const SPIN_OFF: &[(&str, &str)] = &[
    ("event_id", ID),
    ("type", r#""spin_off""#),
    ("symbol", r#""PAR""#),
    ("ex_date", r#""2024-06-06""#),
    ("new_symbol", r#""KID""#),
    ("numerator", "1"),
    ("denominator", "2"),
    ("cost_allocation", r#""0.2""#),
    ("price", r#""24.8""#),
    ("schema_version", "2"),
];

const MERGER: &[(&str, &str)] = &[
    ("event_id", ID),
    ("type", r#""merger""#),
    ("symbol", r#""TGT""#),
    ("ex_date", r#""2024-06-10""#),
    ("new_symbol", r#""ACQ""#),
    ("numerator", "2"),
    ("denominator", "5"),
    ("cash", r#""5""#),
    ("cost_allocation", r#""0.1""#),
    ("schema_version", "2"),
];

const RENAME: &[(&str, &str)] = &[
    ("event_id", ID),
    ("type", r#""symbol_change""#),
    ("symbol", r#""OLD""#),
    ("ex_date", r#""2024-06-07""#),
    ("new_symbol", r#""NEW""#),
    ("schema_version", "2"),
];
