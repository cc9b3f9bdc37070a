//! Progress bars on stderr for the long commands (`gen`, `verify`,
//! `count`, `convert`), drawn only when stderr is a terminal: piped or redirected,
//! stderr carries nothing but status lines and errors.

use std::io::IsTerminal as _;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// The look of a bar of `unit` with or without a `total`: the count,
/// the rate and (with a total) the time left.
fn style(total: Option<u64>, unit: &str) -> Result<ProgressStyle, indicatif::style::TemplateError> {
    let template = match total {
        Some(_) => {
            "{spinner} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} ({rate}, ETA {eta}) {msg}"
        }
        None => "{spinner} [{elapsed_precise}] {human_pos} ({rate}) {msg}",
    };
    let unit = unit.to_string();
    // `1,234 records/s`, as the reports write rates.
    let rate = move |state: &ProgressState, w: &mut dyn std::fmt::Write| {
        let _ = w.write_str(&crate::fmt::per_second(state.per_sec(), &unit));
    };
    Ok(ProgressStyle::with_template(template)?.with_key("rate", rate))
}

/// A progress bar that draws on stderr when it is a terminal, and does
/// nothing otherwise.
#[derive(Debug)]
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar counting `unit` (`records`, `files`) up to `total`, or a
    /// counter without an end when `total` is unknown; hidden unless
    /// stderr is a terminal.
    pub(crate) fn new(total: Option<u64>, unit: &str) -> Self {
        if !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        Progress {
            bar: Some(Self::drawn(total, unit)),
        }
    }

    /// Whether a bar would be drawn (stderr is a terminal): what is
    /// only worth computing for a bar (a total) can be skipped otherwise.
    pub(crate) fn drawn_here() -> bool {
        std::io::stderr().is_terminal()
    }

    /// The bar itself, drawn on stderr.
    fn drawn(total: Option<u64>, unit: &str) -> ProgressBar {
        let style = style(total, unit).unwrap_or_else(|_| ProgressStyle::default_bar());
        let bar =
            ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr()).with_style(style);
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    }

    /// Gives a bar made without a total its end, `total` `unit`s, once
    /// known.
    pub(crate) fn set_total(&self, total: u64, unit: &str) {
        if let Some(bar) = self.bar.as_ref().filter(|b| b.length().is_none()) {
            bar.set_length(total);
            if let Ok(style) = style(Some(total), unit) {
                bar.set_style(style);
            }
        }
    }

    /// Sets how far along it is.
    pub(crate) fn set(&self, position: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(position);
        }
    }

    /// Moves it on by `n`.
    pub(crate) fn inc(&self, n: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(n);
        }
    }

    /// Says what is being worked on (a file's name).
    pub(crate) fn message(&self, text: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(text.to_string());
        }
    }

    /// Removes the bar from the terminal.
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    /// An error ends the command: the bar goes before it is printed.
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_valid() {
        for total in [Some(10), None] {
            assert!(style(total, "records").is_ok(), "{total:?}");
        }
    }

    #[test]
    fn hidden_off_a_terminal() {
        // Test runs capture stderr: no bar is made.
        if !std::io::stderr().is_terminal() {
            let progress = Progress::new(Some(10), "records");
            assert!(progress.bar.is_none());
            progress.set(5);
            progress.finish();
        }
    }
}
