//! The index page (`GET /`) as a dashboard: per portfolio its value in
//! money, the day's, the year's and the total return, its status and a
//! sparkline of its NAV over the last year, sortable (column headers are
//! links) and filterable (a plain GET form), a page at a time. No script:
//! the server sorts, filters and pages (`q`, `status`, `sort`, `order`,
//! `page`). On a phone each portfolio's row becomes a small card.

use std::fmt::Write as _;

use chrono::NaiveDate;

use super::format::NULL;
use super::format::{money, signed_pct};
use super::page::{head, CSS_DASHBOARD};
use crate::http::html::escape_html;
use crate::query::{Dashboard, DashboardEntry, DashboardQuery, DashboardSort, State};

/// Portfolios per page.
pub(super) const PER_PAGE: i64 = 100;

/// The sort keys by their query name, and each one's first order (the
/// largest figures first; ids and states alphabetically).
const SORTS: [(&str, DashboardSort, bool); 6] = [
    ("id", DashboardSort::Id, false),
    ("value", DashboardSort::Value, true),
    ("day", DashboardSort::DayReturn, true),
    ("year", DashboardSort::YearReturn, true),
    ("total", DashboardSort::TotalReturn, true),
    ("status", DashboardSort::Status, false),
];

fn sort_name(s: DashboardSort) -> &'static str {
    SORTS
        .iter()
        .find(|(_, k, _)| *k == s)
        .map_or("id", |(n, _, _)| n)
}

/// The index's query (blank fields are not given); a value it does not
/// know is the reason the page gives.
pub(super) fn parse_index_query(pairs: &[(String, String)]) -> Result<DashboardQuery, String> {
    let mut q = DashboardQuery::default();
    let mut order = None;
    for (k, v) in pairs {
        let v = v.trim();
        match k.as_str() {
            "q" if v.chars().count() <= 64 => q.search = Some(v.to_string()),
            "q" => return Err("the search `q` is longer than 64 characters".into()),
            "status" => {
                q.state = Some(match v {
                    "ok" => State::Ok,
                    "recomputing" => State::Recomputing,
                    "inconsistent" => State::Inconsistent,
                    _ => return Err(bad("status", v, "ok, recomputing or inconsistent")),
                })
            }
            "sort" => {
                let (_, s, _) = SORTS
                    .iter()
                    .find(|(n, _, _)| *n == v)
                    .ok_or_else(|| bad("sort", v, "id, value, day, year, total or status"))?;
                q.sort = *s;
            }
            "order" => {
                order = Some(match v {
                    "asc" => false,
                    "desc" => true,
                    _ => return Err(bad("order", v, "asc or desc")),
                })
            }
            "page" => {
                q.page = match crate::http::params::digits(v) {
                    Some(n) if (1..=1_000_000).contains(&n) => (n - 1) as u32,
                    _ => return Err(bad("page", v, "a page number from 1")),
                }
            }
            // A misspelt parameter is refused, as the API refuses it,
            // rather than silently showing everything.
            _ => {
                return Err(format!(
                    "unknown query parameter `{}` (allowed: q, status, sort, order, page)",
                    projections::echo(k)
                ))
            }
        }
    }
    q.descending = order.unwrap_or_else(|| first_order(q.sort));
    Ok(q)
}

fn bad(name: &str, v: &str, allowed: &str) -> String {
    format!("`{name}` must be {allowed}, got `{}`", projections::echo(v))
}

fn first_order(s: DashboardSort) -> bool {
    SORTS.iter().find(|(_, k, _)| *k == s).is_some_and(|x| x.2)
}

/// The index's query string for `q` at `page` (0-based) sorted by `sort`
/// in `desc` order, escaped for an attribute.
fn href(q: &DashboardQuery, sort: DashboardSort, desc: bool, page: u32) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    if let Some(v) = q.search.as_deref().filter(|v| !v.is_empty()) {
        s.append_pair("q", v);
    }
    if let Some(st) = q.state {
        s.append_pair("status", st.as_str());
    }
    if sort != DashboardSort::Id || desc {
        s.append_pair("sort", sort_name(sort));
        s.append_pair("order", if desc { "desc" } else { "asc" });
    }
    if page > 0 {
        s.append_pair("page", &(page + 1).to_string());
    }
    let qs = s.finish();
    escape_html(&if qs.is_empty() {
        "/".to_string()
    } else {
        format!("/?{qs}")
    })
}

/// The index page: the filter form, then the dashboard or why the query
/// cannot be shown.
pub(super) fn render_index(q: &DashboardQuery, data: Result<&Dashboard, &str>) -> String {
    let mut h = String::with_capacity(64 * 1024);
    let css = [CSS_DASHBOARD, CSS_COMBINE].concat();
    head(&mut h, "NAV \u{2014} portfolios", &css);
    h.push_str("<h1>Portfolios</h1>\n");
    write_filter(&mut h, q);
    match data {
        Err(reason) => {
            let _ = writeln!(
                h,
                "<div class=\"card error\"><strong>This list cannot be shown:</strong> {}</div>",
                escape_html(reason)
            );
        }
        Ok(d) => {
            write_table(&mut h, q, d);
            write_pager(&mut h, q, d);
        }
    }
    h.push_str("</main>\n</body>\n</html>\n");
    h
}

