//! The pages' views of attribution, composites and the tear sheet, over
//! the goldens stored in a real PostgreSQL: the portfolio page's "what
//! moved it" table (every golden range, rows sorted by contribution with
//! the golden's numbers, the totals row, each position's P&L of the
//! range), its tear sheet (drawdowns and trailing returns as the JSON
//! gives them, the rolling chart), the index's combine form, and the
//! composite page (a composite of one portfolio shows that portfolio's
//! numbers; of several, the API's; the API's refusals as pages).

use std::collections::BTreeSet;

use crate::attribution::stored_book;
use crate::common::*;
use crate::support::*;
use reqwest::StatusCode;
use rust_decimal::{Decimal, RoundingStrategy};
use serde_json::Value;

/// A page's status and HTML, read with the bearer token.
async fn page(app: &TestApp, path: &str, tok: &str) -> (StatusCode, String) {
    let r = app
        .client
        .get(app.url(path))
        .bearer_auth(tok)
        .send()
        .await
        .unwrap();
    let s = r.status();
    let ct = r.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ct.starts_with("text/html"), "{path}: {ct}");
    (s, r.text().await.unwrap())
}

/// Money as the pages write it: 2 places (half away from zero), thousands
/// separated, the currency.
fn money(v: Decimal, cur: &str) -> String {
    let r = v.round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero);
    let text = format!("{:.2}", r.abs());
    let (int, frac) = text.split_once('.').unwrap();
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let sign = if r.is_sign_negative() && !r.is_zero() {
        "-"
    } else {
        ""
    };
    format!("{sign}{grouped}.{frac} {cur}")
}

/// A ratio as a signed percentage with 2 places, as the pages write it.
fn signed_pct(v: f64) -> String {
    let s = format!("{:.2}", v * 100.0);
    let unsigned = s.trim_start_matches('-');
    if unsigned.chars().all(|c| c == '0' || c == '.') {
        format!("{unsigned}%")
    } else if s.starts_with('-') {
        format!("{s}%")
    } else {
        format!("+{s}%")
    }
}

fn label(component: &str) -> String {
    match component {
        "receivable" => "Dividends receivable".into(),
        "cash" => "Cash account".into(),
        "fees_and_taxes" => "Fees and taxes".into(),
        "interest" => "Interest".into(),
        c => c.trim_start_matches("symbol:").to_string(),
    }
}

/// The text between `start` and the next `end` after it.
fn between<'a>(html: &'a str, start: &str, end: &str) -> &'a str {
    let i = html.find(start).unwrap_or_else(|| panic!("no {start}"));
    let rest = &html[i..];
    &rest[..rest.find(end).unwrap()]
}

/// The cells' texts of each `<tr>` of a piece of a table.
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .split("<tr")
        .skip(1)
        .map(|tr| {
            tr.split(['<', '>'])
                .collect::<Vec<_>>()
                .windows(2)
                .filter(|w| w[0].starts_with("td") || w[0].starts_with("th"))
                .map(|w| w[1].to_string())
                .collect()
        })
        .collect()
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

#[tokio::test]
async fn the_attribution_golden_as_the_pages_movers() {
    let (app, g, pending) =
        stored_book(include_str!("../../fixtures/golden/attribution.json")).await;
    let tok = token("nav:read", &["*"]);
    let mut compared = BTreeSet::new();
    for (id, book) in g["portfolios"].as_object().unwrap() {
        if pending.contains(id) {
            eprintln!("PENDING {id}: its events do not parse yet");
            continue;
        }
        let cur = book["base_currency"].as_str().unwrap();
        for case in book["expected_attribution"].as_array().unwrap() {
            let q = &case["query"];
            let query = ["from", "to"]
                .iter()
                .filter_map(|k| q.get(*k).map(|v| format!("{k}={}", v.as_str().unwrap())))
                .collect::<Vec<_>>()
                .join("&");
            let path = format!("/portfolio/{id}?{query}");
            let (s, html) = page(&app, &path, &tok).await;
            assert_eq!(s, StatusCode::OK, "{path}");
            let want = &case["attribution"];
            let head = format!(
                "What moved it, {} to {}",
                want["from"].as_str().unwrap(),
                want["to"].as_str().unwrap()
            );
            assert!(html.contains(&head), "{path}: {head}");
            // The golden's components, largest contribution first, then
            // the total; each with its money and its share.
            let dec = |v: &Value| v.as_str().unwrap().parse::<Decimal>().unwrap();
            let mut parts: Vec<&Value> = want["components"].as_array().unwrap().iter().collect();
            parts.sort_by(|a, b| {
                dec(&b["contribution"])
                    .cmp(&dec(&a["contribution"]))
                    .then(dec(&b["pnl"]).cmp(&dec(&a["pnl"])))
                    .then(a["component"].as_str().cmp(&b["component"].as_str()))
            });
            assert!(
                parts.len() <= 10,
                "the golden's ranges list every component"
            );
            let pct = |v: &Value| signed_pct(v.as_str().unwrap().parse::<f64>().unwrap());
            let mut expected: Vec<Vec<String>> = parts
                .iter()
                .map(|c| {
                    vec![
                        label(c["component"].as_str().unwrap()),
                        money(dec(&c["pnl"]), cur),
                        pct(&c["contribution"]),
                    ]
                })
                .collect();
            expected.push(vec![
                "Total".into(),
                money(dec(&want["total"]["pnl"]), cur),
                pct(&want["total"]["return"]),
            ]);
            let table = between(&html, "<div class=\"card scroll movers\">", "</table>");
            let got = rows(table);
            assert_eq!(&got[1..], &expected[..], "{path}");
            // Each position's P&L of the range, from the same components.
            if let Some(held) = html.find("<h2>Held on ") {
                let positions = between(&html[held..], "<h2>", "</table>");
                assert!(positions.contains(&format!(
                    "<th>P&amp;L since {}</th>",
                    want["from"].as_str().unwrap()
                )));
                for r in rows(positions).iter().skip(1) {
                    let Some(c) = parts
                        .iter()
                        .find(|c| label(c["component"].as_str().unwrap()) == r[0])
                    else {
                        continue;
                    };
                    assert_eq!(
                        r.last().unwrap(),
                        &money(dec(&c["pnl"]), cur),
                        "{path} {r:?}"
                    );
                }
            }
            compared.insert(id.clone());
        }
    }
    assert!(pending.is_empty(), "pending: {pending:?}");
    assert_eq!(compared.len(), g["portfolios"].as_object().unwrap().len());
}

