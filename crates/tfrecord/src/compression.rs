//! The compression of a TFRecord stream: none, GZIP, ZLIB (TensorFlow's
//! `compression_type`) or ZSTD, and the streams that inflate and deflate it.

use std::fmt;
use std::io::{self, Read, Write};
use std::path::Path;

use crate::error::{Error, Result};

/// How a TFRecord stream is compressed. The whole stream (frames included)
/// is compressed, as TensorFlow's `TFRecordOptions(compression_type=...)`
/// does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Compression {
    /// Plain frames (`compression_type=''`).
    #[default]
    None,
    /// GZIP (`compression_type='GZIP'`); multi-member streams are read as
    /// one, as TensorFlow does. Cargo feature `gzip`.
    Gzip,
    /// ZLIB (`compression_type='ZLIB'`). Cargo feature `zlib`.
    Zlib,
    /// Zstandard: not a TensorFlow codec. Cargo feature `zstd`.
    Zstd,
}

impl Compression {
    /// The compression a file name implies: `.gz` is GZIP, `.zz` and
    /// `.zlib` are ZLIB, `.zst` and `.zstd` are ZSTD (case-insensitive),
    /// anything else is uncompressed.
    pub fn from_path(path: &Path) -> Compression {
        let Some(ext) = path.extension().and_then(|e| e.to_str()) else {
            return Compression::None;
        };
        match ext.to_ascii_lowercase().as_str() {
            "gz" => Compression::Gzip,
            "zz" | "zlib" => Compression::Zlib,
            "zst" | "zstd" => Compression::Zstd,
            _ => Compression::None,
        }
    }

    /// Parses TensorFlow's `compression_type` spelling (`""`, `"NONE"`,
    /// `"GZIP"`, `"ZLIB"`, and `"ZSTD"`), case-insensitively.
    pub fn from_name(name: &str) -> Option<Compression> {
        match name.to_ascii_uppercase().as_str() {
            "" | "NONE" => Some(Compression::None),
            "GZIP" => Some(Compression::Gzip),
            "ZLIB" => Some(Compression::Zlib),
            "ZSTD" => Some(Compression::Zstd),
            _ => None,
        }
    }

