//! The files a command reads and their format, told by grist's format
//! registry exactly as the loader tells them: `--format` names a
//! registered format; without it each file's name says (extensions
//! first, then a format's usual bare name such as OFRecord's
//! `part-<digits>`), else its content. A folder is a dataset of the
//! format's files in the format's order. `--payload` is an option of the
//! format (FFRecord's).

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use anyhow::Context as _;
use grist_tensor::{Format, Input, RegistryError};

/// The storage every command reads and writes through: local files, and
/// object stores (`s3://`, `gs://`, `az://`, `http(s)://`) configured by
/// object_store's usual environment variables (`AWS_ENDPOINT`,
/// `AWS_ACCESS_KEY_ID`, `AWS_ALLOW_HTTP`, ...), their requests retried as
/// [`RETRY_VARIABLES`] say.
pub(crate) fn storage() -> anyhow::Result<grist::Storage> {
    Ok(grist::Storage::new().with_retry(retry_from(|name| std::env::var(name).ok())?))
}

/// The environment variables that change how requests to object stores
/// are retried (grist-io's `Retry`), each a number: how many times a
/// request is made, how long one request may take (seconds), and how long
/// one operation (a ranged read, a block of a stream, a part of an
/// upload) may take with all its retries (seconds). Unset, grist-io's
/// defaults hold: 10 attempts, 30 s, 180 s.
pub(crate) const RETRY_VARIABLES: [&str; 3] = [
    "GRIST_REMOTE_ATTEMPTS",
    "GRIST_REMOTE_REQUEST_TIMEOUT",
    "GRIST_REMOTE_DEADLINE",
];

/// The retries the variables of [`RETRY_VARIABLES`] ask for, read by
/// `var`; a value that is not a number is an error naming the variable.
fn retry_from(var: impl Fn(&str) -> Option<String>) -> anyhow::Result<grist::io::Retry> {
    let [attempts, timeout, deadline] = RETRY_VARIABLES;
    let mut retry = grist::io::Retry::new();
    if let Some(text) = var(attempts) {
        let n: u32 = text
            .trim()
            .parse()
            .with_context(|| format!("{attempts}={text:?}: not a whole number"))?;
        retry = retry.with_attempts(n);
    }
    let seconds = |name: &str| -> anyhow::Result<Option<std::time::Duration>> {
        let Some(text) = var(name) else {
            return Ok(None);
        };
        let parsed: Option<f64> = text.trim().parse().ok();
        match parsed.and_then(|s| std::time::Duration::try_from_secs_f64(s).ok()) {
            Some(d) => Ok(Some(d)),
            None => anyhow::bail!("{name}={text:?}: not a number of seconds"),
        }
    };
    if let Some(d) = seconds(timeout)? {
        retry = retry.with_request_timeout(d);
    }
    if let Some(d) = seconds(deadline)? {
        retry = retry.with_deadline(d);
    }
    Ok(retry)
}

/// How standard input is called in output lines and messages.
pub(crate) const STDIN_NAME: &str = "<stdin>";

/// The temporary file standard input was copied to, once it has been.
static SPOOLED: OnceLock<String> = OnceLock::new();

/// Standard input copied to a temporary file, removed when this is
/// dropped (at the end of the command).
#[derive(Debug)]
pub(crate) struct Stdin {
    _file: tempfile::TempPath,
}

/// `paths` with `-` (standard input) replaced by a temporary file holding
/// what standard input holds, and the guard that removes that file.
///
/// Every format reads files by offset and size (FFRecord's header holds
/// its samples' offsets), so standard input is read to its end first,
/// into `$TMPDIR` rather than memory: a stream of any length fits, and
/// then reads exactly as a file does, its format told by its content
/// (TFRecord compression too) or by `--format`. Output begins once
/// standard input is closed.
pub(crate) fn with_stdin(paths: &[PathBuf]) -> anyhow::Result<(Vec<PathBuf>, Option<Stdin>)> {
    let dashes = paths.iter().filter(|p| p.as_os_str() == "-").count();
    if dashes == 0 {
        return Ok((paths.to_vec(), None));
    }
    if dashes > 1 {
        anyhow::bail!("- is given {dashes} times: standard input can be read only once");
    }
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        anyhow::bail!(
            "-: standard input is a terminal: pipe records into grist (`... | grist cat --raw -`) \
             or name the file"
        );
    }
    let spool = spool(&mut stdin.lock())?;
    let path = spool.to_path_buf();
    // Messages and output lines name standard input, not the spool.
    let _ = SPOOLED.set(path.to_string_lossy().into_owned());
    let paths = paths
        .iter()
        .map(|p| {
            if p.as_os_str() == "-" {
                path.clone()
            } else {
                p.clone()
            }
        })
        .collect();
    Ok((paths, Some(Stdin { _file: spool })))
}

