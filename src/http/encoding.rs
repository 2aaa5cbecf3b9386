//! Content-coding negotiation (RFC 9110 §12.5.3): which coding a response
//! is sent in, given the request's `Accept-Encoding`.
//!
//! The service compresses one response, the cached curve of GET
//! nav-history, which keeps its compressed copies beside the plain one
//! (`http::cache`). [`ranked`] orders the codings a client accepts.
//! [`choose`] picks the one to send now, and may name a better one to
//! make in the background. Quality values are honoured (`gzip;q=0`
//! refuses gzip), and so are the `*` wildcard, `x-gzip` as an alias and
//! an explicit weight for `identity`. A header that cannot be parsed
//! counts as absent, which means "no compression": the answer every
//! client can read.

use axum::http::{header, HeaderMap};

/// A content coding navd can send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Coding {
    Br,
    Gzip,
    Identity,
}

impl Coding {
    /// The `Content-Encoding` value, none for identity.
    pub(crate) fn header(self) -> Option<&'static str> {
        match self {
            Coding::Br => Some("br"),
            Coding::Gzip => Some("gzip"),
            Coding::Identity => None,
        }
    }
}

/// The codings the client accepts, most preferred first. Never empty.
///
/// A compressed coding must have q > 0 (by name or through `*`). It must
/// also weigh at least as much as `identity` when identity is weighted
/// explicitly (`identity;q=…`, or `*;q=…`, which covers it). Identity
/// that is merely implied carries no preference, so `gzip;q=0.8` alone
/// still gets gzip. On equal weights brotli comes first (smaller), then
/// gzip. Identity is last, and it is dropped only when refused
/// explicitly (`identity;q=0`) and something else is left.
pub(crate) fn ranked(headers: &HeaderMap) -> Vec<Coding> {
    weights(headers).map_or_else(|| vec![Coding::Identity], |w| w.ranked())
}

/// What to send now, given which codings are `ready` (made already), and
/// a better coding to make in the background, if any. Only brotli is
/// deferred: it takes several times gzip's time to make. A client that
/// prefers it and also takes gzip gets gzip until brotli is ready. A
/// client whose next choice after brotli is identity (`Accept-Encoding:
/// br`) waits for brotli, on a miss too, rather than take the plain body
/// (ten times larger).
pub(crate) fn choose(
    ranked: &[Coding],
    ready: impl Fn(Coding) -> bool,
) -> (Coding, Option<Coding>) {
    match ranked {
        [Coding::Br, Coding::Gzip, ..] if !ready(Coding::Br) => (Coding::Gzip, Some(Coding::Br)),
        [first, ..] => (*first, None),
        [] => (Coding::Identity, None),
    }
}

#[derive(Default)]
struct Weights {
    br: Option<f32>,
    gzip: Option<f32>,
    identity: Option<f32>,
    star: Option<f32>,
}

impl Weights {
    fn ranked(&self) -> Vec<Coding> {
        let identity = self.identity.or(self.star);
        let mut out: Vec<(f32, Coding)> = [(self.br, Coding::Br), (self.gzip, Coding::Gzip)]
            .into_iter()
            .map(|(q, c)| (q.or(self.star).unwrap_or(0.0), c))
            .filter(|(q, _)| *q > 0.0 && identity.is_none_or(|i| *q >= i))
            .collect();
        // Stable: on equal weights the order above (brotli, gzip) stays.
        out.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut out: Vec<Coding> = out.into_iter().map(|(_, c)| c).collect();
        if identity != Some(0.0) || out.is_empty() {
            out.push(Coding::Identity);
        }
        out
    }
}

