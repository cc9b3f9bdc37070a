//! [`Registry`]: the formats a program knows, and which one a file holds.
//!
//! The loader and the CLI find formats only here: by `--format` name, by
//! file name (extensions first, then a format's usual bare name such as
//! OFRecord's `part-<digits>`), and by content (magic numbers, checksums),
//! in that order.

use std::sync::Arc;

use grist_io::{Address, Storage};

use crate::{Format, Input, NameMatch, StorageError};

/// How many bytes of a file content sniffing reads.
pub const SNIFF_BYTES: usize = 4096;

/// Why the files of some sources could not be listed or recognized.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// No sources were given.
    #[error("no input files given")]
    NoSources,
    /// A folder or glob pattern that matches no data file.
    #[error("{pattern}: no input files")]
    NoFiles {
        /// The folder or pattern.
        pattern: String,
    },
    /// A `--format` name no registered format has.
    #[error("unknown format {name:?}: known formats are {known}")]
    UnknownName {
        /// The name given.
        name: String,
        /// The registered formats' names.
        known: String,
    },
    /// A file whose format neither its name nor its content tells.
    #[error(
        "{file}: cannot tell the record format: the name has none of the extensions {extensions} \
         and is no format's usual name (part-<digits> for OFRecord), and the content is none of \
         {formats} (tried: {tried}); name the format (--format / with_format)"
    )]
    Unrecognized {
        /// The file.
        file: Arc<str>,
        /// The extensions known.
        extensions: String,
        /// The formats whose content was looked for.
        formats: String,
        /// What the content looked like to each.
        tried: String,
    },
    /// Files of different formats in one set of sources.
    #[error("{first} is {first_format} but {other} is {other_format}: read one format at a time")]
    Mixed {
        /// A file of the first format.
        first: Arc<str>,
        /// Its format.
        first_format: &'static str,
        /// A file of another format.
        other: Arc<str>,
        /// That file's format.
        other_format: &'static str,
    },
    /// A format refused a folder's files as a dataset (parts missing, ...).
    #[error(transparent)]
    Dataset(crate::BoxError),
    /// A path or URL that does not parse, or listing a folder, globbing
    /// or reading a file's first bytes failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl crate::FormatError for RegistryError {
    fn location(&self) -> Option<&crate::Location> {
        match self {
            RegistryError::Dataset(e) => e.location(),
            RegistryError::Storage(e) => e.location(),
            _ => None,
        }
    }

    fn kind(&self) -> crate::ErrorKind {
        match self {
            RegistryError::Storage(e) => e.kind(),
            RegistryError::Dataset(e) => e.kind(),
            _ => crate::ErrorKind::Argument,
        }
    }
}

/// The formats a program knows.
///
/// ```
/// use grist_tensor::Registry;
/// let registry = Registry::new();
/// assert!(registry.formats().is_empty());
/// assert!(registry.get("tfrecord").is_err());
/// ```
#[derive(Clone, Debug, Default)]
pub struct Registry {
    formats: Vec<Arc<dyn Format>>,
}

/// Whether a file in a folder is no data file: hidden files, Hadoop's and
/// Spark's `_SUCCESS`-style markers, index files and notes beside the data.
fn is_sidecar(name: &str) -> bool {
    const SIDECARS: [&str; 6] = [".idx", ".json", ".txt", ".md", ".crc", ".avsc"];
    let lower = name.to_ascii_lowercase();
    name.starts_with(['.', '_']) || SIDECARS.iter().any(|s| lower.ends_with(s))
}