/// Copies `input` to its end into a new temporary file.
fn spool(input: &mut impl std::io::Read) -> anyhow::Result<tempfile::TempPath> {
    let mut file = tempfile::Builder::new()
        .prefix(".grist-stdin-")
        .tempfile()
        .context("-: creating a temporary file for standard input")?;
    std::io::copy(input, file.as_file_mut())
        .and_then(|_| file.as_file_mut().flush())
        .context("-: copying standard input to a temporary file")?;
    Ok(file.into_temp_path())
}

/// `text` with the temporary file standard input was copied to, if any,
/// called [`STDIN_NAME`].
pub(crate) fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    match SPOOLED.get() {
        Some(spool) if text.contains(spool.as_str()) => text.replace(spool, STDIN_NAME).into(),
        _ => text.into(),
    }
}

/// [`shown`], padded to the temporary file's name's width, for the lines
/// of a table whose columns were laid out with that name.
pub(crate) fn shown_aligned(text: &str) -> std::borrow::Cow<'_, str> {
    match SPOOLED.get() {
        Some(spool) if text.contains(spool.as_str()) => {
            let width = spool.chars().count();
            text.replace(spool, &format!("{STDIN_NAME:<width$}")).into()
        }
        _ => text.into(),
    }
}

/// The paths or URLs of the command line, as text.
pub(crate) fn texts(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect()
}

/// The registered formats' ids, for help texts: `tfrecord, avro, ...`.
fn known() -> String {
    let registry = grist::registry();
    let ids: Vec<&str> = registry.formats().iter().map(|f| f.id()).collect();
    ids.join(", ")
}

/// `--format NAME`: a registered format, by id or name, in any case.
fn parse_format(name: &str) -> Result<Arc<dyn Format>, String> {
    grist::registry().get(name).map_err(|e| e.to_string())
}

/// The help of `--format`, from the registry.
fn format_help() -> String {
    let registry = grist::registry();
    let extensions: Vec<String> = registry
        .formats()
        .iter()
        .map(|f| format!("{} {}", f.id(), f.extensions().join(" ")))
        .collect();
    format!(
        "The format of the files: {}. By default, each file's format is told by its name, an \
         extension first ({}), then a format's usual bare name, else by its content; a folder \
         is a dataset of its files, in the format's order",
        known(),
        extensions.join("; ")
    )
}

/// The `--format` option, shared by the commands that read files, and
/// the options of a format's folders.
#[derive(Clone, Debug, clap::Args)]
pub(crate) struct FormatArg {
    // The help is built from the registry (`format_help`).
    #[arg(long, value_name = "FORMAT", value_parser = parse_format, help = format_help())]
    format: Option<Arc<dyn Format>>,
    /// OFRecord folders: the parts are named PREFIX and their index
    /// (OneFlow's part_name_prefix, e.g. train-). By default, part-.
    /// Other formats refuse it
    #[arg(long, value_name = "PREFIX")]
    part_name_prefix: Option<String>,
    /// OFRecord folders: the parts' index is zero-padded to exactly N
    /// digits (OneFlow's part_name_suffix_length; -1: not padded). By
    /// default, any number of digits. Other formats refuse it
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    part_name_suffix_length: Option<i64>,
}

/// The `--payload` option of the commands that decode records: an option
/// of the format (`configure("payload", KIND)`).
#[derive(Clone, Debug, Default, clap::Args)]
pub(crate) struct PayloadArg {
    /// What the records hold, for the formats of opaque records that take
    /// this option: FFRecord samples are example (serialized tf.Example,
    /// the default), ofrecord (serialized OFRecord) or raw (one tensor's
    /// little-endian bytes). Other formats refuse it.
    #[arg(long, value_name = "KIND")]
    payload: Option<String>,
}

impl PayloadArg {
    /// The payload `kind`, as if given with `--payload`.
    pub(crate) fn of(kind: Option<String>) -> Self {
        PayloadArg { payload: kind }
    }

