//! Small helpers every crate's tests use.

/// An error and its causes (the `source()` chain) joined by `": "`, as
/// the CLI prints them: what a test matches when it checks that a cause
/// is reported, and only once.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        next = cause.source();
    }
    text
}

/// Checks the error contract of a failed open of the missing file `missing`
/// (a path the OS refuses to open): the error's chain names `name` and
/// prints the OS error exactly once, and the error has a cause.
pub fn assert_io_cause_once(err: &dyn std::error::Error, missing: &std::path::Path, name: &str) {
    let os = std::fs::File::open(missing)
        .expect_err("the file is missing")
        .to_string();
    let text = chain(err);
    assert_eq!(text.matches(&os).count(), 1, "{text}");
    assert!(text.contains(name), "{text}");
    assert!(err.source().is_some(), "{text}: no cause");
}

/// The names of the entries of folder `dir`, sorted: what the atomic
/// writers' tests look at (no temporary file left, the final name only
/// once finished).
pub fn dir_entries(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            e.expect("a folder entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// A fresh temporary folder, removed when dropped.
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary folder")
}
