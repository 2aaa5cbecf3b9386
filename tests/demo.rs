//! The README's first command, end to end: `navd demo` as a child process
//! brings the whole pipeline up on its own (private PostgreSQL, in-process
//! broker, real consumer), a demo portfolio has a full curve, the index the
//! banner names lists the portfolios, the events produced as the banner's
//! `kcat` lines say reach the API with plausible numbers (the buy at the
//! symbol's latest close starts flat, the close moves it about a per
//! cent), the README's curl examples answer without a 404, and SIGHUP
//! stops it and removes its temporary database, as SIGTERM does while it is
//! still starting, and as closing the (pseudo-)terminal it runs in does. A
//! busy `--addr` is an error.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// Spawns `navd demo` with these arguments and log filter, stdout read
/// line by line.
fn spawn_demo(args: &[&str], log: &str, stderr: Stdio) -> (Child, Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_navd"))
        .arg("demo")
        .args(args)
        .env("RUST_LOG", log)
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("spawn navd demo");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

/// Reads lines until one satisfies `found` (its value returned), or panics
/// with everything printed after `within`.
fn wait_for<T>(
    child: &mut Child,
    rx: &Receiver<String>,
    lines: &mut Vec<String>,
    within: Duration,
    found: impl Fn(&str) -> Option<T>,
) -> T {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_secs(1)) {
            let hit = found(&line);
            lines.push(line);
            if let Some(v) = hit {
                return v;
            }
        }
    }
    let _ = child.kill();
    panic!(
        "the demo did not print what was awaited in time; it printed:\n{}",
        lines.join("\n")
    );
}