    /// `format` configured with the payload asked for, if any.
    fn configure(&self, format: Arc<dyn Format>) -> anyhow::Result<Arc<dyn Format>> {
        match &self.payload {
            None => Ok(format),
            Some(kind) => format
                .configure("payload", kind)
                .map_err(anyhow::Error::from)
                .with_context(|| format!("--payload {kind}")),
        }
    }
}

impl FormatArg {
    /// The folder options given, as `Format::configure` keys and values.
    fn options(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(p) = &self.part_name_prefix {
            out.push(("part_name_prefix", p.clone()));
        }
        if let Some(n) = self.part_name_suffix_length {
            out.push(("part_name_suffix_length", n.to_string()));
        }
        out
    }

    /// `format` configured by `payload` and the folder options.
    fn configure(
        &self,
        format: Arc<dyn Format>,
        payload: &PayloadArg,
    ) -> anyhow::Result<Arc<dyn Format>> {
        let mut format = payload.configure(format)?;
        for (key, value) in self.options() {
            format = format
                .configure(key, &value)
                .map_err(anyhow::Error::from)
                .with_context(|| format!("--{} {value}", key.replace('_', "-")))?;
        }
        Ok(format)
    }

    /// The one registered format that takes the folder options given.
    fn taking_options(&self) -> anyhow::Result<Arc<dyn Format>> {
        let options = self.options();
        let takes = |f: &Arc<dyn Format>| {
            options
                .iter()
                .all(|(key, value)| f.configure(key, value).is_ok())
        };
        let registry = grist::registry();
        let mut found = registry.formats().iter().filter(|f| takes(f));
        match (found.next(), found.next()) {
            (Some(f), None) => Ok(f.clone()),
            _ => {
                let flags: Vec<String> = options
                    .iter()
                    .map(|(key, _)| format!("--{}", key.replace('_', "-")))
                    .collect();
                anyhow::bail!(
                    "{}: no one format takes these options; pass --format",
                    flags.join(" ")
                )
            }
        }
    }

    /// The format `--format` names, configured by `payload` and the
    /// folder options; `None` without `--format` (each file's format is
    /// then told by the registry).
    pub(crate) fn named(&self, payload: &PayloadArg) -> anyhow::Result<Option<Arc<dyn Format>>> {
        self.format
            .clone()
            .map(|f| self.configure(f, payload))
            .transpose()
    }

    /// The format to hand the loader (`with_format`): the one `--format`
    /// names, or with `--payload` alone the one the registry finds for
    /// `paths`, configured; `None` when the loader can tell it alone.
    pub(crate) fn for_loader(
        &self,
        payload: &PayloadArg,
        paths: &[PathBuf],
    ) -> anyhow::Result<Option<Arc<dyn Format>>> {
        if self.format.is_none() && payload.payload.is_none() && self.options().is_empty() {
            return Ok(None);
        }
        Ok(Some(self.expand_with(payload, paths)?.0))
    }

    /// The files of `paths` (folders and glob patterns expanded) and
    /// their one format, configured by `payload`.
    pub(crate) fn expand_with(
        &self,
        payload: &PayloadArg,
        paths: &[PathBuf],
    ) -> anyhow::Result<(Arc<dyn Format>, Vec<Input>)> {
        let registry = grist::registry();
        let storage = storage()?;
        // Folder options choose a folder's files, so the format must be
        // configured before its folders are listed: the format of the
        // files as found (which refuses options it does not take), or,
        // when the files alone do not tell one (parts beside other
        // files), the one format that takes the options.
        let named = match (&self.format, self.options().is_empty()) {
            (None, false) => {
                let found = match registry.expand(&storage, &texts(paths), None) {
                    Ok((format, _)) => format,
                    Err(_) => self.taking_options()?,
                };
                Some(self.configure(found, payload)?)
            }
            _ => self.named(payload)?,
        };
        let configured = named.is_some();
        let (format, inputs) = registry
            .expand(&storage, &texts(paths), named)
            .map_err(hint)?;
        let format = match configured {
            true => format,
            false => payload.configure(format)?,
        };
        Ok((format, inputs))
    }

    /// The files of `paths` and their one format.
    pub(crate) fn expand(
        &self,
        paths: &[PathBuf],
    ) -> anyhow::Result<(Arc<dyn Format>, Vec<Input>)> {
        self.expand_with(&PayloadArg::default(), paths)
    }

