//! Headless Chromium for the tests of the pages (`tests/chart.rs`,
//! `tests/chart_live.rs`, each as `#[path = "common/browser.rs"] mod
//! browser;`): finding the browser (a test fails saying how to install it
//! when it is missing) and driving it over the DevTools protocol.
// Each including test uses part of it.
#![allow(dead_code)]
#![allow(unreachable_pub)]

use std::path::PathBuf;
use std::time::Duration;

pub fn chromium() -> PathBuf {
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ] {
        if let Some(path) = std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .find(|f| f.is_file())
        }) {
            return path;
        }
    }
    panic!(
        "headless Chromium is needed for the page tests (chart, chart_live) and was not found on PATH. \
         Install it: `sudo apt-get install chromium` (Debian/Ubuntu)"
    );
}

/// Chromium driven over the DevTools protocol on a pipe
/// (`--remote-debugging-pipe`: requests on its fd 3, answers and events on
/// its fd 4, JSON messages each ending in a NUL byte), for what the command
/// line cannot do: Chromium keeps a window at least 500 px wide whatever
/// `--window-size` says, so a 400 px viewport needs
/// `Emulation.setDeviceMetricsOverride`; and a probe script can run in the
/// page as served (`Runtime.evaluate` is not subject to the page's CSP).
pub struct Devtools {
    child: std::process::Child,
    to: std::fs::File,
    from: std::sync::mpsc::Receiver<serde_json::Value>,
    /// Events received while waiting for an answer.
    events: Vec<serde_json::Value>,
    next: u64,
    session: String,
    _profile: tempfile::TempDir,
}

fn pipe() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two new descriptors, owned from here on.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    }
}

pub const CDP_WAIT: Duration = Duration::from_secs(60);

impl Devtools {
    /// A headless Chromium with one page whose viewport is `width` ×
    /// `height` CSS pixels.
    pub fn start(width: u32, height: u32) -> Self {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let profile = tempfile::tempdir().unwrap();
        let (to_chrome_r, to_chrome_w) = pipe();
        let (from_chrome_r, from_chrome_w) = pipe();
        let (cr, cw) = (to_chrome_r.as_raw_fd(), from_chrome_w.as_raw_fd());
        let mut cmd = std::process::Command::new(chromium());
        cmd.args([
            "--headless",
            "--remote-debugging-pipe",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
        // SAFETY: only async-signal-safe calls between fork and exec. The
        // ends are first moved above 10, so placing them on 3 and 4 cannot
        // close one another; dup2 leaves the copies open across exec.
        unsafe {
            cmd.pre_exec(move || {
                let r = libc::fcntl(cr, libc::F_DUPFD, 10);
                let w = libc::fcntl(cw, libc::F_DUPFD, 10);
                if r < 0 || w < 0 || libc::dup2(r, 3) < 0 || libc::dup2(w, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("chromium runs");
        drop((to_chrome_r, from_chrome_w));
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::fs::File::from(from_chrome_r);
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut r = std::io::BufReader::new(reader);
            let mut buf = Vec::new();
            while r.read_until(0, &mut buf).is_ok_and(|n| n > 0) {
                if buf.last() == Some(&0) {
                    buf.pop();
                }
                if let Ok(v) = serde_json::from_slice(&buf) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
                buf.clear();
            }
        });
        let mut d = Devtools {
            child,
            to: std::fs::File::from(to_chrome_w),
            from: rx,
            events: Vec::new(),
            next: 0,
            session: String::new(),
            _profile: profile,
        };
        let target = d.call(
            "Target.createTarget",
            serde_json::json!({"url": "about:blank"}),
            false,
        );
        let attached = d.call(
            "Target.attachToTarget",
            serde_json::json!({"targetId": target["targetId"], "flatten": true}),
            false,
        );
        d.session = attached["sessionId"].as_str().unwrap().to_string();
        d.call(
            "Emulation.setDeviceMetricsOverride",
            serde_json::json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
            true,
        );
        d.call("Page.enable", serde_json::json!({}), true);
        d
    }

    /// Sends a command (to the page's session when `in_page`) and answers
    /// its result; a protocol error fails the test.
    pub fn call(
        &mut self,
        method: &str,
        params: serde_json::Value,
        in_page: bool,
    ) -> serde_json::Value {
        use std::io::Write;
        self.next += 1;
        let id = self.next;
        let mut msg = serde_json::json!({"id": id, "method": method, "params": params});
        if in_page {
            msg["sessionId"] = self.session.clone().into();
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).expect("write to chromium");
        loop {
            let m = self
                .from
                .recv_timeout(CDP_WAIT)
                .unwrap_or_else(|e| panic!("chromium answered {method} in time: {e}"));
            if m["id"] == id {
                assert!(m.get("error").is_none(), "{method}: {m}");
                return m["result"].clone();
            }
            self.events.push(m);
        }
    }

    /// Opens `url` and waits for its load event.
    pub fn open(&mut self, url: &str) {
        self.events.clear();
        let r = self.call("Page.navigate", serde_json::json!({"url": url}), true);
        assert!(r.get("errorText").is_none(), "navigate {url}: {r}");
        self.wait_load(url);
    }

    /// Evaluates `expression`, which navigates (submits a form, say), and
    /// waits for the next page's load event.
    pub fn navigate_by(&mut self, expression: &str) {
        self.events.clear();
        self.eval(expression);
        self.wait_load(expression);
    }

    /// Waits for a load event since the events were last cleared.
    fn wait_load(&mut self, what: &str) {
        let loaded = |m: &serde_json::Value| m["method"] == "Page.loadEventFired";
        if self.events.iter().any(loaded) {
            return;
        }
        loop {
            let m = self
                .from
                .recv_timeout(CDP_WAIT)
                .unwrap_or_else(|e| panic!("{what} loaded in time: {e}"));
            if loaded(&m) {
                return;
            }
        }
    }

    /// The value of a JavaScript expression evaluated in the page.
    pub fn eval(&mut self, expression: &str) -> serde_json::Value {
        let r = self.call(
            "Runtime.evaluate",
            serde_json::json!({"expression": expression, "returnByValue": true}),
            true,
        );
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {r}");
        r["result"]["value"].clone()
    }

    /// The page's DOM as serialized now (what `--dump-dom` prints).
    pub fn dom(&mut self) -> String {
        self.eval("document.documentElement.outerHTML")
            .as_str()
            .unwrap()
            .to_string()
    }

    /// A PNG of the viewport.
    pub fn screenshot(&mut self) -> Vec<u8> {
        use base64::Engine as _;
        let r = self.call(
            "Page.captureScreenshot",
            serde_json::json!({"format": "png"}),
            true,
        );
        base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap()
    }
}

impl Devtools {
    /// A PNG of the whole page (up to [`MAX_SHOT_HEIGHT`] px tall), for
    /// the docs.
    pub fn full_screenshot(&mut self, width: u32) -> Vec<u8> {
        use base64::Engine as _;
        let height = self
            .eval("document.documentElement.scrollHeight")
            .as_u64()
            .unwrap()
            .min(MAX_SHOT_HEIGHT);
        let r = self.call(
            "Page.captureScreenshot",
            serde_json::json!({"format": "png", "captureBeyondViewport": true,
                "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}}),
            true,
        );
        base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap()
    }
}

/// The docs' screenshots stop there (a phone's page of tables is long).
pub const MAX_SHOT_HEIGHT: u64 = 3200;

impl Drop for Devtools {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
