//! Buffered standard output, and telling a closed pipe from a real error.

use std::io::{self, BufWriter, StdoutLock, Write};

/// Buffered, locked standard output for JSON lines and reports.
///
/// Writes return errors instead of panicking (as `println!` would on a
/// closed pipe), so `grist cat ... | head` ends quietly.
pub(crate) struct Out {
    inner: BufWriter<StdoutLock<'static>>,
}

impl Out {
    /// Locks standard output.
    pub(crate) fn stdout() -> Self {
        Out {
            inner: BufWriter::with_capacity(1 << 16, io::stdout().lock()),
        }
    }

    /// Writes `line` and a newline.
    pub(crate) fn line(&mut self, line: impl std::fmt::Display) -> io::Result<()> {
        writeln!(self.inner, "{line}")
    }

    /// Writes a JSON value on one line.
    pub(crate) fn json(&mut self, value: &serde_json::Value) -> io::Result<()> {
        serde_json::to_writer(&mut self.inner, value).map_err(io::Error::from)?;
        self.inner.write_all(b"\n")
    }

    /// Writes `bytes` as they are (a completion script).
    pub(crate) fn bytes(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_all(bytes)
    }

    /// Flushes what was written (call before reporting an error, so the
    /// good output comes first).
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// True when `e` comes from writing to a closed pipe.
pub(crate) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