/// The private server's port and directory, from
/// `navd demo: private PostgreSQL on 127.0.0.1:PORT, in DIR`.
fn private_server(line: &str) -> Option<(u16, PathBuf)> {
    let rest = line.strip_prefix("navd demo: private PostgreSQL on 127.0.0.1:")?;
    let (port, dir) = rest.split_once(", in ")?;
    Some((port.parse().ok()?, PathBuf::from(dir)))
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// The child's exit status if it exits within `t`.
fn exit_within(child: &mut Child, t: Duration) -> Option<std::process::ExitStatus> {
    let stop = Instant::now() + t;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if Instant::now() > stop {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The child's exit status once it exits; after `within`, a SIGTERM (so it
/// still removes its server), then SIGKILL, then the test fails.
fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    if let Some(s) = exit_within(child, within) {
        return s;
    }
    signal(child, libc::SIGTERM);
    if exit_within(child, Duration::from_secs(30)).is_none() {
        let _ = child.kill();
    }
    panic!("demo did not stop in {within:?}");
}

/// The server is gone: its directory deleted, its port refusing.
fn assert_cleaned_up(port: u16, dir: &std::path::Path) {
    assert!(!dir.exists(), "{} is still there", dir.display());
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "PostgreSQL still answers on {port}"
    );
}

#[test]
fn demo_comes_up_serves_a_full_curve_and_cleans_up() {
    let (mut child, rx) = spawn_demo(&["--addr", "127.0.0.1:0"], "warn", Stdio::inherit());
    let mut lines = Vec::new();
    let (pg_port, pg_dir) = wait_for(
        &mut child,
        &rx,
        &mut lines,
        Duration::from_secs(60),
        private_server,
    );
    assert!(pg_dir.is_dir(), "{}", pg_dir.display());
    let index = wait_for(&mut child, &rx, &mut lines, Duration::from_secs(240), |l| {
        l.trim()
            .strip_prefix("index:")
            .and_then(|u| u.split_whitespace().next())
            .map(str::to_string)
    });
    let chart = wait_for(&mut child, &rx, &mut lines, Duration::from_secs(10), |l| {
        l.trim()
            .strip_prefix("chart:")
            .map(|u| u.trim().to_string())
    });
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

    // The index the banner names lists the demo's portfolios.
    assert_eq!(index, format!("{base}/"));
    let html = rt.block_on(async { reqwest::get(&index).await.unwrap().text().await.unwrap() });
    assert!(html.contains(&format!("/portfolio/{id}")), "{html}");

    // The banner's kcat lines, produced as they say (with rdkafka instead
    // of kcat): the broker answers from outside the process, the buy
    // becomes a portfolio of its own, valued at its price on its first
    // day, and the close moves it by about a per cent.
    let produce = wait_for(&mut child, &rx, &mut lines, Duration::from_secs(10), |l| {
        l.trim()
            .strip_prefix("produce:")
            .map(|c| c.trim().to_string())
    });
    let buy = Kcat::parse(&produce);
    assert_eq!(buy.topic, "nav.transactions");
    let event: serde_json::Value = serde_json::from_str(&buy.payload).expect("the payload is JSON");
    assert_eq!(event["portfolio_id"], buy.key.as_str());
    buy.send(&rt);
    let mine = format!("{base}/api/v1/portfolio/{}/nav-history", buy.key);
    let curve = wait_curve(&rt, &mine, |_| true);
    assert_eq!(curve["status"]["state"], "ok", "{curve}");
    let first = last_return(&curve);
    assert!(
        first.abs() < 0.001,
        "a buy at the latest close starts flat, not at {first}: {curve}"
    );

    let close_line = wait_for(&mut child, &rx, &mut lines, Duration::from_secs(10), |l| {
        l.trim()
            .strip_prefix("a close:")
            .map(|c| c.trim().to_string())
    });
    let close = Kcat::parse(&close_line);
    assert_eq!(close.topic, "nav.prices");
    let price: serde_json::Value = serde_json::from_str(&close.payload).unwrap();
    assert_eq!(price["symbol"], event["symbol"]);
    close.send(&rt);
    let moved = wait_curve(&rt, &mine, |v| last_return(v) > 0.001);
    let r = last_return(&moved);
    assert!(
        (0.005..0.015).contains(&r),
        "the printed close should move the buy by about 1 %, not {r}: {moved}"
    );

    readme_examples_answer(&rt, base);

    // A closed terminal: SIGHUP stops it as SIGTERM would, and cleans up.
    signal(&child, libc::SIGHUP);
    let status = wait_exit(&mut child, Duration::from_secs(60));
    assert!(status.success(), "demo exit status {status}");
    let rest: Vec<String> = rx.try_iter().collect();
    assert!(
        rest.iter()
            .any(|l| l.contains("temporary database removed")),
        "{rest:?}"
    );
    assert_cleaned_up(pg_port, &pg_dir);
}

/// A `kcat -P -b BROKER -t TOPIC -k KEY <<< 'PAYLOAD'` line of the banner.
struct Kcat {
    broker: String,
    topic: String,
    key: String,
    payload: String,
}

impl Kcat {
    fn parse(line: &str) -> Kcat {
        let (command, payload) = line.split_once(" <<< '").expect("a here-string");
        let payload = payload.strip_suffix('\'').expect("quoted payload");
        let words: Vec<&str> = command.split_whitespace().collect();
        assert_eq!(&words[..2], ["kcat", "-P"], "{command}");
        let flag = |f: &str| {
            let i = words
                .iter()
                .position(|w| *w == f)
                .unwrap_or_else(|| panic!("{f} in {command}"));
            words[i + 1].to_string()
        };
        Kcat {
            broker: flag("-b"),
            topic: flag("-t"),
            key: flag("-k"),
            payload: payload.to_string(),
        }
    }

    /// Produces the line's message as kcat would.
    fn send(&self, rt: &tokio::runtime::Runtime) {
        rt.block_on(async {
            use rdkafka::producer::{FutureProducer, FutureRecord};
            let producer: FutureProducer = rdkafka::ClientConfig::new()
                .set("bootstrap.servers", &self.broker)
                .set("message.timeout.ms", "30000")
                .create()
                .unwrap();
            producer
                .send(
                    FutureRecord::to(&self.topic)
                        .key(&self.key)
                        .payload(&self.payload),
                    Duration::from_secs(30),
                )
                .await
                .map_err(|(e, _)| e)
                .expect("the broker named in the banner takes the event");
        });
    }
}

/// The curve at `url` once it has points and satisfies `ready`.
fn wait_curve(
    rt: &tokio::runtime::Runtime,
    url: &str,
    ready: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = serde_json::Value::Null;
    loop {
        let answer = rt.block_on(async { reqwest::get(url).await.unwrap() });
        if answer.status() == 200 {
            let v: serde_json::Value = rt.block_on(answer.json()).unwrap();
            if v["points"].as_array().is_some_and(|p| !p.is_empty()) && ready(&v) {
                return v;
            }
            last = v;
        }
        assert!(Instant::now() < deadline, "{url} never got there: {last}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The return since the first day on the curve's last point.
fn last_return(curve: &serde_json::Value) -> f64 {
    let p = curve["points"].as_array().unwrap().last().unwrap();
    p["return_rate"]
        .as_str()
        .unwrap_or_else(|| panic!("no return_rate in {p}"))
        .parse()
        .unwrap()
}

/// Shell words of one command line: single and double quotes, `$TOKEN`
/// left empty as the README says to against the demo.
fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in line.replace("$TOKEN", "").chars() {
        match (quote, c) {
            (None, '\'' | '"') => (quote, any) = (Some(c), true),
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    words.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            (_, c) => (word, any) = (word + &c.to_string(), true),
        }
    }
    if any {
        words.push(word);
    }
    words
}

/// Every `curl` of the README's API section, sent to the demo at `base`
/// as curl would send it: none answers 404 (or any error).
fn readme_examples_answer(rt: &tokio::runtime::Runtime, base: &str) {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let api = &readme[readme.find("## The API").expect("an API section")..];
    let block = &api[api.find("```sh\n").unwrap() + 6..];
    let block = &block[..block.find("```").unwrap()];
    let commands: Vec<String> = block
        .replace("\\\n", " ")
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("curl "))
        .map(str::to_string)
        .collect();
    assert!(commands.len() >= 7, "{commands:#?}");
    let client = reqwest::Client::new();
    for command in commands {
        let words = shell_words(&command);
        let (mut method, mut url, mut body) = ("GET".to_string(), None, None);
        let mut headers = Vec::new();
        let mut it = words.iter().skip(1);
        while let Some(w) = it.next() {
            match w.as_str() {
                "-X" => method = it.next().unwrap().clone(),
                "-H" => headers.push(it.next().unwrap().clone()),
                "-d" => body = it.next().cloned(),
                "-s" => {}
                u if u.starts_with("http://127.0.0.1:8080/") => {
                    url = Some(u.replacen("http://127.0.0.1:8080", base, 1))
                }
                other => panic!("unexpected `{other}` in {command}"),
            }
        }
        let url = url.unwrap_or_else(|| panic!("no URL in {command}"));
        let mut req = client.request(method.parse().unwrap(), &url);
        for h in &headers {
            let (k, v) = h.split_once(':').unwrap();
            req = req.header(k.trim(), v.trim());
        }
        if let Some(b) = body {
            req = req.body(b);
        }
        let status = rt.block_on(req.send()).unwrap().status();
        assert!(
            status.is_success(),
            "the README's `{command}` answers {status} against the demo"
        );
    }
}

#[test]
fn a_signal_while_starting_still_cleans_up() {
    let (mut child, rx) = spawn_demo(&["--addr", "127.0.0.1:0"], "info", Stdio::piped());
    let mut stderr = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut lines = Vec::new();
    let (port, dir) = wait_for(
        &mut child,
        &rx,
        &mut lines,
        Duration::from_secs(60),
        private_server,
    );
    // Before the sample is even produced.
    signal(&child, libc::SIGTERM);
    let status = wait_exit(&mut child, Duration::from_secs(60));
    assert!(status.success(), "demo exit status {status}");
    lines.extend(rx.try_iter());
    assert!(
        !lines.iter().any(|l| l.contains("navd demo is up")),
        "stopped too late to test start-up: {lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("temporary database removed")),
        "{lines:#?}"
    );
    assert_cleaned_up(port, &dir);
    // Logged, in plain text: stderr is not a terminal, so no colours.
    let err = err.join().unwrap();
    assert!(err.contains("SIGTERM"), "{err}");
    assert!(!err.contains('\u{1b}'), "ANSI escapes in a pipe: {err:?}");
}

#[test]
fn an_explicit_busy_addr_is_an_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_navd"))
        .args(["demo", "--addr", &addr])
        .stdin(Stdio::null())
        .output()
        .expect("run navd demo");
    assert!(!out.status.success(), "exit status {}", out.status);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("--addr {addr} cannot be used")) && err.contains("in use"),
        "{err}"
    );
    // Refused before anything was started.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("PostgreSQL"), "{stdout}");
    drop(taken);
}