/// The combine form under the table.
const CSS_COMBINE: &str =
    "form.combine{margin-top:12px;align-items:center}form.combine .sub{margin:0}";

fn write_filter(h: &mut String, q: &DashboardQuery) {
    let sel = |on: bool| if on { " selected" } else { "" };
    let _ = write!(
        h,
        "<div class=\"card\"><form method=\"get\" action=\"/\">\n\
         <label>Portfolio id contains<input type=\"search\" name=\"q\" maxlength=\"64\" value=\"{}\"></label>\n\
         <label>Status<select name=\"status\"><option value=\"\">any</option>",
        escape_html(q.search.as_deref().unwrap_or(""))
    );
    for st in [State::Ok, State::Recomputing, State::Inconsistent] {
        let _ = write!(
            h,
            "<option value=\"{0}\"{1}>{0}</option>",
            st.as_str(),
            sel(q.state == Some(st))
        );
    }
    h.push_str("</select></label>\n<label>Sort by<select name=\"sort\">");
    for (name, s, _) in SORTS {
        let _ = write!(
            h,
            "<option value=\"{name}\"{}>{}</option>",
            sel(q.sort == s),
            column_title(s)
        );
    }
    let _ = writeln!(
        h,
        "</select></label>\n<label>Order<select name=\"order\">\
         <option value=\"asc\"{}>ascending</option><option value=\"desc\"{}>descending</option>\
         </select></label>\n<button type=\"submit\">Show</button> <a href=\"/\">reset</a>\n</form></div>",
        sel(!q.descending),
        sel(q.descending)
    );
}

fn column_title(s: DashboardSort) -> &'static str {
    match s {
        DashboardSort::Id => "Portfolio",
        DashboardSort::Value => "Value",
        DashboardSort::DayReturn => "Day",
        DashboardSort::YearReturn => "Year to date",
        DashboardSort::TotalReturn => "Total return",
        DashboardSort::Status => "Status",
    }
}

/// A column header that sorts by it (again: the other way round).
fn sort_header(q: &DashboardQuery, s: DashboardSort, class: &str) -> String {
    let on = q.sort == s;
    let desc = if on { !q.descending } else { first_order(s) };
    let arrow = match (on, q.descending) {
        (false, _) => "",
        (true, true) => " \u{25be}",
        (true, false) => " \u{25b4}",
    };
    format!(
        "<th class=\"{class}\"{}><a href=\"{}\">{}{arrow}</a></th>",
        if on {
            if q.descending {
                " aria-sort=\"descending\""
            } else {
                " aria-sort=\"ascending\""
            }
        } else {
            ""
        },
        href(q, s, desc, 0),
        column_title(s)
    )
}

fn write_table(h: &mut String, q: &DashboardQuery, d: &Dashboard) {
    h.push_str("<div class=\"card\"><table class=\"dash\">\n<tr class=\"head\">");
    h.push_str(&sort_header(q, DashboardSort::Id, ""));
    h.push_str(&sort_header(q, DashboardSort::Status, ""));
    h.push_str(&sort_header(q, DashboardSort::Value, "r"));
    h.push_str(&sort_header(q, DashboardSort::DayReturn, "r"));
    h.push_str(&sort_header(q, DashboardSort::YearReturn, "r"));
    h.push_str(&sort_header(q, DashboardSort::TotalReturn, "r"));
    h.push_str("<th>Last year</th><th>Through</th></tr>\n");
    for e in &d.entries {
        write_row(h, e);
    }
    if d.entries.is_empty() {
        h.push_str("<tr><td colspan=\"8\">no portfolio to show</td></tr>\n");
    }
    h.push_str(
        "</table>\n<p class=\"sub\">Value: the last record's market value in the \
        portfolio's currency. Day: its return over the day before; year to date: since the \
        last record of the year before; total: since the first day (NAV \u{2212} 1).</p>\n",
    );
    // The checkboxes belong to this form through their `form` attribute,
    // so the table needs no form around it; a plain GET, no script.
    h.push_str(
        "<form id=\"combine\" class=\"combine\" method=\"get\" action=\"/composite\">\
         <button type=\"submit\">Combine the selected portfolios</button>\
         <span class=\"sub\">one curve of their summed values and flows, on its own page \
         (members in one currency)</span></form></div>\n",
    );
}

