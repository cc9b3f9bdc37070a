//! The Python package's tests, run by `cargo test` (the README's one test
//! command): a virtual environment at `target/python-venv` (made once with
//! `python3` from `PATH` and `python/requirements-test.txt`, made again
//! when that file changes), the extension built and installed into it by
//! `maturin develop` (in `target/python-build`: the outer cargo holds
//! `target/`'s lock), the corpus served by grist-testkit's S3 server, and
//! `python -m pytest python/tests`, its output streamed.
//!
//! `GRIST_SKIP_PYTHON=1` skips all of it (saying so loudly); `PYTHON`
//! names another interpreter than `python3`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use grist_testkit::corpus::Remote;

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root")
}

/// Runs `cmd`, its output going straight to the terminal; panics naming
/// `what` when it fails.
fn run(what: &str, cmd: &mut Command) {
    eprintln!("grist-python: {what}: {cmd:?}");
    let start = Instant::now();
    let status = cmd.status().unwrap_or_else(|e| {
        panic!(
            "{what}: cannot start {cmd:?}: {e} (the Python tests need python3 >= 3.9 on PATH, \
                 or PYTHON naming one; GRIST_SKIP_PYTHON=1 skips them)"
        )
    });
    eprintln!(
        "grist-python: {what}: {status} in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert!(status.success(), "{what} failed ({status})");
}

/// The venv's executables folder.
fn bin(venv: &Path) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts")
    } else {
        venv.join("bin")
    }
}

/// The test venv, made (or brought up to date with the requirements).
fn venv(repo: &Path, target: &Path) -> PathBuf {
    let venv = target.join("python-venv");
    let requirements = repo.join("python/requirements-test.txt");
    let wanted = std::fs::read_to_string(&requirements)
        .unwrap_or_else(|e| panic!("{}: {e}", requirements.display()));
    // What the venv was installed from: a venv made from another version of
    // the requirements (or half made) is made again.
    let stamp = venv.join("grist-requirements.txt");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        return venv;
    }
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    eprintln!(
        "grist-python: installing the Python test environment in {} (first run: torch and \
         ray are large, this takes minutes)",
        venv.display()
    );
    if venv.exists() {
        std::fs::remove_dir_all(&venv).unwrap_or_else(|e| panic!("{}: {e}", venv.display()));
    }
    run(
        "creating the venv",
        Command::new(&python).arg("-m").arg("venv").arg(&venv),
    );
    run(
        "installing python/requirements-test.txt",
        Command::new(bin(&venv).join("python"))
            .args(["-m", "pip", "install", "--quiet", "-r"])
            .arg(&requirements),
    );
    std::fs::write(&stamp, wanted).unwrap_or_else(|e| panic!("{}: {e}", stamp.display()));
    venv
}

#[test]
fn python_package_tests_pass() {
    if std::env::var("GRIST_SKIP_PYTHON").is_ok_and(|v| v == "1") {
        eprintln!(
            "\n*** grist-python: GRIST_SKIP_PYTHON=1: the Python package was NOT built and its \
             tests were NOT run ***\n"
        );
        return;
    }
    let start = Instant::now();
    let repo = repo();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_absolute() { t } else { repo.join(t) })
        .unwrap_or_else(|| repo.join("target"));
    let venv = venv(&repo, &target);
    let bin = bin(&venv);

    // The extension, built by maturin (as a user's `pip install ./python`
    // would) and installed into the venv (editable: python/grist is the
    // package, the built library copied into it). maturin finds
    // python/pyproject.toml in its working folder, and the crate through
    // it.
    run(
        "building the extension (maturin develop)",
        Command::new(bin.join("maturin"))
            .arg("develop")
            .current_dir(repo.join("python"))
            .env("VIRTUAL_ENV", &venv)
            .env("PATH", prepend_path(&bin))
            .env("CARGO_TARGET_DIR", target.join("python-build"))
            .env("CARGO_INCREMENTAL", "0")
            .env("CARGO_PROFILE_DEV_DEBUG", "line-tables-only"),
    );

    // The corpus over S3, for the object-store tests; a writable bucket
    // for the writing ones.
    let remote = Remote::start();
    let server = remote.server();
    server.bucket("scratch");
    let corpus = grist_testkit::corpus::root()
        .canonicalize()
        .expect("the corpus folder");
    let mut pytest = Command::new(bin.join("python"));
    pytest
        .args([
            "-m",
            "pytest",
            "python/tests",
            "-q",
            "-p",
            "no:cacheprovider",
        ])
        .current_dir(&repo)
        .env("PATH", prepend_path(&bin))
        .env("GRIST_CORPUS", &corpus)
        .env("GRIST_TEST_S3_URL", server.url("corpus", ""))
        .env("GRIST_TEST_S3_SCRATCH", server.url("scratch", ""))
        .envs(server.env())
        // Python's own buffering would hold the output back.
        .env("PYTHONUNBUFFERED", "1");
    run("pytest python/tests", &mut pytest);
    eprintln!(
        "grist-python: the Python tests passed in {:.1} s (venv, build and tests)",
        start.elapsed().as_secs_f64()
    );
}

/// `PATH` with `dir` first.
fn prepend_path(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_path_buf()];
    if let Some(path) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(paths).expect("PATH")
}
