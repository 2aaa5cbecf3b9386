//! The HTML of the pages: [`render_page`] (a portfolio's page: heading and
//! status, the date-range form, the inlined pictures and the tables under
//! them) and [`render_index`] (the portfolios the caller may see), with
//! their stylesheet, the form's values and what a page is made of. Plain
//! HTML that needs no JavaScript (the portfolio page's one script, its
//! live update, is `assets.rs`'s); everything a person typed or a record
//! holds is escaped.

use std::fmt::Write as _;

use chrono::NaiveDate;

use super::assets::live_region;
use super::notices::{page_link, write_inconsistency, write_undrawn, Asked};
use super::tables::{
    opt_date, write_last_day, write_lines, write_periods, write_positions, write_value_summary,
};
use crate::http::html::escape_html;
use crate::query::attribution::Attribution;
use crate::query::{History, HistoryQuery, Positions, State};

/// The page's two pictures of one read: wide for screens, compact for
/// phones (CSS shows one).
pub(super) struct Charts {
    pub(super) wide: String,
    pub(super) narrow: String,
}

/// What the form shows: what the person typed, even when it was refused.
#[derive(Debug, Default)]
pub(super) struct FormValues {
    from: String,
    to: String,
    calendar: String,
    risk_free: String,
    benchmark: String,
    as_known_at: String,
    /// The page's `rebase=1`.
    pub(super) rebase: bool,
    /// The page's `view=value`: the value chart instead of the unit NAV's.
    pub(super) value_view: bool,
}

impl FormValues {
    pub(super) fn of(pairs: &[(String, String)]) -> Self {
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        FormValues {
            from: get("from"),
            to: get("to"),
            calendar: get("calendar"),
            risk_free: get("risk_free"),
            benchmark: get("benchmark"),
            as_known_at: get("as_known_at"),
            rebase: false,
            value_view: false,
        }
    }
}

/// What a page shows of a read.
pub(super) struct PageData<'a> {
    pub(super) history: &'a History,
    pub(super) query: &'a HistoryQuery,
    pub(super) charts: &'a Charts,
    /// What was held at the range's end (none when there is no record
    /// there).
    pub(super) positions: Option<&'a Positions>,
    /// The currency the portfolio's money is in.
    pub(super) currency: &'a str,
    /// A benchmark asked for that has no level on the range: the days of
    /// its first and last close (none: it has no close, or it is drawn).
    pub(super) bench_span: Option<(NaiveDate, NaiveDate)>,
    /// The range's attribution ("what moved it"; none when it cannot be
    /// attributed).
    pub(super) movers: Option<&'a Attribution>,
    /// The lots and the year's realizations, under a lot method.
    pub(super) lots: Option<&'a super::lots::LotTables>,
}