/// Whether `s` holds glob metacharacters.
fn is_pattern(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

impl Registry {
    /// A registry of no formats.
    pub fn new() -> Self {
        Self::default()
    }

    /// This registry with `format` added. Formats added first are tried
    /// first when a file's content fits several.
    #[must_use]
    pub fn with_format(mut self, format: Arc<dyn Format>) -> Self {
        self.formats.push(format);
        self
    }

    /// The formats, in the order they were added.
    pub fn formats(&self) -> &[Arc<dyn Format>] {
        &self.formats
    }

    /// The format named `name` (its [`id`](Format::id) or
    /// [`name`](Format::name), in any case).
    pub fn get(&self, name: &str) -> Result<Arc<dyn Format>, RegistryError> {
        self.formats
            .iter()
            .find(|f| f.id().eq_ignore_ascii_case(name) || f.name().eq_ignore_ascii_case(name))
            .cloned()
            .ok_or_else(|| RegistryError::UnknownName {
                name: name.to_string(),
                known: self
                    .formats
                    .iter()
                    .map(|f| f.id())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// The format file name `name` says: one whose extension it has, else
    /// one whose usual bare name it is (OFRecord's `part-<digits>`).
    pub fn by_name(&self, name: &str) -> Option<Arc<dyn Format>> {
        let best = self
            .formats
            .iter()
            .map(|f| (f.name_match(name), f))
            .filter(|(m, _)| *m != NameMatch::No)
            .max_by_key(|(m, _)| *m);
        best.map(|(_, f)| f.clone())
    }

    /// The format of `input`: by its name ([`by_name`](Self::by_name)),
    /// else by its first bytes.
    pub fn detect(&self, input: &Input) -> Result<Arc<dyn Format>, RegistryError> {
        if let Some(f) = self.by_name(input.file_name()) {
            return Ok(f);
        }
        self.sniff(input)
    }

    /// The format of `input` by its content alone.
    pub fn sniff(&self, input: &Input) -> Result<Arc<dyn Format>, RegistryError> {
        let object = input.open()?;
        let size = object.size();
        let head = object
            .read_range(0..size.min(SNIFF_BYTES as u64))
            .map_err(|e| StorageError::new(input.name().clone(), e))?;
        if let Some(f) = self.formats.iter().find(|f| f.sniff(&head, size)) {
            return Ok(f.clone());
        }
        let shown: Vec<String> = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
        Err(RegistryError::Unrecognized {
            file: input.name().clone(),
            extensions: self
                .formats
                .iter()
                .flat_map(|f| f.extensions().iter().copied())
                .collect::<Vec<_>>()
                .join(" "),
            formats: self
                .formats
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(", "),
            tried: format!(
                "{size} bytes starting {}",
                if shown.is_empty() {
                    "with nothing".to_string()
                } else {
                    shown.join(" ")
                }
            ),
        })
    }

    /// The files of `sources` (paths or URLs, read through `storage`), in
    /// order, and their one format.
    ///
    /// A source is a file, a folder or object-store prefix (a dataset: its
    /// data files, not recursive, hidden files, `_SUCCESS`-style markers,
    /// `.idx`, `.json`, `.txt`, `.md`, `.crc` and `.avsc` files left out,
    /// in the format's dataset order), or a glob pattern (its matching
    /// files, sorted). A file given twice is read twice. With `format`,
    /// every file is read as that format; else each file's format is
    /// detected ([`detect`](Self::detect)) and all must agree.
    pub fn expand<S: AsRef<str>>(
        &self,
        storage: &Storage,
        sources: &[S],
        format: Option<Arc<dyn Format>>,
    ) -> Result<(Arc<dyn Format>, Vec<Input>), RegistryError> {
        if sources.is_empty() {
            return Err(RegistryError::NoSources);
        }
        let mut found: Option<(Arc<dyn Format>, Arc<str>)> = None;
        let explicit = format.clone();
        let mut agree = |input: &Input| -> Result<Arc<dyn Format>, RegistryError> {
            if let Some(f) = &explicit {
                return Ok(f.clone());
            }
            let f = self.detect(input)?;
            match &found {
                None => found = Some((f.clone(), input.name().clone())),
                Some((g, first)) if g.id() != f.id() => {
                    return Err(RegistryError::Mixed {
                        first: first.clone(),
                        first_format: g.name(),
                        other: input.name().clone(),
                        other_format: f.name(),
                    });
                }
                Some(_) => {}
            }
            Ok(f)
        };
        let mut inputs = Vec::new();
        for source in sources {
            let text = source.as_ref();
            let addr = Address::parse(text).map_err(|e| StorageError::new(text, e))?;
            let stat = |addr: &Address| {
                storage
                    .stat(addr)
                    .map_err(|e| StorageError::new(addr.name().clone(), e))
            };
            if is_pattern(text) && stat(&addr)?.is_none() {
                let matches = storage.glob(text).map_err(|e| StorageError::new(text, e))?;
                if matches.is_empty() {
                    return Err(RegistryError::NoFiles {
                        pattern: text.to_string(),
                    });
                }
                for m in matches {
                    let input = Input::new(storage, m.address);
                    agree(&input)?;
                    inputs.push(input);
                }
            } else if stat(&addr)?.is_some_and(|m| m.is_dir) {
                let files: Vec<Input> = storage
                    .list(&addr)
                    .map_err(|e| StorageError::new(text, e))?
                    .into_iter()
                    .filter(|e| !is_sidecar(e.address.file_name().unwrap_or_default()))
                    .map(|e| Input::new(storage, e.address))
                    .collect();
                let format = match &explicit {
                    Some(f) => f.clone(),
                    None => {
                        let mut of_dir = None;
                        for input in &files {
                            of_dir = Some(agree(input)?);
                        }
                        of_dir.ok_or_else(|| RegistryError::NoFiles {
                            pattern: text.to_string(),
                        })?
                    }
                };
                let files = format
                    .dataset(text, files)
                    .map_err(RegistryError::Dataset)?;
                if files.is_empty() {
                    return Err(RegistryError::NoFiles {
                        pattern: text.to_string(),
                    });
                }
                inputs.extend(files);
            } else {
                let input = Input::new(storage, addr);
                // A missing file with a telling name is reported when it
                // is opened, by its reader.
                agree(&input)?;
                inputs.push(input);
            }
        }
        let format = match (format, found) {
            (Some(f), _) => f,
            (None, Some((f, _))) => f,
            (None, None) => return Err(RegistryError::NoSources),
        };
        Ok((format, inputs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecars_are_left_out_of_folders() {
        for name in [
            "_SUCCESS",
            ".part-0.crc",
            "a.tfrecord.idx",
            "spec.json",
            "README.txt",
            "x.avsc",
        ] {
            assert!(is_sidecar(name), "{name}");
        }
        for name in ["part-00000", "a.tfrecord", "x.avro", "data.bin"] {
            assert!(!is_sidecar(name), "{name}");
        }
    }
}
