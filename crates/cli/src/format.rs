//! Which record format a file or folder holds, and the files a folder
//! stands for.
//!
//! A file's format is in its name: `.avro` is Avro, `.ffr` FFRecord,
//! `part-<digits>` an OFRecord part file, anything else TFRecord. A folder
//! is a dataset: one of `*.ffr` files (FFRecord, files in plain string
//! order) or of `part-<n>` files (OFRecord, parts in numeric order).
//! `--format` overrides the names.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

/// A record format the CLI reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// TFRecord files of tf.Example / tf.SequenceExample records
    /// (compression from the extension: .gz, .zz/.zlib, .zst/.zstd).
    Tfrecord,
    /// Avro object container files (the codec is in the file's header).
    Avro,
    /// FFRecord files (`.ffr`) or folders of them: samples numbered across
    /// the files.
    Ffrecord,
    /// OFRecord part files (`part-0`, `part-00000`, ...) or folders of
    /// them: records numbered across the parts.
    Ofrecord,
}

impl Format {
    /// The format of file `path` by its name: `.avro` is Avro, `.ffr`
    /// FFRecord, `part-<digits>` OFRecord, anything else TFRecord.
    pub(crate) fn of_path(path: &Path) -> Format {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        match path.extension().and_then(|e| e.to_str()) {
            Some(ext) if ext.eq_ignore_ascii_case("avro") => Format::Avro,
            Some(ext) if ext.eq_ignore_ascii_case("ffr") => Format::Ffrecord,
            _ if is_part_name(name) => Format::Ofrecord,
            _ => Format::Tfrecord,
        }
    }

    /// The format's name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Format::Tfrecord => "TFRecord",
            Format::Avro => "Avro",
            Format::Ffrecord => "FFRecord",
            Format::Ofrecord => "OFRecord",
        }
    }

    /// Whether the files of this format make one dataset whose records are
    /// numbered across files (FFRecord samples, OFRecord records).
    pub(crate) fn is_dataset(self) -> bool {
        matches!(self, Format::Ffrecord | Format::Ofrecord)
    }
}

impl From<Format> for grist_loader::Format {
    fn from(f: Format) -> Self {
        match f {
            Format::Tfrecord => grist_loader::Format::Tfrecord,
            Format::Avro => grist_loader::Format::Avro,
            Format::Ffrecord => grist_loader::Format::Ffrecord,
            Format::Ofrecord => grist_loader::Format::Ofrecord,
        }
    }
}

/// Whether `name` is an OFRecord part name: `part-` and digits.
fn is_part_name(name: &str) -> bool {
    name.strip_prefix("part-")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// The format of the dataset in folder `dir`, by its files: `*.ffr` files
/// make an FFRecord dataset, `part-<n>` files an OFRecord one.
fn of_folder(dir: &Path) -> anyhow::Result<Format> {
    let (mut ffr, mut parts) = (false, false);
    for entry in std::fs::read_dir(dir).with_context(|| format!("{}", dir.display()))? {
        let entry = entry.with_context(|| format!("{}", dir.display()))?;
        if !entry.path().is_file() {
            continue;
        }
        match Format::of_path(&entry.path()) {
            Format::Ffrecord => ffr = true,
            Format::Ofrecord => parts = true,
            _ => {}
        }
    }
    match (ffr, parts) {
        (true, false) => Ok(Format::Ffrecord),
        (false, true) => Ok(Format::Ofrecord),
        (true, true) => bail!(
            "{}: holds both *.ffr files (FFRecord) and part-<n> files (OFRecord): pass --format",
            dir.display()
        ),
        (false, false) => bail!(
            "{}: a folder is read as a dataset of *.ffr files (FFRecord) or part-<n> files \
             (OFRecord), and this one has neither",
            dir.display()
        ),
    }
}

/// The data files of the `format` dataset in folder `dir`, in dataset
/// order: FFRecord's `*.ffr` files sorted as plain strings (as HFAiLab's
/// reader sorts them), OFRecord's parts `part-0`.. (padded or not) in
/// numeric order, all of them present.
fn folder_files(dir: &Path, format: Format) -> anyhow::Result<Vec<PathBuf>> {
    Ok(match format {
        Format::Ffrecord => grist_ffrecord::dataset_files(dir)?,
        Format::Ofrecord => grist_ofrecord::Dataset::discover(dir, "part-")?
            .parts()
            .iter()
            .map(|p| p.path.clone())
            .collect(),
        Format::Tfrecord | Format::Avro => bail!(
            "{}: a folder is read as an FFRecord or OFRecord dataset, not as {} files: \
             name the files",
            dir.display(),
            format.name()
        ),
    })
}

/// One input file and its format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Input {
    /// The file.
    pub(crate) path: PathBuf,
    /// Its format.
    pub(crate) format: Format,
}