    /// The name in TensorFlow's spelling: `"NONE"`, `"GZIP"`, `"ZLIB"`,
    /// `"ZSTD"`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "NONE",
            Compression::Gzip => "GZIP",
            Compression::Zlib => "ZLIB",
            Compression::Zstd => "ZSTD",
        }
    }

    /// True unless the codec's Cargo feature is off in this build.
    pub fn is_enabled(self) -> bool {
        self.check_enabled().is_ok()
    }

    /// The Cargo feature that provides this codec, if it needs one.
    fn feature(self) -> Option<&'static str> {
        match self {
            Compression::None => None,
            Compression::Gzip => Some("gzip"),
            Compression::Zlib => Some("zlib"),
            Compression::Zstd => Some("zstd"),
        }
    }

    fn check_enabled(self) -> Result<()> {
        let enabled = match self {
            Compression::None => true,
            Compression::Gzip => cfg!(feature = "gzip"),
            Compression::Zlib => cfg!(feature = "zlib"),
            Compression::Zstd => cfg!(feature = "zstd"),
        };
        match (enabled, self.feature()) {
            (false, Some(feature)) => Err(Error::CompressionDisabled {
                compression: self.name(),
                feature,
            }),
            _ => Ok(()),
        }
    }

    /// Wraps `inner` in a reader that inflates this compression.
    ///
    /// Fails with [`Error::CompressionDisabled`] when the codec is not built
    /// in; inflating errors surface from `read` as `io::Error`s of kind
    /// `InvalidInput`, `InvalidData` or `UnexpectedEof` (a cut stream).
    pub fn reader<R: Read>(self, inner: R) -> Result<CompressedReader<R>> {
        self.check_enabled()?;
        let imp = match self {
            #[cfg(feature = "gzip")]
            Compression::Gzip => ReaderImpl::Gzip(flate2::read::MultiGzDecoder::new(inner)),
            #[cfg(feature = "zlib")]
            Compression::Zlib => ReaderImpl::Zlib(flate2::read::ZlibDecoder::new(inner)),
            #[cfg(feature = "zstd")]
            Compression::Zstd => {
                ReaderImpl::Zstd(zstd::stream::read::Decoder::new(inner).map_err(|source| {
                    Error::Io {
                        file: "".into(),
                        source,
                    }
                })?)
            }
            _ => ReaderImpl::Plain(inner),
        };
        Ok(CompressedReader { imp })
    }

    /// Wraps `inner` in a writer that deflates into this compression, at
    /// the codec's default level (TensorFlow's too, for GZIP and ZLIB).
    ///
    /// Fails with [`Error::CompressionDisabled`] when the codec is not built
    /// in. Call [`CompressedWriter::finish`] to end the stream.
    pub fn writer<W: Write>(self, inner: W) -> Result<CompressedWriter<W>> {
        self.check_enabled()?;
        let imp = match self {
            #[cfg(feature = "gzip")]
            Compression::Gzip => WriterImpl::Gzip(flate2::write::GzEncoder::new(
                inner,
                flate2::Compression::default(),
            )),
            #[cfg(feature = "zlib")]
            Compression::Zlib => WriterImpl::Zlib(flate2::write::ZlibEncoder::new(
                inner,
                flate2::Compression::default(),
            )),
            #[cfg(feature = "zstd")]
            Compression::Zstd => WriterImpl::Zstd(
                zstd::stream::write::Encoder::new(inner, 0).map_err(|source| Error::Io {
                    file: "".into(),
                    source,
                })?,
            ),
            _ => WriterImpl::Plain(inner),
        };
        Ok(CompressedWriter { imp })
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A reader that inflates a compressed stream (or passes a plain one
/// through), made by [`Compression::reader`].
pub struct CompressedReader<R: Read> {
    imp: ReaderImpl<R>,
}

enum ReaderImpl<R: Read> {
    Plain(R),
    #[cfg(feature = "gzip")]
    Gzip(flate2::read::MultiGzDecoder<R>),
    #[cfg(feature = "zlib")]
    Zlib(flate2::read::ZlibDecoder<R>),
    #[cfg(feature = "zstd")]
    Zstd(zstd::stream::read::Decoder<'static, io::BufReader<R>>),
}

impl<R: Read> CompressedReader<R> {
    /// The underlying (compressed) reader.
    pub fn get_ref(&self) -> &R {
        match &self.imp {
            ReaderImpl::Plain(r) => r,
            #[cfg(feature = "gzip")]
            ReaderImpl::Gzip(r) => r.get_ref(),
            #[cfg(feature = "zlib")]
            ReaderImpl::Zlib(r) => r.get_ref(),
            #[cfg(feature = "zstd")]
            ReaderImpl::Zstd(r) => r.get_ref().get_ref(),
        }
    }

    /// The compression this reader inflates.
    pub fn compression(&self) -> Compression {
        match &self.imp {
            ReaderImpl::Plain(_) => Compression::None,
            #[cfg(feature = "gzip")]
            ReaderImpl::Gzip(_) => Compression::Gzip,
            #[cfg(feature = "zlib")]
            ReaderImpl::Zlib(_) => Compression::Zlib,
            #[cfg(feature = "zstd")]
            ReaderImpl::Zstd(_) => Compression::Zstd,
        }
    }
}

impl<R: Read> Read for CompressedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.imp {
            ReaderImpl::Plain(r) => r.read(buf),
            #[cfg(feature = "gzip")]
            ReaderImpl::Gzip(r) => r.read(buf),
            #[cfg(feature = "zlib")]
            ReaderImpl::Zlib(r) => r.read(buf),
            #[cfg(feature = "zstd")]
            ReaderImpl::Zstd(r) => r.read(buf),
        }
    }
}

impl<R: Read> fmt::Debug for CompressedReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompressedReader")
            .field("compression", &self.compression())
            .finish_non_exhaustive()
    }
}

/// A writer that deflates into a compressed stream (or passes plain bytes
/// through), made by [`Compression::writer`].
pub struct CompressedWriter<W: Write> {
    imp: WriterImpl<W>,
}