/// The weights of the header's codings; `None` when it is absent or
/// cannot be parsed.
fn weights(headers: &HeaderMap) -> Option<Weights> {
    let mut values = headers.get_all(header::ACCEPT_ENCODING).iter().peekable();
    values.peek()?;
    let mut w = Weights::default();
    for v in values {
        let v = v.to_str().ok()?;
        for item in v.split(',') {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let mut q = 1.0;
            for p in parts {
                let (k, v) = p.split_once('=')?;
                if k.trim().eq_ignore_ascii_case("q") {
                    q = qvalue(v.trim())?;
                }
            }
            let slot = match coding.as_str() {
                "br" => &mut w.br,
                "gzip" | "x-gzip" => &mut w.gzip,
                "identity" => &mut w.identity,
                "*" => &mut w.star,
                _ => continue,
            };
            // A coding listed twice: the most favourable weight wins.
            *slot = Some(slot.map_or(q, |old: f32| old.max(q)));
        }
    }
    Some(w)
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
    use Coding::{Br, Gzip, Identity};

    fn rank(values: &[&str]) -> Vec<Coding> {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
        }
        ranked(&h)
    }

    #[test]
    fn quality_values_wildcards_and_identity() {
        for (header, want) in [
            ("gzip", vec![Gzip, Identity]),
            ("GZIP", vec![Gzip, Identity]),
            ("x-gzip", vec![Gzip, Identity]),
            ("gzip, deflate, br", vec![Br, Gzip, Identity]),
            ("gzip, deflate, br, zstd", vec![Br, Gzip, Identity]),
            ("br;q=1.0, gzip;q=0.8, *;q=0.1", vec![Br, Gzip, Identity]),
            ("br;q=0.5, gzip", vec![Gzip, Br, Identity]),
            ("br", vec![Br, Identity]),
            ("br, identity;q=0", vec![Br]),
            ("br;q=0, gzip;q=0, identity;q=0", vec![Identity]),
            ("gzip;q=0", vec![Identity]),
            ("gzip;q=0.0", vec![Identity]),
            ("gzip;q=0.000", vec![Identity]),
            ("gzip; q=0", vec![Identity]),
            ("gzip;Q=0", vec![Identity]),
            ("*", vec![Br, Gzip, Identity]),
            ("*;q=0", vec![Identity]),
            ("*;q=0.5, gzip;q=0", vec![Br, Identity]),
            ("gzip;q=0, br;q=0, *", vec![Identity]),
            ("deflate", vec![Identity]),
            ("identity", vec![Identity]),
            ("", vec![Identity]),
            ("identity;q=1, gzip;q=0.5, br;q=0.9", vec![Identity]),
            ("identity;q=0.5, gzip;q=0.5", vec![Gzip, Identity]),
            ("identity;q=0, gzip;q=0.1", vec![Gzip]),
            ("identity;q=0", vec![Identity]),
            ("gzip;q=0.001", vec![Gzip, Identity]),
            ("gzip;q=0.8", vec![Gzip, Identity]),
            ("gzip;q=0.5, *;q=1", vec![Br, Identity]),
            // Malformed weights: the header counts as absent.
            ("gzip;q=2", vec![Identity]),
            ("gzip;q=1.5", vec![Identity]),
            ("gzip;q=1.0000", vec![Identity]),
            ("br;q=1.000, gzip;q=0.999", vec![Br, Gzip, Identity]),
            ("br;q=abc, gzip", vec![Identity]),
            ("gzip;q=0.0001", vec![Identity]),
            ("gzip;q", vec![Identity]),
            ("gzip;q=-1", vec![Identity]),
        ] {
            assert_eq!(rank(&[header]), want, "Accept-Encoding: {header}");
        }
        assert_eq!(rank(&[]), vec![Identity], "no header, no compression");
        assert_eq!(
            rank(&["deflate", "gzip"]),
            vec![Gzip, Identity],
            "across lines"
        );
        assert_eq!(rank(&["gzip;q=0.5", "identity"]), vec![Identity]);
        let bad = HeaderValue::from_bytes(b"gzip\xff").unwrap();
        let mut h = HeaderMap::new();
        h.append(header::ACCEPT_ENCODING, bad);
        assert_eq!(ranked(&h), vec![Identity], "not text: absent");
    }

    #[test]
    fn content_encoding_names() {
        assert_eq!(Br.header(), Some("br"));
        assert_eq!(Gzip.header(), Some("gzip"));
        assert_eq!(Identity.header(), None);
    }

    #[test]
    fn brotli_is_deferred_while_something_else_is_accepted() {
        let all = |_: Coding| true;
        let plain = |c: Coding| c == Identity;
        assert_eq!(choose(&[Br, Gzip, Identity], all), (Br, None));
        assert_eq!(choose(&[Br, Gzip, Identity], plain), (Gzip, Some(Br)));
        // Brotli, then only identity: wait for brotli rather than send
        // the plain body (README: a client that takes brotli alone waits).
        assert_eq!(choose(&[Br, Identity], plain), (Br, None), "br: wait");
        assert_eq!(choose(&[Br], plain), (Br, None), "nothing else: wait");
        assert_eq!(choose(&[Br, Gzip], plain), (Gzip, Some(Br)));
        // Gzip is made on the spot, never deferred.
        assert_eq!(choose(&[Gzip, Br, Identity], plain), (Gzip, None));
        assert_eq!(choose(&[Identity], plain), (Identity, None));
        assert_eq!(choose(&[], plain), (Identity, None));
    }
}