/// The `--format` option, shared by the commands that read files.
#[derive(Clone, Copy, Debug, clap::Args)]
pub(crate) struct FormatArg {
    /// The format of the files. By default, from each file's name: .avro
    /// is Avro, .ffr FFRecord, part-<n> OFRecord, anything else TFRecord;
    /// a folder is an FFRecord (*.ffr files) or OFRecord (part-<n> files)
    /// dataset.
    #[arg(long, value_enum, value_name = "FORMAT")]
    format: Option<Format>,
}

impl FormatArg {
    /// The format of file `file`.
    pub(crate) fn of(&self, file: &Path) -> Format {
        self.format.unwrap_or_else(|| Format::of_path(file))
    }

    /// Every file of `paths`, with its format, folders replaced by their
    /// dataset's files.
    pub(crate) fn expand(&self, paths: &[PathBuf]) -> anyhow::Result<Vec<Input>> {
        let mut out = Vec::new();
        for path in paths {
            if path.is_dir() {
                let format = match self.format {
                    Some(f) => f,
                    None => of_folder(path)?,
                };
                out.extend(
                    folder_files(path, format)?
                        .into_iter()
                        .map(|path| Input { path, format }),
                );
            } else {
                out.push(Input {
                    path: path.clone(),
                    format: self.of(path),
                });
            }
        }
        Ok(out)
    }

    /// The files of `paths` (folders expanded) and their one format, for
    /// reading them as one stream or dataset; files of different formats
    /// are an error.
    pub(crate) fn of_all(&self, paths: &[PathBuf]) -> anyhow::Result<(Format, Vec<PathBuf>)> {
        self.one_format(self.expand(paths)?)
    }

    /// The files of `inputs` and their one format (see
    /// [`of_all`](Self::of_all)).
    pub(crate) fn one_format(&self, inputs: Vec<Input>) -> anyhow::Result<(Format, Vec<PathBuf>)> {
        let Some(first) = inputs.first() else {
            return Ok((self.format.unwrap_or(Format::Tfrecord), Vec::new()));
        };
        if let Some(other) = inputs.iter().find(|i| i.format != first.format) {
            bail!(
                "{} is {} but {} is {}: records are read from files of one format \
                 (name Avro files *.avro, FFRecord files *.ffr, OFRecord parts part-<n>; \
                 or pass --format)",
                first.path.display(),
                first.format.name(),
                other.path.display(),
                other.format.name()
            );
        }
        let format = first.format;
        Ok((format, inputs.into_iter().map(|i| i.path).collect()))
    }
}

/// What the samples of FFRecord files hold (the format stores opaque
/// bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Payload {
    /// Serialized tf.Example (or, with context/sequence features,
    /// tf.SequenceExample) records: what HFAiLab's tools and `grist gen`
    /// write. The default.
    #[default]
    Example,
    /// Serialized OneFlow OFRecords.
    Ofrecord,
    /// The raw little-endian bytes of one tensor (numpy's `tobytes()`),
    /// decoded by a spec of exactly one dense feature of known shape (a
    /// `string` feature of shape [] takes the whole sample).
    Raw,
}

/// The `--payload` option of the commands that decode FFRecord samples.
#[derive(Clone, Copy, Debug, clap::Args)]
pub(crate) struct PayloadArg {
    /// What FFRecord samples hold: example (serialized tf.Example), ofrecord
    /// (serialized OFRecord) or raw (one tensor's little-endian bytes). By
    /// default, example.
    #[arg(long, value_enum, value_name = "KIND")]
    payload: Option<Payload>,
}

impl From<Payload> for grist_loader::FfrPayload {
    fn from(p: Payload) -> Self {
        match p {
            Payload::Example => grist_loader::FfrPayload::Example,
            Payload::Ofrecord => grist_loader::FfrPayload::OfRecord,
            Payload::Raw => grist_loader::FfrPayload::Raw,
        }
    }
}

