//! Readings from Linux's `/proc` and the C library: CPU seconds of a
//! process, of the PostgreSQL server, of the whole machine (busy and
//! stolen), of the calling thread, and a process's `/proc/<pid>/status`
//! fields (its peak RSS).

use std::time::Duration;

/// Fields of `/proc/<pid>/stat` after the command name.
fn proc_stat(pid: u32) -> Option<Vec<u64>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    Some(
        rest.split_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect(),
    )
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// User + system CPU seconds of a process (all threads); with `children`,
/// plus those of its reaped children.
pub(crate) fn cpu_seconds(pid: u32, children: bool) -> f64 {
    // After "pid (comm) ": state=0, ppid=1, …, utime=11, stime=12,
    // cutime=13, cstime=14.
    let Some(f) = proc_stat(pid) else { return 0.0 };
    let mut ticks = f[11] + f[12];
    if children {
        ticks += f[13] + f[14];
    }
    ticks as f64 / ticks_per_second()
}

/// CPU seconds of the machine since boot, all cores (`/proc/stat`): busy
/// in this system, and stolen by the hypervisor (a virtual machine's
/// neighbours — noise that no process here accounts for).
pub(crate) fn machine_cpu_seconds() -> (f64, f64) {
    let Ok(s) = std::fs::read_to_string("/proc/stat") else {
        return (0.0, 0.0);
    };
    let Some(cpu) = s.lines().find(|l| l.starts_with("cpu ")) else {
        return (0.0, 0.0);
    };
    // user nice system idle iowait irq softirq steal (guest is in user).
    let f: Vec<u64> = cpu
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let busy: u64 = [0, 1, 2, 5, 6].iter().filter_map(|&i| f.get(i)).sum();
    let steal = f.get(7).copied().unwrap_or(0);
    let t = ticks_per_second();
    (busy as f64 / t, steal as f64 / t)
}

/// The postmaster of our private server: the `postgres` process started
/// with `-p <port>`.
pub(crate) fn find_postmaster(port: u16) -> Option<u32> {
    let port = port.to_string();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
        if args.first().is_some_and(|a| a.ends_with(b"postgres"))
            && args
                .windows(2)
                .any(|w| w[0] == b"-p" && w[1] == port.as_bytes())
        {
            return Some(pid);
        }
    }
    None
}

/// CPU seconds of the whole server: the postmaster with its reaped
/// children, plus every live backend and auxiliary process.
pub(crate) fn pg_cpu_seconds(postmaster: u32) -> f64 {
    let mut total = cpu_seconds(postmaster, true);
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if proc_stat(pid).is_some_and(|f| f.get(1) == Some(&u64::from(postmaster))) {
                total += cpu_seconds(pid, false);
            }
        }
    }
    total
}

/// A `kB` field of `/proc/<pid>/status` (`VmHWM`, `VmRSS`, …).
pub(crate) fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Resets a process's `VmHWM` to its current RSS (Linux `clear_refs` 5).
pub(crate) fn reset_peak_rss(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}

/// CPU time of the calling thread.
pub(crate) fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid pointer to a timespec the call fills in.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