fn write_row(h: &mut String, e: &DashboardEntry) {
    let id = escape_html(&e.portfolio_id);
    let state = e.status.state.as_str();
    let value = e
        .value
        .map_or_else(|| NULL.to_string(), |v| money(v, &e.currency));
    let cell = |label: &str, v: Option<rust_decimal::Decimal>| {
        let (text, class) = signed_pct(v);
        let class = if class.is_empty() {
            "num".to_string()
        } else {
            format!("num {class}")
        };
        format!("<td class=\"{class}\" data-label=\"{label}\">{text}</td>")
    };
    let through = e
        .last_day
        .map_or_else(|| "no records yet".to_string(), |d| d.to_string());
    let since = e
        .first_day
        .map(|d| format!(" title=\"records from {d}\""))
        .unwrap_or_default();
    let _ = writeln!(
        h,
        "<tr><th scope=\"row\" class=\"pid\"><input type=\"checkbox\" name=\"portfolios\" \
         value=\"{id}\" form=\"combine\" aria-label=\"combine {id}\"> \
         <a href=\"/portfolio/{id}\">{id}</a></th>\
         <td class=\"st\"><span class=\"badge {state}\">{state}</span></td>\
         <td class=\"num value\" data-label=\"Value\">{}</td>{}{}{}\
         <td class=\"spark\">{}</td><td class=\"days\" data-label=\"Through\"{since}>{through}</td></tr>",
        escape_html(&value),
        cell("Day", e.day_return),
        cell("Year to date", e.year_return),
        cell("Total", e.total_return),
        sparkline(&e.sparkline),
    );
}

/// A small SVG of the NAV samples, green when the year ended higher than
/// it started, vermilion when lower; a `<title>` says what it shows.
pub(super) fn sparkline(points: &[(NaiveDate, f64)]) -> String {
    const W: f64 = 120.0;
    const H: f64 = 30.0;
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return String::new();
    };
    if points.len() < 2 {
        return String::new();
    }
    let lo = points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let hi = points.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    let span_y = if hi > lo { hi - lo } else { 1.0 };
    let span_x = ((last.0 - first.0).num_days() as f64).max(1.0);
    let mut pts = String::new();
    for (d, v) in points {
        let x = 1.0 + (W - 2.0) * (*d - first.0).num_days() as f64 / span_x;
        let y = 2.0 + (H - 4.0) * (1.0 - (v - lo) / span_y);
        let _ = write!(pts, "{x:.1},{y:.1} ");
    }
    let color = if last.1 >= first.1 {
        "#17653a"
    } else {
        "#c0392b"
    };
    let title = format!(
        "NAV {} on {} to {} on {}",
        super::format::fixed(first.1, 4),
        first.0,
        super::format::fixed(last.1, 4),
        last.0
    );
    format!(
        "<svg class=\"sparkline\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" \
         role=\"img\" aria-label=\"{t}\"><title>{t}</title>\
         <polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/></svg>",
        pts.trim_end(),
        t = escape_html(&title)
    )
}

fn write_pager(h: &mut String, q: &DashboardQuery, d: &Dashboard) {
    if q.page == 0 && !d.more {
        return;
    }
    h.push_str("<div class=\"card links\">");
    if q.page > 0 {
        let _ = write!(
            h,
            "<a href=\"{}\">Previous portfolios</a>",
            href(q, q.sort, q.descending, q.page - 1)
        );
    }
    let _ = write!(h, "<span>Page {}</span>", q.page + 1);
    if d.more {
        let _ = write!(
            h,
            "<a href=\"{}\">Next portfolios</a>",
            href(q, q.sort, q.descending, q.page + 1)
        );
    }
    h.push_str("</div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(s: &str) -> Vec<(String, String)> {
        form_urlencoded::parse(s.as_bytes())
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect()
    }

    #[test]
    fn query_of_the_index() {
        let q = parse_index_query(&pairs("q=abc&status=inconsistent&sort=value&page=3")).unwrap();
        assert_eq!(q.search.as_deref(), Some("abc"));
        assert_eq!(q.state, Some(State::Inconsistent));
        assert_eq!(q.sort, DashboardSort::Value);
        assert!(q.descending, "the largest values first by default");
        assert_eq!(q.page, 2);
        let q = parse_index_query(&pairs("sort=value&order=asc&q=&status=")).unwrap();
        assert!(!q.descending && q.search.is_none() && q.state.is_none());
        assert!(parse_index_query(&pairs("sort=nope"))
            .unwrap_err()
            .contains("`sort` must be"));
        assert!(parse_index_query(&pairs("page=0")).is_err());
        assert!(parse_index_query(&pairs("after=x"))
            .unwrap_err()
            .contains("unknown query parameter `after`"));
        // The links keep the filter and change the order or the page.
        let q = parse_index_query(&pairs("q=a%26b&sort=day")).unwrap();
        assert_eq!(
            href(&q, q.sort, q.descending, 1),
            "/?q=a%26b&amp;sort=day&amp;order=desc&amp;page=2"
        );
        assert!(sort_header(&q, DashboardSort::DayReturn, "r").contains("order=asc"));
    }

    #[test]
    fn sparkline_draws_the_samples() {
        let d = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
        let svg = sparkline(&[(d("2024-01-01"), 1.0), (d("2024-01-08"), 1.2)]);
        assert!(svg.contains("points=\"1.0,28.0 119.0,2.0\""), "{svg}");
        assert!(svg.contains("#17653a"));
        assert!(svg.contains("<title>NAV 1.0000 on 2024-01-01 to 1.2000 on 2024-01-08</title>"));
        assert_eq!(sparkline(&[(d("2024-01-01"), 1.0)]), "");
    }
}
