//! Build-time facts the binary carries:
//!
//! - `NAVD_GIT_COMMIT`, the commit `navd --version` names: the build's own
//!   `NAVD_GIT_COMMIT` when set (the container build copies no `.git`; its
//!   `--build-arg` passes one), else `git rev-parse --short HEAD`, else
//!   `unknown` (a source tarball, or no git installed).
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=NAVD_GIT_COMMIT");
    let given = std::env::var("NAVD_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty() && c != "unknown");
    let commit = given
        .or_else(|| git(&["rev-parse", "--short", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_string());
    // A new commit moves HEAD (detached) or the branch it names; in a
    // worktree both live under git's own directories, which git names.
    for path in [git(&["rev-parse", "--git-path", "HEAD"]), head_ref_path()]
        .into_iter()
        .flatten()
        .filter(|p| std::path::Path::new(p).exists())
    {
        println!("cargo:rerun-if-changed={path}");
    }
    // Only if it exists: cargo reruns a script whose watched file is missing
    // on every build, and that would rebuild the crate each time.
    if let Some(dir) = git(&["rev-parse", "--git-common-dir"]) {
        let packed = format!("{dir}/packed-refs");
        if std::path::Path::new(&packed).exists() {
            println!("cargo:rerun-if-changed={packed}");
        }
    }
    println!("cargo:rustc-env=NAVD_GIT_COMMIT={commit}");
}

/// The file of the branch HEAD names (`.git/refs/heads/main`), if any.
fn head_ref_path() -> Option<String> {
    let name = git(&["symbolic-ref", "-q", "HEAD"])?;
    git(&["rev-parse", "--git-path", &name])
}