#[tokio::test]
async fn the_tear_sheet_on_the_page_is_the_api_s() {
    let (app, g, _) = stored_book(include_str!("../../fixtures/golden/tear-sheet.json")).await;
    let tok = token("nav:read", &["*"]);
    let id = g["portfolios"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let (s, api) = get_json(
        &app,
        &format!("/api/v1/portfolio/{id}/nav-history?rolling=63"),
        &tok,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, html) = page(&app, &format!("/portfolio/{id}"), &tok).await;
    assert_eq!(s, StatusCode::OK);
    let st = &api["statistics"];
    // The drawdowns: a row per drawdown of the JSON, in its order.
    let table = between(&html, "<div class=\"card scroll drawdowns\">", "</table>");
    let got = rows(table);
    let want = st["drawdowns"].as_array().unwrap();
    assert_eq!(got.len() - 1, want.len().max(1), "{table}");
    for (i, (r, d)) in got[1..].iter().zip(want).enumerate() {
        assert_eq!(r[0], (i + 1).to_string());
        assert_eq!(r[1], d["peak"].as_str().unwrap());
        assert_eq!(r[2], d["trough"].as_str().unwrap());
        assert_eq!(r[3], d["recovery"].as_str().unwrap_or("not recovered"));
        assert_eq!(r[4], signed_pct(d["depth"].as_f64().unwrap()));
        assert_eq!(r[5], d["days"].to_string());
    }
    // The trailing returns, each period's.
    for (key, name) in [
        ("1m", "1M"),
        ("3m", "3M"),
        ("ytd", "YTD"),
        ("1y", "1Y"),
        ("inception", "Inception"),
    ] {
        let v = &st["trailing"][key];
        let text = v.as_f64().map_or("\u{2014}".to_string(), signed_pct);
        assert!(
            html.contains(&format!("data-period=\"{name}\">{text}</td>")),
            "{name} {text}"
        );
    }
    // The rolling chart, of 63 returns, its last figures on hover.
    assert!(html.contains("Volatility of the last 63 returns (annualised)"));
    let last = api["points"].as_array().unwrap().last().unwrap();
    if let Some(v) = last["rolling_volatility"].as_f64() {
        assert!(
            html.contains(&format!(
                "volatility {:.2}% on {}",
                v * 100.0,
                last["date"].as_str().unwrap()
            )),
            "{v}"
        );
    }
}

#[tokio::test]
async fn the_index_combines_into_the_composite_page() {
    let (app, g, _) = stored_book(include_str!("../../fixtures/golden/composite.json")).await;
    let tok = token("nav:read", &["*"]);
    // The index: a checkbox per portfolio, in the GET form to /composite.
    let (s, index) = page(&app, "/", &tok).await;
    assert_eq!(s, StatusCode::OK);
    assert!(index
        .contains("<form id=\"combine\" class=\"combine\" method=\"get\" action=\"/composite\">"));
    for id in ["hh-a", "hh-b", "hh-c"] {
        assert!(
            index.contains(&format!(
                "name=\"portfolios\" value=\"{id}\" form=\"combine\""
            )),
            "{id}"
        );
    }
    // One member: the portfolio's own numbers.
    let (s, own) = page(&app, "/portfolio/hh-a?calendar=all", &tok).await;
    assert_eq!(s, StatusCode::OK);
    let (s, one) = page(&app, "/composite?portfolios=hh-a&calendar=all", &tok).await;
    assert_eq!(s, StatusCode::OK, "{one}");
    assert!(one.contains("Composite of 1 portfolio "));
    for card in [
        "<h2>Statistics of the range</h2>",
        "<h2>Deepest drawdowns</h2>",
        "<h2>Trailing returns</h2>",
        "<h2>Returns by month and year</h2>",
    ] {
        assert_eq!(
            between(&one, card, "</table>"),
            between(&own, card, "</table>"),
            "{card}"
        );
    }
    let last_day = |h: &str| between(h, "<div class=\"card\"><h2>On ", "</table>").to_string();
    assert_eq!(last_day(&one), last_day(&own));
    // Several members, as the form sends them: the API's numbers.
    let (s, two) = page(
        &app,
        "/composite?portfolios=hh-a&portfolios=hh-b&calendar=all",
        &tok,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, same) = page(&app, "/composite?portfolios=hh-a,hh-b&calendar=all", &tok).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(two, same);
    let (_, api) = get_json(
        &app,
        "/api/v1/composite/nav-history?portfolios=hh-a,hh-b&calendar=all",
        &tok,
    )
    .await;
    let last = api["points"].as_array().unwrap().last().unwrap();
    let value = last["market_value"]
        .as_str()
        .unwrap()
        .parse::<Decimal>()
        .unwrap();
    assert!(two.contains(&format!("<td class=\"num\">{}</td>", money(value, "USD"))));
    let total = signed_pct(api["statistics"]["total_return"].as_f64().unwrap());
    assert!(
        two.contains(&format!(">{}</td>", total.trim_start_matches('+'))),
        "{total}"
    );
    assert!(two.contains("href=\"/portfolio/hh-b\">hh-b</a>"));
    assert!(
        two.contains("name=\"portfolios\" value=\"hh-a,hh-b\""),
        "the form keeps them"
    );
    assert!(two.contains("/api/v1/composite/nav-history.csv?portfolios=hh-a,hh-b&amp;calendar=all"));
    // The rolling chart's card, though 12 days are too few for 63 returns.
    assert!(two.contains("aria-label=\"rolling volatility and Sharpe ratio over 63 returns\""));
    assert!(two.contains("fewer than 63 returns in this range: no rolling figures"));
    // The API's refusals, as pages with the form.
    let over_long = (0..1001)
        .map(|i| format!("p{i}"))
        .collect::<Vec<_>>()
        .join(",");
    let narrow = token("nav:read", &["hh-a"]);
    let cases: Vec<(String, &str, StatusCode, &str)> = vec![
        (
            "".into(),
            tok.as_str(),
            StatusCode::BAD_REQUEST,
            "`portfolios` is required",
        ),
        (
            "portfolios=hh-a,hh-a".into(),
            tok.as_str(),
            StatusCode::BAD_REQUEST,
            "`hh-a` is listed twice",
        ),
        (
            "portfolios=hh-a&portfolios=hh-a".into(),
            tok.as_str(),
            StatusCode::BAD_REQUEST,
            "listed twice",
        ),
        (
            format!("portfolios={over_long}"),
            tok.as_str(),
            StatusCode::BAD_REQUEST,
            "at most 1000",
        ),
        (
            "portfolios=hh-a,nobody".into(),
            tok.as_str(),
            StatusCode::NOT_FOUND,
            "portfolio `nobody` is unknown or not visible to you",
        ),
        (
            "portfolios=hh-a,hh-b".into(),
            narrow.as_str(),
            StatusCode::NOT_FOUND,
            "portfolio `hh-b` is unknown or not visible to you",
        ),
        (
            "portfolios=hh-a&from=2024-13-01".into(),
            tok.as_str(),
            StatusCode::BAD_REQUEST,
            "from",
        ),
    ];
    for (q, t, status, says) in cases {
        let (s, html) = page(&app, &format!("/composite?{q}"), t).await;
        assert_eq!(s, status, "{q}");
        assert!(html.contains("This composite cannot be shown:"), "{q}");
        assert!(html.contains(&html_escape(says)), "{q}: {says}");
        assert!(
            html.contains("<form method=\"get\" action=\"/composite?"),
            "{q}"
        );
    }
    for e in g["expected_composite_errors"].as_array().unwrap() {
        let members = e["query"]["portfolios"].as_str().unwrap();
        let (s, html) = page(&app, &format!("/composite?portfolios={members}"), &tok).await;
        assert_eq!(
            u64::from(s.as_u16()),
            e["status"].as_u64().unwrap(),
            "{members}"
        );
        assert!(
            html.contains(&html_escape(e["detail"].as_str().unwrap())),
            "{members}"
        );
    }
}