/// The pages' stylesheet, inlined (no external assets).
const CSS: &str = "\
:root{color-scheme:light}\
*{box-sizing:border-box}\
body{margin:0;font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#222;background:#f4f5f7}\
main{max-width:1120px;margin:0 auto;padding:24px 20px 40px}\
h1{font-size:1.5em;margin:0 0 4px;display:flex;gap:12px;align-items:center;flex-wrap:wrap}\
.sub{color:#666;margin:0 0 16px}\
h2{font-size:1.1em;margin:0 0 8px}\
.badge{font-size:.6em;font-weight:600;padding:2px 10px;border-radius:999px;text-transform:uppercase;letter-spacing:.04em}\
.ok{background:#e3f4ea;color:#17653a}\
.recomputing{background:#fff3d6;color:#7a5200}\
.inconsistent{background:#fde4e1;color:#9b1c11}\
.card{background:#fff;border:1px solid #e2e4e8;border-radius:8px;padding:16px;margin:0 0 16px}\
.notice{border-left:4px solid #c9a227}\
.error{border-left:4px solid #c0392b}\
form{display:flex;flex-wrap:wrap;gap:12px 16px;align-items:flex-end}\
label{display:flex;flex-direction:column;font-size:.85em;color:#555;gap:4px}\
input,select{font:inherit;padding:5px 8px;border:1px solid #c8ccd2;border-radius:5px;background:#fff}\
button{font:inherit;padding:6px 16px;border:0;border-radius:5px;background:#0072b2;color:#fff;cursor:pointer}\
.chart svg{display:block;width:100%;height:auto}\
table{border-collapse:collapse;width:100%}\
th,td{padding:6px 10px;border-bottom:1px solid #eceef1;text-align:left;vertical-align:top}\
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
td.note{color:#777;font-size:.88em}\
tr:last-child th,tr:last-child td{border-bottom:0}\
.scroll{overflow-x:auto}\
td.up{color:#17653a}td.down{color:#9b1c11}\
a{color:#0063a0}\
.links{display:flex;gap:18px;flex-wrap:wrap}\
label.check{flex-direction:row;align-items:center;gap:6px;padding-bottom:6px}\
.tools{margin:0 0 10px;display:flex;gap:18px;flex-wrap:wrap}\
.chart .narrow{display:none}\
.lines{margin-top:12px}\
.lines table{width:auto}\
.nowrap{white-space:nowrap}\
.lines p{margin:8px 0 0}\
.sw{display:inline-block;width:22px;height:0;border-top:3px solid #0072b2;vertical-align:middle;margin-right:8px}\
.sw.bm{border-top:3px dashed #009e73}\
@media (max-width:600px){\
main{padding:14px 10px 28px}\
h1{font-size:1.25em}\
.card{padding:10px;margin-bottom:12px}\
th,td{padding:5px 6px}\
.chart .wide{display:none}\
.chart .narrow{display:block}\
}\
";

/// The start of a page, through `<main>`: the shared stylesheet and the
/// page's own (`extra`).
pub(super) fn head(h: &mut String, title: &str, extra: &str) {
    let _ = writeln!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{CSS}{extra}</style>\n</head>\n<body>\n<main>",
        escape_html(title)
    );
}

/// The portfolio page's own rules: the tabs, the advice, the monthly
/// returns (a fixed grid of 14 columns on a screen, a card per year of 6
/// or 4 months a row on narrower ones: every column stays).
pub(super) const CSS_PAGE: &str = "\
.tabs{display:flex;gap:4px;flex-wrap:wrap}\
.tab{padding:3px 12px;border:1px solid #c8ccd2;border-radius:5px;text-decoration:none}\
.tab.on{background:#0072b2;color:#fff;border-color:#0072b2}\
.tools{align-items:center}\
.advice p{margin:6px 0 0}.advice ul{margin:4px 0 0;padding-left:20px}\
code{font-size:.9em;overflow-wrap:anywhere}\
table.months{table-layout:fixed;font-size:.86em}\
table.months th,table.months td{padding:5px 3px;text-align:right}\
table.months th:first-child{text-align:left;width:3.4em}\
@media (max-width:820px){\
table.months,table.months tbody,table.months tr{display:block}\
table.months tr.head{display:none}\
table.months tr{display:grid;grid-template-columns:repeat(6,1fr);border-bottom:1px solid #eceef1;padding:6px 0}\
table.months th[scope=row]{grid-column:1/-1;border:0;width:auto;font-size:1.1em;padding:2px 4px}\
table.months td{display:block;border:0;padding:3px 4px}\
table.months td::before{content:attr(data-m);display:block;color:#777;font-size:.82em}\
table.months td.yr{font-weight:600}\
}\
@media (max-width:520px){table.months tr{grid-template-columns:repeat(4,1fr)}}\
";

/// The index's own rules: sort links in the headers, and below 760 px a
/// small card per portfolio (labels from `data-label`) instead of a row.
pub(super) const CSS_DASHBOARD: &str = "\
table.dash tr.head a{color:inherit;text-decoration:none}\
table.dash tr.head a:hover{text-decoration:underline}\
table.dash th.r{text-align:right}\
table.dash td,table.dash th{vertical-align:middle}\
table.dash .pid{overflow-wrap:anywhere}\
.sparkline{display:block}\
td.days{color:#666;font-size:.88em;white-space:nowrap}\
.links span{color:#666}\
@media (max-width:760px){\
table.dash,table.dash tbody,table.dash tr{display:block}\
table.dash tr.head{display:none}\
table.dash tr{display:grid;grid-template-columns:repeat(3,1fr);gap:2px 10px;padding:10px 0;border-bottom:1px solid #eceef1}\
table.dash th.pid{grid-column:1/3;border:0;padding:0}\
table.dash td.st{text-align:right}\
table.dash td{display:block;border:0;padding:2px 0}\
table.dash td.num{text-align:left}\
table.dash td[data-label]::before{content:attr(data-label);display:block;font-size:.75em;color:#777}\
table.dash td.value{grid-column:1/-1;font-size:1.15em}\
table.dash td.spark,table.dash td.days{grid-column:1/-1}\
}\
";

/// A portfolio's page: heading and status, the form, and either what the
/// read shows or why the query cannot be shown (`data`'s `Err`).
pub(super) fn render_page(
    id: &str,
    form: &FormValues,
    query: Option<&str>,
    data: Result<PageData<'_>, &str>,
) -> String {
    let id_e = escape_html(id);
    let mut h = String::with_capacity(64 * 1024);
    let css = [
        CSS_PAGE,
        super::movers::CSS_MOVERS,
        super::tearsheet::CSS_TEAR,
    ]
    .concat();
    head(&mut h, &format!("NAV \u{2014} {id}"), &css);
    match &data {
        // `live-head` and `live` are what the live update swaps (assets.rs).
        Ok(d) => {
            h.push_str("<div id=\"live-head\">\n");
            write_heading(&mut h, &id_e, d.history);
            h.push_str("</div>\n");
        }
        Err(_) => {
            let _ = writeln!(h, "<h1>Portfolio {id_e}</h1>");
        }
    }
    write_form(&mut h, &format!("/portfolio/{id}"), "", form);
    match &data {
        Err(reason) => {
            let _ = writeln!(
                h,
                "<div class=\"card error\"><strong>This range cannot be shown:</strong> {}</div>",
                escape_html(reason)
            );
        }
        Ok(d) => {
            let (attrs, script) = live_region(id, d.history, d.query);
            let _ = writeln!(h, "<div id=\"live\"{attrs}>");
            write_sections(&mut h, id, form, query, d);
            h.push_str("</div>\n");
            h.push_str(&script);
        }
    }
    h.push_str("</main>\n</body>\n</html>\n");
    h
}

/// The heading with the status badge, the range shown, and a notice when
/// the history is being recomputed or is inconsistent.
fn write_heading(h: &mut String, id_e: &str, history: &History) {
    let st = &history.status;
    let state = st.state.as_str();
    let _ = writeln!(
        h,
        "<h1>Portfolio {id_e} <span class=\"badge {state}\">{state}</span></h1>"
    );
    let range = match (history.from, history.to) {
        (Some(f), Some(t)) => format!("{f} to {t}"),
        _ => "no records".to_string(),
    };
    let _ = writeln!(
        h,
        "<p class=\"sub\">Range shown: {} \u{b7} as of {} \u{b7} {} day(s)</p>",
        escape_html(&range),
        opt_date(history.as_of),
        history.points.len()
    );
    match st.state {
        State::Recomputing => {
            let _ = writeln!(
                h,
                "<div class=\"card notice\">A late event is being folded in: \
                 records from {} on may still change.</div>",
                opt_date(st.since)
            );
        }
        State::Inconsistent => write_inconsistency(h, &history.portfolio_id, st),
        State::Ok => {}
    }
}

/// The form: a plain GET to this same page (`action`, with the `hidden`
/// inputs it keeps), showing what was typed.
pub(super) fn write_form(h: &mut String, action: &str, hidden: &str, form: &FormValues) {
    let page_href = escape_html(action);
    let selected = |v: &str| {
        if form.calendar == v {
            " selected"
        } else {
            ""
        }
    };
    let _ = writeln!(
        h,
        "<div class=\"card\"><form method=\"get\" action=\"{page_href}\">\n\
         <label>From<input type=\"date\" name=\"from\" value=\"{}\"></label>\n\
         <label>To<input type=\"date\" name=\"to\" value=\"{}\"></label>\n\
         <label>Calendar<select name=\"calendar\">\
         <option value=\"trading\"{}>trading days (252/yr)</option>\
         <option value=\"all\"{}>all days (365/yr)</option></select></label>\n\
         <label>Risk-free rate (annual, e.g. 0.02)<input type=\"number\" name=\"risk_free\" \
         step=\"any\" min=\"-0.9999\" max=\"0.9999\" placeholder=\"0\" value=\"{}\"></label>\n\
         <label>Benchmark symbol<input type=\"text\" name=\"benchmark\" maxlength=\"32\" \
         placeholder=\"none\" value=\"{}\"></label>\n\
         <label>As known at (an instant, e.g. 2024-03-04T17:00:00Z)<input type=\"text\" \
         name=\"as_known_at\" maxlength=\"40\" placeholder=\"now\" value=\"{}\"></label>\n\
         <label class=\"check\"><input type=\"checkbox\" name=\"rebase\" value=\"1\"{}>\
         Rebased to 1</label>\n\
         {}{hidden}<button type=\"submit\">Show</button> <a href=\"{page_href}\">reset</a>\n\
         </form></div>",
        escape_html(&form.from),
        escape_html(&form.to),
        selected("trading"),
        selected("all"),
        escape_html(&form.risk_free),
        escape_html(&form.benchmark),
        escape_html(&form.as_known_at),
        if form.rebase { " checked" } else { "" },
        // The view is kept by the form, not typed in it.
        if form.value_view {
            "<input type=\"hidden\" name=\"view\" value=\"value\">"
        } else {
            ""
        },
    );
}

/// What a read shows: why part of it cannot be drawn (if so), the
/// pictures under their tabs (unit NAV, with the rebase toggle and the
/// lines' table; or value), the statistics, the monthly returns, the last
/// day, the positions, and links to the same range in other forms.
fn write_sections(
    h: &mut String,
    id: &str,
    form: &FormValues,
    query: Option<&str>,
    d: &PageData<'_>,
) {
    write_undrawn(
        h,
        &Asked {
            id,
            query,
            flags: (form.rebase, form.value_view),
            history: d.history,
            benchmark: d.query.benchmark.as_ref().map(|b| b.as_str()),
            bench_span: d.bench_span,
        },
    );
    let tab = |value: bool, name: &str| {
        let on = value == form.value_view;
        format!(
            "<a class=\"tab{}\" href=\"{}\"{}>{name}</a>",
            if on { " on" } else { "" },
            page_link(id, query, &[], (form.rebase, value)),
            if on { " aria-current=\"page\"" } else { "" }
        )
    };
    let _ = write!(
        h,
        "<div class=\"card chart\">\n<div class=\"tools\"><nav class=\"tabs\">{}{}</nav>",
        tab(false, "Unit NAV"),
        tab(true, "Value in money")
    );
    let label = if form.value_view {
        "market value, net invested and the flows"
    } else {
        let _ = write!(
            h,
            "<a class=\"toggle\" href=\"{}\">{}</a>",
            page_link(id, query, &[], (!form.rebase, false)),
            if form.rebase {
                "Show the NAV as recorded"
            } else {
                "Rebase the range to 1"
            }
        );
        "NAV curve and drawdown"
    };
    // plotters (and the value chart) escape the text they write, so the
    // SVG can be inlined.
    let _ = writeln!(
        h,
        "</div>\n<div class=\"wide\" role=\"img\" aria-label=\"{label}\">{}</div>\n\
         <div class=\"narrow\" role=\"img\" aria-label=\"{label}\">{}</div>",
        d.charts.wide, d.charts.narrow
    );
    if form.value_view {
        write_value_summary(h, &d.history.points, d.currency);
    } else {
        write_lines(
            h,
            d.history,
            form.rebase,
            d.query.benchmark.as_ref().map(|b| b.as_str()),
        );
    }
    h.push_str("</div>\n");
    super::tearsheet::write_rolling(h, &d.history.points, d.query.rolling);
    super::tearsheet::write_statistics(h, &d.history.statistics, d.query);
    write_periods(h, &d.history.statistics.periods);
    super::movers::write_movers(h, d.movers, d.currency);
    if let Some(last) = d.history.points.last() {
        write_last_day(h, last, d.currency);
        write_explain_links(h, id, d.history);
    }
    write_holdings(h, d);
    write_links(h, id, query);
}

/// What was held at the range's end: the positions, and under a lot
/// method the lots and the year's realizations.
fn write_holdings(h: &mut String, d: &PageData<'_>) {
    if let Some(p) = d.positions {
        write_positions(h, p, d.currency, d.movers);
    }
    if let Some(t) = d.lots {
        super::lots::write_lot_tables(h, t, d.currency);
    }
}

/// Every day of the range opens its explanation: the last one directly,
/// any other through the date field.
fn write_explain_links(h: &mut String, id: &str, history: &History) {
    let (Some(first), Some(last)) = (history.points.first(), history.points.last()) else {
        return;
    };
    let id_e = escape_html(id);
    let (first, last) = (first.date, last.date);
    let _ = writeln!(
        h,
        "<div class=\"card links\"><a href=\"/portfolio/{id_e}/explain/{last}\">Explain {last}</a>\
         <form method=\"get\" action=\"/portfolio/{id_e}/explain\"><label>Explain the day \
         <input type=\"date\" name=\"date\" min=\"{first}\" max=\"{last}\" value=\"{last}\" \
         required></label> <button>Explain</button></form></div>"
    );
}

/// The range as JSON, CSV and SVG, and the way back to the index.
fn write_links(h: &mut String, id: &str, query: Option<&str>) {
    let suffix = query.map(|q| format!("?{q}")).unwrap_or_default();
    let json_href = escape_html(&format!("/api/v1/portfolio/{id}/nav-history{suffix}"));
    let svg_href = escape_html(&format!("/api/v1/portfolio/{id}/nav-history.svg{suffix}"));
    let csv_href = escape_html(&format!("/api/v1/portfolio/{id}/nav-history.csv{suffix}"));
    let _ = writeln!(
        h,
        "<div class=\"card links\"><a href=\"{json_href}\">JSON of this range</a>\
         <a href=\"{csv_href}\">CSV of this range</a>\
         <a href=\"{svg_href}\">SVG picture</a><a href=\"/\">All portfolios</a></div>"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_html() {
        assert_eq!(
            escape_html(r#"<a href="x">Tom & 'Jerry'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;"
        );
        assert_eq!(escape_html("p-1001"), "p-1001");
    }

    #[test]
    fn page_escapes_what_the_person_typed() {
        let form = FormValues {
            from: "\"><script>alert(1)</script>".into(),
            ..FormValues::default()
        };
        let html = render_page("p-1", &form, Some("from=x"), Err("`from` <bad>"));
        assert!(!html.contains("<script"));
        assert!(html.contains("&lt;script&gt;"));
        assert!(html.contains("`from` &lt;bad&gt;"));
    }
}