impl PayloadArg {
    /// The payload kind asked for (by default, example), whatever the
    /// format.
    pub(crate) fn kind(&self) -> Payload {
        self.payload.unwrap_or_default()
    }

    /// The payload kind for files of `format`; `--payload` with files of
    /// another format than FFRecord is an error.
    pub(crate) fn of(&self, format: Format) -> anyhow::Result<Payload> {
        match (self.payload, format) {
            (Some(p), Format::Ffrecord) => Ok(p),
            (None, _) => Ok(Payload::default()),
            (Some(_), other) => bail!(
                "--payload says what FFRecord samples hold; {} records have one form",
                other.name()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_name_or_override() {
        let auto = FormatArg { format: None };
        assert_eq!(auto.of(Path::new("a/b.avro")), Format::Avro);
        assert_eq!(auto.of(Path::new("b.AVRO")), Format::Avro);
        assert_eq!(auto.of(Path::new("b.tfrecord.gz")), Format::Tfrecord);
        assert_eq!(auto.of(Path::new("avro")), Format::Tfrecord);
        assert_eq!(auto.of(Path::new("d/PART_00001.ffr")), Format::Ffrecord);
        assert_eq!(auto.of(Path::new("d/part-00003")), Format::Ofrecord);
        assert_eq!(auto.of(Path::new("part-7")), Format::Ofrecord);
        // Spark's TFRecord parts and names that only start like parts.
        assert_eq!(auto.of(Path::new("part-r-00000")), Format::Tfrecord);
        assert_eq!(auto.of(Path::new("part-")), Format::Tfrecord);
        assert_eq!(auto.of(Path::new("part-1.tfrecord")), Format::Tfrecord);
        let forced = FormatArg {
            format: Some(Format::Avro),
        };
        assert_eq!(forced.of(Path::new("part-0")), Format::Avro);
        let mixed = [PathBuf::from("a.avro"), PathBuf::from("b.tfrecord")];
        assert!(auto.of_all(&mixed).is_err());
        assert_eq!(forced.of_all(&mixed).unwrap().0, Format::Avro);
    }

    #[test]
    fn folders_are_datasets() {
        let dir = tempfile::tempdir().unwrap();
        let touch = |d: &Path, name: &str| std::fs::write(d.join(name), b"").unwrap();

        let parts = dir.path().join("of");
        std::fs::create_dir(&parts).unwrap();
        for name in ["part-10", "part-2", "part-0", "_SUCCESS"] {
            touch(&parts, name);
        }
        for i in [1, 3, 4, 5, 6, 7, 8, 9] {
            touch(&parts, &format!("part-{i}"));
        }
        let auto = FormatArg { format: None };
        let (format, files) = auto.of_all(std::slice::from_ref(&parts)).unwrap();
        assert_eq!(format, Format::Ofrecord);
        let names: Vec<_> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_str().unwrap().to_string())
            .collect();
        assert_eq!(names[..3], ["part-0", "part-1", "part-2"]);
        assert_eq!(names.last().unwrap(), "part-10");

        let ffr = dir.path().join("ff");
        std::fs::create_dir(&ffr).unwrap();
        for name in ["a_2.ffr", "a_10.ffr", "README.txt"] {
            touch(&ffr, name);
        }
        let (format, files) = auto.of_all(std::slice::from_ref(&ffr)).unwrap();
        assert_eq!(format, Format::Ffrecord);
        // Plain string order, as the original sorts them.
        assert!(files[0].ends_with("a_10.ffr") && files[1].ends_with("a_2.ffr"));
        assert_eq!(files.len(), 2);

        // A folder and a file of different formats do not mix; a folder
        // with neither kind of file, or both, is an error.
        let file = dir.path().join("x.tfrecord");
        touch(dir.path(), "x.tfrecord");
        assert!(auto.of_all(&[ffr.clone(), file]).is_err());
        touch(&ffr, "part-0");
        assert!(auto.expand(std::slice::from_ref(&ffr)).is_err());
        let forced = FormatArg {
            format: Some(Format::Ffrecord),
        };
        assert_eq!(forced.expand(std::slice::from_ref(&ffr)).unwrap().len(), 2);
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert!(auto.expand(&[empty]).is_err());
        let tf = FormatArg {
            format: Some(Format::Tfrecord),
        };
        assert!(tf.expand(&[parts]).is_err());
    }
}
