//! Which record format a file holds: by its extension (`.avro` is Avro,
//! anything else TFRecord), or as `--format` says.

use std::path::{Path, PathBuf};

use anyhow::bail;

/// A record format the CLI reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// TFRecord files of tf.Example / tf.SequenceExample records
    /// (compression from the extension: .gz, .zz/.zlib, .zst/.zstd).
    Tfrecord,
    /// Avro object container files (the codec is in the file's header).
    Avro,
}

impl Format {
    /// The format of `path` by its extension: `.avro` is Avro, anything
    /// else TFRecord.
    pub(crate) fn of_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(ext) if ext.eq_ignore_ascii_case("avro") => Format::Avro,
            _ => Format::Tfrecord,
        }
    }

    /// The format's name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Format::Tfrecord => "TFRecord",
            Format::Avro => "Avro",
        }
    }
}

/// The `--format` option, shared by the commands that read files.
#[derive(Clone, Copy, Debug, clap::Args)]
pub(crate) struct FormatArg {
    /// The format of the files. By default, from each file's extension:
    /// `.avro` is Avro, anything else TFRecord.
    #[arg(long, value_enum, value_name = "FORMAT")]
    format: Option<Format>,
}

impl FormatArg {
    /// The format of `file`.
    pub(crate) fn of(&self, file: &Path) -> Format {
        self.format.unwrap_or_else(|| Format::of_path(file))
    }

    /// The one format of all `files` (for reading them as one stream);
    /// files of different formats are an error.
    pub(crate) fn of_all(&self, files: &[PathBuf]) -> anyhow::Result<Format> {
        let Some(first) = files.first() else {
            return Ok(self.format.unwrap_or(Format::Tfrecord));
        };
        let format = self.of(first);
        if let Some(other) = files.iter().find(|f| self.of(f) != format) {
            bail!(
                "{} is {} but {} is {}: batches are read from files of one format \
                 (name Avro files *.avro, or pass --format)",
                first.display(),
                format.name(),
                other.display(),
                self.of(other).name()
            );
        }
        Ok(format)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_extension_or_override() {
        let auto = FormatArg { format: None };
        assert_eq!(auto.of(Path::new("a/b.avro")), Format::Avro);
        assert_eq!(auto.of(Path::new("b.AVRO")), Format::Avro);
        assert_eq!(auto.of(Path::new("b.tfrecord.gz")), Format::Tfrecord);
        assert_eq!(auto.of(Path::new("avro")), Format::Tfrecord);
        let forced = FormatArg {
            format: Some(Format::Avro),
        };
        assert_eq!(forced.of(Path::new("part-0")), Format::Avro);
        let mixed = [PathBuf::from("a.avro"), PathBuf::from("b.tfrecord")];
        assert!(auto.of_all(&mixed).is_err());
        assert_eq!(forced.of_all(&mixed).unwrap(), Format::Avro);
    }
}