/// A pseudo-terminal pair: (master, slave).
fn openpty() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (0, 0);
    // SAFETY: two out-pointers to c_ints; null name, termios and winsize.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
    // The child must not inherit the master: a terminal whose master is
    // still open somewhere never hangs up.
    // SAFETY: fcntl on a descriptor we own.
    assert_eq!(
        unsafe { libc::fcntl(master, libc::F_SETFD, libc::FD_CLOEXEC) },
        0
    );
    // SAFETY: openpty returned two fresh descriptors we now own.
    unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(master),
            std::os::fd::OwnedFd::from_raw_fd(slave),
        )
    }
}

#[test]
fn closing_its_terminal_stops_it_and_cleans_up() {
    use std::os::unix::process::CommandExt as _;
    let (master, slave) = openpty();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_navd"));
    cmd.args(["demo", "--addr", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave);
    // SAFETY: only async-signal-safe calls between fork and exec. The demo
    // leads a session of its own whose controlling terminal is the pty, as
    // in a terminal window: when the window closes (the master is closed),
    // the kernel hangs the terminal up and sends it SIGHUP.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(1, libc::TIOCSCTTY as _, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn navd demo on a pty");
    drop(cmd); // the parent's copies of the slave

    // Read the terminal until the banner's last line, then close it.
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut seen = String::new();
        let mut term = std::fs::File::from(master);
        let mut buf = [0u8; 4096];
        loop {
            match term.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
            if seen.contains("stops it and cleans up") {
                break;
            }
        }
        let _ = tx.send(seen.clone());
        drop(term); // the window closes
        seen
    });
    let seen = match rx.recv_timeout(Duration::from_secs(240)) {
        Ok(s) => s,
        Err(_) => {
            let _ = child.kill();
            panic!("the demo did not come up on its terminal in time");
        }
    };
    let (port, dir) = seen
        .lines()
        .find_map(|l| private_server(l.trim_end_matches('\r')))
        .unwrap_or_else(|| panic!("no server line in:\n{seen}"));
    // On a terminal the log is coloured.
    assert!(seen.contains('\u{1b}'), "no colours on a terminal:\n{seen}");

    let status = wait_exit(&mut child, Duration::from_secs(60));
    assert!(status.success(), "demo exit status {status}");
    assert_cleaned_up(port, &dir);
    reader.join().unwrap();
}