    /// The files of each of `paths`, each with its format, for commands
    /// that take files one at a time: paths of different formats may
    /// mix, the files of one folder or pattern may not.
    pub(crate) fn expand_each(
        &self,
        paths: &[PathBuf],
    ) -> anyhow::Result<Vec<(Arc<dyn Format>, Input)>> {
        self.expand_each_with(&PayloadArg::default(), paths)
    }

    /// [`expand_each`](Self::expand_each), the formats configured by
    /// `payload`.
    pub(crate) fn expand_each_with(
        &self,
        payload: &PayloadArg,
        paths: &[PathBuf],
    ) -> anyhow::Result<Vec<(Arc<dyn Format>, Input)>> {
        let mut all = Vec::new();
        for path in paths {
            let (format, inputs) = self.expand_with(payload, std::slice::from_ref(path))?;
            all.extend(inputs.into_iter().map(|i| (format.clone(), i)));
        }
        Ok(all)
    }
}

/// `e`, with a hint for files the registry found of different formats:
/// one of them may hold a format its name does not say.
pub(crate) fn hint(e: RegistryError) -> anyhow::Error {
    match e {
        RegistryError::Mixed { .. } => {
            anyhow::anyhow!("{e} (or pass --format to read every file as one format)")
        }
        e => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_by_id_or_name_in_any_case() {
        for name in ["tfrecord", "TFRecord", "avro", "FFRECORD", "ofrecord"] {
            assert!(parse_format(name).is_ok(), "{name}");
        }
        let e = parse_format("parquet").unwrap_err();
        assert!(e.contains("tfrecord, avro, ffrecord, ofrecord"), "{e}");
        assert!(format_help().contains("tfrecord, avro, ffrecord, ofrecord"));
    }

    #[test]
    fn retries_come_from_the_environment() {
        let none = retry_from(|_| None).unwrap();
        assert_eq!(none, grist::io::Retry::new());
        let set = retry_from(|name| {
            Some(match name {
                "GRIST_REMOTE_ATTEMPTS" => "3".into(),
                "GRIST_REMOTE_REQUEST_TIMEOUT" => "0.5".into(),
                _ => "4".into(),
            })
        })
        .unwrap();
        assert_eq!(set.attempts(), 3);
        assert_eq!(set.request_timeout(), std::time::Duration::from_millis(500));
        assert_eq!(set.deadline(), std::time::Duration::from_secs(4));
        let bad = retry_from(|name| (name == "GRIST_REMOTE_DEADLINE").then(|| "soon".into()));
        let e = format!("{:#}", bad.unwrap_err());
        assert!(e.starts_with("GRIST_REMOTE_DEADLINE=\"soon\""), "{e}");
    }

    #[test]
    fn stdin_is_spooled_whole() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let spool = spool(&mut &data[..]).unwrap();
        assert_eq!(std::fs::read(&spool).unwrap(), data);
        let path = spool.to_path_buf();
        drop(spool);
        assert!(!path.exists(), "the spool is removed");
    }

    #[test]
    fn stdin_given_twice_is_refused() {
        let e = with_stdin(&["-".into(), "a".into(), "-".into()]).unwrap_err();
        assert!(e.to_string().contains("only once"), "{e}");
        let (paths, guard) = with_stdin(&["a".into()]).unwrap();
        assert_eq!(paths, [PathBuf::from("a")]);
        assert!(guard.is_none());
    }

    #[test]
    fn payloads_configure_the_format_or_are_refused() {
        let payload = |kind: &str| PayloadArg {
            payload: Some(kind.into()),
        };
        let ffr = FormatArg {
            format: Some(parse_format("ffrecord").unwrap()),
            part_name_prefix: None,
            part_name_suffix_length: None,
        };
        assert!(ffr.named(&payload("raw")).unwrap().is_some());
        let e = ffr.named(&payload("jpeg")).unwrap_err();
        assert!(format!("{e:#}").starts_with("--payload jpeg: "), "{e:#}");
        let tf = FormatArg {
            format: Some(parse_format("tfrecord").unwrap()),
            part_name_prefix: None,
            part_name_suffix_length: None,
        };
        assert!(tf.named(&payload("raw")).is_err());
        assert!(tf.named(&PayloadArg::default()).unwrap().is_some());
        let auto = FormatArg {
            format: None,
            part_name_prefix: None,
            part_name_suffix_length: None,
        };
        assert!(auto.named(&payload("raw")).unwrap().is_none());
        assert!(
            auto.for_loader(&PayloadArg::default(), &[])
                .unwrap()
                .is_none()
        );
    }
}