enum WriterImpl<W: Write> {
    Plain(W),
    #[cfg(feature = "gzip")]
    Gzip(flate2::write::GzEncoder<W>),
    #[cfg(feature = "zlib")]
    Zlib(flate2::write::ZlibEncoder<W>),
    #[cfg(feature = "zstd")]
    Zstd(zstd::stream::write::Encoder<'static, W>),
}

impl<W: Write> CompressedWriter<W> {
    /// A writer that passes bytes through.
    pub(crate) fn plain(inner: W) -> Self {
        CompressedWriter {
            imp: WriterImpl::Plain(inner),
        }
    }

    /// The compression this writer produces.
    pub fn compression(&self) -> Compression {
        match &self.imp {
            WriterImpl::Plain(_) => Compression::None,
            #[cfg(feature = "gzip")]
            WriterImpl::Gzip(_) => Compression::Gzip,
            #[cfg(feature = "zlib")]
            WriterImpl::Zlib(_) => Compression::Zlib,
            #[cfg(feature = "zstd")]
            WriterImpl::Zstd(_) => Compression::Zstd,
        }
    }

    /// Ends the compressed stream (writing its trailer), flushes it and
    /// returns the inner writer.
    // With every codec feature off only `Plain` is left.
    #[allow(clippy::infallible_destructuring_match)]
    pub fn finish(self) -> io::Result<W> {
        let mut inner = match self.imp {
            WriterImpl::Plain(w) => w,
            #[cfg(feature = "gzip")]
            WriterImpl::Gzip(w) => w.finish()?,
            #[cfg(feature = "zlib")]
            WriterImpl::Zlib(w) => w.finish()?,
            #[cfg(feature = "zstd")]
            WriterImpl::Zstd(w) => w.finish()?,
        };
        inner.flush()?;
        Ok(inner)
    }
}

impl<W: Write> Write for CompressedWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.imp {
            WriterImpl::Plain(w) => w.write(buf),
            #[cfg(feature = "gzip")]
            WriterImpl::Gzip(w) => w.write(buf),
            #[cfg(feature = "zlib")]
            WriterImpl::Zlib(w) => w.write(buf),
            #[cfg(feature = "zstd")]
            WriterImpl::Zstd(w) => w.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match &mut self.imp {
            WriterImpl::Plain(w) => w.write_all(buf),
            #[cfg(feature = "gzip")]
            WriterImpl::Gzip(w) => w.write_all(buf),
            #[cfg(feature = "zlib")]
            WriterImpl::Zlib(w) => w.write_all(buf),
            #[cfg(feature = "zstd")]
            WriterImpl::Zstd(w) => w.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.imp {
            WriterImpl::Plain(w) => w.flush(),
            #[cfg(feature = "gzip")]
            WriterImpl::Gzip(w) => w.flush(),
            #[cfg(feature = "zlib")]
            WriterImpl::Zlib(w) => w.flush(),
            #[cfg(feature = "zstd")]
            WriterImpl::Zstd(w) => w.flush(),
        }
    }
}

impl<W: Write> fmt::Debug for CompressedWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompressedWriter")
            .field("compression", &self.compression())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions() {
        let c = |p: &str| Compression::from_path(Path::new(p));
        assert_eq!(c("a.tfrecord"), Compression::None);
        assert_eq!(c("a.tfrecord.gz"), Compression::Gzip);
        assert_eq!(c("a.GZ"), Compression::Gzip);
        assert_eq!(c("a.zz"), Compression::Zlib);
        assert_eq!(c("a.zlib"), Compression::Zlib);
        assert_eq!(c("a.zst"), Compression::Zstd);
        assert_eq!(c("a.zstd"), Compression::Zstd);
        assert_eq!(c("gz"), Compression::None);
        assert_eq!(c("dir.gz/file"), Compression::None);
    }

    #[test]
    fn names() {
        for c in [
            Compression::None,
            Compression::Gzip,
            Compression::Zlib,
            Compression::Zstd,
        ] {
            assert_eq!(Compression::from_name(c.name()), Some(c));
        }
        assert_eq!(Compression::from_name(""), Some(Compression::None));
        assert_eq!(Compression::from_name("lz4"), None);
    }

    #[test]
    fn disabled_codec_is_an_error() {
        if !cfg!(feature = "zstd") {
            assert!(matches!(
                Compression::Zstd.reader(&b""[..]),
                Err(Error::CompressionDisabled {
                    feature: "zstd",
                    ..
                })
            ));
        }
    }
}
