//! Content-coding negotiation (RFC 9110 §12.5.3): whether a response may be
//! sent gzip-compressed, given the request's `Accept-Encoding`.
//!
//! The service chooses gzip in one place (the cached curve of GET
//! nav-history, compressed once and kept beside the plain copy), and that
//! choice goes through [`gzip_preferred`]. It honours quality values
//! (`gzip;q=0` refuses gzip), the `*` wildcard, `x-gzip` as an alias and an
//! explicit preference for `identity`; a header it cannot parse counts as
//! absent, which means "no compression" — the answer every client can read.

use axum::http::{header, HeaderMap};

/// True when the client accepts gzip (q > 0, by name or through `*`) and
/// does not weigh the uncompressed form higher. Identity competes only when
/// weighted explicitly (`identity;q=…`, or `*;q=…`, which covers it): the
/// implicit acceptability of identity is no preference, so `gzip;q=0.8`
/// alone still gets gzip.
pub fn gzip_preferred(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(header::ACCEPT_ENCODING).iter().peekable();
    if values.peek().is_none() {
        return false;
    }
    let mut gzip = None;
    let mut identity = None;
    let mut star = None;
    for v in values {
        let Ok(v) = v.to_str() else { return false };
        for item in v.split(',') {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let mut q = 1.0;
            for p in parts {
                let Some((k, v)) = p.split_once('=') else {
                    return false;
                };
                if k.trim().eq_ignore_ascii_case("q") {
                    match qvalue(v.trim()) {
                        Some(x) => q = x,
                        None => return false,
                    }
                }
            }
            let slot = match coding.as_str() {
                "gzip" | "x-gzip" => &mut gzip,
                "identity" => &mut identity,
                "*" => &mut star,
                _ => continue,
            };
            // A coding listed twice: the most favourable weight wins.
            *slot = Some(slot.map_or(q, |old: f32| old.max(q)));
        }
    }
    let gzip = gzip.or(star).unwrap_or(0.0);
    gzip > 0.0 && identity.or(star).is_none_or(|identity| gzip >= identity)
}

/// An RFC 9110 qvalue: `0`, `1`, `0.xxx` or `1.000` (up to three decimals).
fn qvalue(s: &str) -> Option<f32> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits_ok = frac.len() <= 3 && frac.bytes().all(|b| b.is_ascii_digit());
    let v: f32 = match int {
        "0" if digits_ok => format!("0.{}", if frac.is_empty() { "0" } else { frac })
            .parse()
            .ok()?,
        "1" if digits_ok && frac.bytes().all(|b| b == b'0') => 1.0,
        _ => return None,
    };
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn accepts(values: &[&str]) -> bool {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
        }
        gzip_preferred(&h)
    }

    #[test]
    fn quality_values_wildcards_and_identity() {
        for (header, want) in [
            ("gzip", true),
            ("GZIP", true),
            ("x-gzip", true),
            ("gzip, deflate, br", true),
            ("br;q=1.0, gzip;q=0.8, *;q=0.1", true),
            ("gzip;q=0", false),
            ("gzip;q=0.0", false),
            ("gzip;q=0.000", false),
            ("gzip; q=0", false),
            ("gzip;Q=0", false),
            ("*", true),
            ("*;q=0", false),
            ("*;q=0.5, gzip;q=0", false),
            ("gzip;q=0, *", false),
            ("deflate", false),
            ("identity", false),
            ("", false),
            ("identity;q=1, gzip;q=0.5", false),
            ("identity;q=0.5, gzip;q=0.5", true),
            ("identity;q=0, gzip;q=0.1", true),
            ("identity;q=0", false),
            ("gzip;q=0.001", true),
            ("gzip;q=0.8", true),
            ("gzip;q=0.5, *;q=1", false),
            // Malformed weights: the header counts as absent.
            ("gzip;q=2", false),
            ("gzip;q=abc", false),
            ("gzip;q=0.0001", false),
            ("gzip;q", false),
            ("gzip;q=-1", false),
        ] {
            assert_eq!(accepts(&[header]), want, "Accept-Encoding: {header}");
        }
        assert!(!accepts(&[]), "no header, no compression");
        assert!(accepts(&["deflate", "gzip"]), "values across header lines");
        assert!(!accepts(&["gzip;q=0.5", "identity"]), "identity preferred");
    }
}
