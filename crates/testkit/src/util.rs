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

/// Checks the error contract of a failed open of the missing file
/// `missing`: the chain of causes names the path once and says what is
/// wrong once, as the storage layer words it.
pub fn assert_missing_said_once(err: &dyn std::error::Error, missing: &std::path::Path) {
    assert_eq!(
        chain(err),
        format!("{}: not found", missing.display()),
        "the path once, what is wrong once"
    );
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
