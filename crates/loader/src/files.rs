//! Sources (paths, folders, glob patterns) into an ordered list of files of
//! one format.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};

/// A record format the loader reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// TFRecord files of `tf.train.Example` (or `SequenceExample`) records;
    /// compression from the extension (`.gz`, `.zz`/`.zlib`, `.zst`).
    Tfrecord,
    /// Avro object container files (the codec is in each file's header).
    Avro,
    /// FFRecord files (samples read by number).
    Ffrecord,
    /// OFRecord part files (`part-0`, `part-00001`, ...).
    Ofrecord,
}

impl Format {
    /// The format's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Format::Tfrecord => "TFRecord",
            Format::Avro => "Avro",
            Format::Ffrecord => "FFRecord",
            Format::Ofrecord => "OFRecord",
        }
    }

    /// The format a file name says: `.avro` is Avro, `.ffr` FFRecord,
    /// `.tfrecord`/`.tfrecords`/`.tfr` (optionally followed by `.gz`,
    /// `.zz`, `.zlib`, `.zst` or `.zstd`) TFRecord, and a name starting
    /// with `part-` OFRecord. `None` for anything else.
    ///
    /// ```
    /// use grist_loader::Format;
    /// use std::path::Path;
    /// assert_eq!(Format::of_path(Path::new("a/train-0.tfrecord.gz")), Some(Format::Tfrecord));
    /// assert_eq!(Format::of_path(Path::new("data/part-00003")), Some(Format::Ofrecord));
    /// assert_eq!(Format::of_path(Path::new("notes.txt")), None);
    /// ```
    pub fn of_path(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        if name.starts_with("part-") {
            return Some(Format::Ofrecord);
        }
        let mut stem = name.as_str();
        for ext in [".gz", ".zz", ".zlib", ".zst", ".zstd"] {
            if let Some(s) = stem.strip_suffix(ext) {
                stem = s;
                break;
            }
        }
        let ext = stem.rsplit_once('.').map(|(_, e)| e)?;
        match ext {
            "avro" if stem.len() == name.len() => Some(Format::Avro),
            "ffr" if stem.len() == name.len() => Some(Format::Ffrecord),
            "tfrecord" | "tfrecords" | "tfr" => Some(Format::Tfrecord),
            _ => None,
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One input file.
#[derive(Clone, Debug)]
pub(crate) struct Input {
    pub(crate) path: PathBuf,
    /// The name used in errors (the path as given).
    pub(crate) name: Arc<str>,
}

/// Whether `s` holds glob metacharacters.
fn is_pattern(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// The files of `sources`, in order, and their one format.
///
/// A source is a file, a folder (its files whose format is the loader's,
/// not recursive; with an explicit format and no such file, every file
/// that is not hidden or an `.idx` index), or a glob pattern (its matches
/// in the pattern's order). Folders list OFRecord parts by their number
/// and other files by name. A file given twice is read twice.
pub(crate) fn expand(
    sources: &[PathBuf],
    explicit: Option<Format>,
) -> Result<(Format, Vec<Input>)> {
    if sources.is_empty() {
        return Err(Error::option("with_paths", "no sources given"));
    }
    let mut files: Vec<PathBuf> = Vec::new();
    let mut format = explicit;
    // Plain files and pattern matches first fix the format; folders are
    // listed once it is known (or tell it themselves).
    let mut listed: Vec<(usize, PathBuf)> = Vec::new();
    for source in sources {
        let text = source.to_string_lossy();
        if !source.exists() && is_pattern(&text) {
            let matches = glob::glob(&text).map_err(|e| Error::BadPattern {
                pattern: text.to_string(),
                reason: e.to_string(),
            })?;
            let before = files.len();
            for m in matches {
                let path = m.map_err(|e| {
                    let name: Arc<str> = e.path().display().to_string().into();
                    Error::io(&name, e.into())
                })?;
                if path.is_file() {
                    files.push(path);
                }
            }
            if files.len() == before {
                return Err(Error::NoFiles {
                    pattern: text.to_string(),
                });
            }
        } else if source.is_dir() {
            listed.push((files.len(), source.clone()));
        } else {
            // A missing file is reported when it is opened, by its reader.
            files.push(source.clone());
        }
    }
    for f in &files {
        match (format, Format::of_path(f)) {
            (None, Some(found)) => format = Some(found),
            (None, None) => return Err(Error::UnknownFormat { file: f.clone() }),
            (Some(_), _) => {}
        }
    }
    // Folders, inserted where they were given.
    for (at, dir) in listed.into_iter().rev() {
        let (found, mut entries) = list_dir(&dir, format)?;
        format = format.or(Some(found));
        let tail = files.split_off(at);
        files.append(&mut entries);
        files.extend(tail);
    }
    let format = format.ok_or_else(|| Error::option("with_paths", "no sources given"))?;
    if explicit.is_none() {
        if let Some(other) = files
            .iter()
            .find(|f| Format::of_path(f).is_some_and(|g| g != format))
        {
            let first = files
                .iter()
                .find(|f| Format::of_path(f) == Some(format))
                .cloned()
                .unwrap_or_default();
            return Err(Error::MixedFormats {
                first,
                first_format: format.name(),
                other_format: Format::of_path(other).map_or("?", Format::name),
                other: other.clone(),
            });
        }
    }
    let inputs = files
        .into_iter()
        .map(|path| Input {
            name: path.display().to_string().into(),
            path,
        })
        .collect();
    Ok((format, inputs))
}

/// The files of folder `dir` for `format` (or for the one format its
/// files have), sorted.
fn list_dir(dir: &Path, format: Option<Format>) -> Result<(Format, Vec<PathBuf>)> {
    let dir_name: Arc<str> = dir.display().to_string().into();
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(&dir_name, e))? {
        let entry = entry.map_err(|e| Error::io(&dir_name, e))?;
        let path = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with(['.', '_']);
        if hidden || !path.is_file() {
            continue;
        }
        all.push(path);
    }
    let format = match format {
        Some(f) => f,
        None => {
            let mut found = None;
            for p in &all {
                if let Some(f) = Format::of_path(p) {
                    match found {
                        None => found = Some((f, p.clone())),
                        Some((g, ref first)) if g != f => {
                            return Err(Error::MixedFormats {
                                first: first.clone(),
                                first_format: g.name(),
                                other: p.clone(),
                                other_format: f.name(),
                            });
                        }
                        Some(_) => {}
                    }
                }
            }
            match found {
                Some((f, _)) => f,
                None => {
                    return Err(Error::NoFiles {
                        pattern: dir.display().to_string(),
                    });
                }
            }
        }
    };
    let mut mine: Vec<PathBuf> = all
        .iter()
        .filter(|p| Format::of_path(p) == Some(format))
        .cloned()
        .collect();
    if mine.is_empty() {
        mine = all
            .into_iter()
            .filter(|p| p.extension().is_none_or(|e| e != "idx"))
            .collect();
    }
    if mine.is_empty() {
        return Err(Error::NoFiles {
            pattern: dir.display().to_string(),
        });
    }
    if format == Format::Ofrecord {
        // part-2 before part-10.
        mine.sort_by_key(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            let number = name
                .as_deref()
                .and_then(|n| n.rsplit('-').next())
                .and_then(|d| d.parse::<u64>().ok());
            (number.is_none(), number, name)
        });
    } else {
        mine.sort();
    }
    Ok((format, mine))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_by_name() {
        let cases = [
            ("x.tfrecord", Some(Format::Tfrecord)),
            ("x.tfrecords.zst", Some(Format::Tfrecord)),
            ("x.TFRecord.GZ", Some(Format::Tfrecord)),
            ("x.avro", Some(Format::Avro)),
            ("x.avro.gz", None),
            ("x.ffr", Some(Format::Ffrecord)),
            ("part-0", Some(Format::Ofrecord)),
            ("x.gz", None),
            ("x", None),
        ];
        for (name, want) in cases {
            assert_eq!(Format::of_path(Path::new(name)), want, "{name}");
        }
    }

    #[test]
    fn folders_patterns_and_mixtures() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["part-10", "part-2", "part-0", "_SUCCESS", ".hidden"] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let (format, files) = expand(&[dir.path().to_path_buf()], None).unwrap();
        assert_eq!(format, Format::Ofrecord);
        let names: Vec<_> = files
            .iter()
            .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["part-0", "part-2", "part-10"]);

        let other = tempfile::tempdir().unwrap();
        for name in ["b.tfrecord", "a.tfrecord", "a.tfrecord.idx", "c.avro"] {
            std::fs::write(other.path().join(name), b"").unwrap();
        }
        assert!(matches!(
            expand(&[other.path().to_path_buf()], None),
            Err(Error::MixedFormats { .. })
        ));
        let (format, files) =
            expand(&[other.path().to_path_buf()], Some(Format::Tfrecord)).unwrap();
        assert_eq!(format, Format::Tfrecord);
        assert_eq!(files.len(), 2);
        let pattern = other.path().join("*.tfrecord");
        let (_, files) = expand(&[pattern], None).unwrap();
        assert!(files[0].path.ends_with("a.tfrecord") && files[1].path.ends_with("b.tfrecord"));
        assert!(matches!(
            expand(&[other.path().join("*.nothing")], None),
            Err(Error::NoFiles { .. })
        ));
        assert!(matches!(
            expand(&[other.path().join("x.txt")], None),
            Err(Error::UnknownFormat { .. })
        ));
    }
}
