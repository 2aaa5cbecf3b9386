//! The picture of the curve (the README's API section "Also expected": NAV and drawdown for
//! people who would rather look than read).
//!
//! This module owns:
//! - [`render`] (and [`render_svg`], the plain curve): pure functions
//!   drawing the NAV curve (top panel, optionally rebased to 1 and with a
//!   benchmark line and a legend) and its drawdown (bottom panel, % below
//!   the running peak) with plotters' SVG backend into a `String`, with a
//!   hover `<title>` per day and a compact layout for narrow pictures;
//! - [`svg()`]: `GET /api/v1/portfolio/{id}/nav-history.svg`, the same read as
//!   the JSON GET (same query, scope, 400/404 rules) answered as
//!   `image/svg+xml`; a browser's login cookie is accepted as well as the
//!   header (`auth::BrowserCaller`), since the page links to it;
//! - [`page()`]: `GET /portfolio/{id}`, a small self-contained HTML page (no
//!   external assets; JavaScript only for the live update) with a
//!   date-range form, the SVG inlined (wide and compact, CSS picks by
//!   width), the status and the statistics; `benchmark=` and the page's
//!   own `rebase=1` (docs/chart.md);
//! - [`live_script`]: `GET /assets/live-<hash>.js`, the page's one script:
//!   with JavaScript the page redraws itself when a change of its history
//!   arrives on its change stream (`assets.rs`);
//! - [`index`]: `GET /`, a dashboard of the portfolios the caller may see
//!   (value in money, the day's, year's and total return, status, a
//!   sparkline), sorted, filtered and paged by the server.
//!
//! The pages find their caller through `login::PageCaller`: the
//! `Authorization` header, or under JWT auth the cookie of `/login`, and
//! without a usable token the sign-in form rather than a bare 401.
//!
//! Both handlers go through [`crate::query::read_history`], so the picture, the
//! page and the JSON always show the same snapshot and obey the same rules,
//! and both draw through [`RenderPool`]: off the async threads, a bounded
//! number at a time, each on at most [`MAX_PLOT_POINTS`] points. None of
//! them is cached, so each (the index too) first takes a share of its
//! caller's uncached work (`guard::WorkLimiter`, 429 past it), held until
//! its answer is drawn.
//!
//! By file:
//! - `picture.rs`: what is drawn — [`Picture`], [`Base`], and the series
//!   prepared from them (cleaned, rebased, the benchmark from W0);
//! - `svg.rs`: drawing — [`render`], the panels, the legend, the hover
//!   layer, [`downsample`], sizes, type and colours;
//! - `axis.rs`: the calendar-aligned date axis both panels share;
//! - `pool.rs`: [`RenderPool`], the bounded blocking threads that draw;
//! - `handlers.rs`: the axum handlers [`svg()`], [`page()`], [`index`], and
//!   turning a read into pictures (`rebase=`, blank form fields, headers);
//! - `page.rs`: the portfolio page's HTML — stylesheet, heading (with what
//!   to do about an inconsistency), form, NAV/value tabs, sections, and why
//!   a benchmark or a range cannot be drawn;
//! - `notices.rs`: what the page says it cannot show and what to do —
//!   the inconsistency's advice, an undrawable benchmark or range;
//! - `explain.rs`: the page explaining one day (`/portfolio/{id}/explain/{date}`);
//! - `assets.rs` and `live.js`: the live update — the script, its route,
//!   the page's attributes for it and the policy that lets it run;
//! - `index.rs`: the index's dashboard — its query, table, sparklines, pager;
//! - `value.rs`: the value chart (money, net invested, flows marked);
//! - `marks.rs`: the ex-dates of splits and corporate actions marked on
//!   the page's NAV chart, with what each did;
//! - `format.rs`: money, amounts and returns written for people;
//! - `tables.rs`: the page's tables (lines, statistics, monthly returns, last
//!   day, positions) and the number formatting shared with the hover titles;
//! - `movers.rs`: "what moved it", the range's attribution sorted by
//!   contribution (and each position's P&L of the range);
//! - `tearsheet.rs`: the tear sheet's tables (trailing returns, deepest
//!   drawdowns, distribution) and the rolling chart's card;
//! - `rolling.rs`: the rolling volatility and Sharpe chart (`rolling=N`);
//! - `composite.rs`: the composite page (`GET /composite?portfolios=…`),
//!   drawn like a portfolio's from the composite API's read.

mod assets;
mod axis;
mod composite;
mod explain;
mod format;
mod handlers;
mod index;
mod lots;
mod marks;
mod movers;
mod notices;
mod page;
mod picture;
mod pool;
mod rolling;
mod svg;
mod tables;
mod tearsheet;
mod value;

// `__path_svg` is the OpenAPI description `#[utoipa::path]` generates for
// `svg`; the `OpenApi` derive (`http::openapi`) finds it next to `svg`.
pub use assets::{live_script, live_script_path};
pub use composite::composite_page;
pub use explain::{explain_form, explain_page};
pub use handlers::{__path_svg, index, page, svg};
pub use marks::ExMark;
pub use picture::{Base, Picture};
pub use pool::RenderPool;
pub use svg::{downsample, render, render_svg, MAX_PLOT_POINTS};

/// Fixtures the tests of several files share.
#[cfg(test)]
mod test_data {
    use chrono::NaiveDate;

    pub(super) fn day(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    /// Three years of a deterministic wavy curve with a real drawdown.
    pub(super) fn three_years() -> Vec<(NaiveDate, f64)> {
        let start = day("2021-01-01");
        (0..(3 * 365))
            .map(|i| {
                let t = f64::from(i);
                let v = 1.0 + t / 2000.0 + 0.08 * (t / 60.0).sin();
                (start + chrono::Days::new(i as u64), v)
            })
            .collect()
    }

    /// `NAVD_CHART_DUMP=dir cargo test --lib chart` writes the picture and
    /// the page there, to look at them.
    pub(super) fn dump(name: &str, body: &str) {
        if let Some(dir) = std::env::var_os("NAVD_CHART_DUMP") {
            std::fs::write(std::path::Path::new(&dir).join(name), body).unwrap();
        }
    }
}
