//! The README's first command, end to end: `navd demo` as a child process
//! brings the whole pipeline up on its own (private PostgreSQL, in-process
//! broker, real consumer), a demo portfolio has a full curve, and SIGTERM
//! stops it and removes its temporary database.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn demo_comes_up_serves_a_full_curve_and_cleans_up() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_navd"))
        .args(["demo", "--addr", "127.0.0.1:0"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn navd demo");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut chart = None;
    let mut lines = Vec::new();
    while chart.is_none() && Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_secs(1)) {
            if let Some(url) = line.trim().strip_prefix("chart:") {
                chart = Some(url.trim().to_string());
            }
            lines.push(line);
        }
    }
    let Some(chart) = chart else {
        let _ = child.kill();
        panic!(
            "the demo did not come up in time; it printed:\n{}",
            lines.join("\n")
        );
    };
    // http://127.0.0.1:PORT/portfolio/demo-000
    let (base, id) = chart.rsplit_once("/portfolio/").unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let v: serde_json::Value = rt.block_on(async {
        reqwest::get(format!("{base}/api/v1/portfolio/{id}/nav-history"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    assert_eq!(v["status"]["state"], "ok", "{v}");
    let points = v["points"].as_array().unwrap();
    assert!(
        points.len() > 900,
        "about three years of days, got {}",
        points.len()
    );
    assert_eq!(v["as_of"], points.last().unwrap()["date"]);
    assert!(v["statistics"]["volatility"].as_f64().unwrap() > 0.0);
    let page = rt.block_on(async { reqwest::get(&chart).await.unwrap().text().await.unwrap() });
    assert!(page.contains("<svg"));
    let dead: serde_json::Value = rt.block_on(async {
        reqwest::get(format!("{base}/api/v1/admin/dead-letters"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    assert_eq!(
        dead["dead_letters"].as_array().unwrap().len(),
        2,
        "the two bad sample events"
    );

    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let stop = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < stop, "demo did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "demo exit status {status}");
    let rest: Vec<String> = rx.try_iter().collect();
    assert!(
        rest.iter()
            .any(|l| l.contains("temporary database removed")),
        "{rest:?}"
    );
}
