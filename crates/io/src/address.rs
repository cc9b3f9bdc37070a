//! Paths and URLs as the user gave them.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use url::Url;

use crate::{Error, Result};

/// A path or URL as the user gave it, parsed.
///
/// Plain paths and `file://` URLs are local. `s3://bucket/key` (and
/// `s3a://`), `gs://bucket/key`, `az://container/key` (and `adl://`,
/// `azure://`, `abfs://`, `abfss://`), Azure blob and S3 `https://` URLs,
/// and any other `http(s)://` URL are remote. Parsing never touches the
/// network, and works whether or not this build has the `remote` feature.
///
/// The address displays as the text given, so every error names the file
/// the way the user wrote it.
///
/// ```
/// use grist_io::Address;
///
/// let a = Address::parse("s3://bucket/data/train-0.tfrecord")?;
/// assert!(a.is_remote());
/// assert_eq!(a.file_name(), Some("train-0.tfrecord"));
/// assert_eq!(a.with_file_name("train-0.tfrecord.idx").as_str(), "s3://bucket/data/train-0.tfrecord.idx");
/// assert_eq!(Address::parse("s3://bucket/data")?.join("x").as_str(), "s3://bucket/data/x");
///
/// let local = Address::parse("data/train.avro")?;
/// assert_eq!(local.local_path(), Some(std::path::Path::new("data/train.avro")));
/// # Ok::<(), grist_io::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Address {
    text: Arc<str>,
    kind: Kind,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Local(PathBuf),
    Remote(Remote),
}

/// A remote URL split into the store it lives in and the key within it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Remote {
    /// The URL as parsed.
    pub(crate) url: Url,
    /// What identifies the store: `s3://bucket`, `https://host:port`, …
    /// Objects with the same store share one client.
    pub(crate) store: String,
    /// The URL of the store's root, given to object_store's builders.
    pub(crate) store_url: String,
    /// The key within the store, percent-decoded, without a leading `/`.
    pub(crate) key: String,
}

const REMOTE_SCHEMES: &[&str] = &[
    "s3", "s3a", "gs", "az", "adl", "azure", "abfs", "abfss", "http", "https",
];

impl Address {
    /// Parses a path or URL. Never touches the network.
    pub fn parse(text: &str) -> Result<Address> {
        if text.is_empty() {
            return Err(bad(text, "it is empty"));
        }
        let Some((scheme, _)) = text.split_once("://") else {
            return Ok(Address::local(text, PathBuf::from(text)));
        };
        let scheme_lower = scheme.to_ascii_lowercase();
        if scheme_lower == "file" {
            let url = Url::parse(text).map_err(|e| bad(text, &e.to_string()))?;
            let path = url
                .to_file_path()
                .map_err(|()| bad(text, "it is not a local file URL"))?;
            return Ok(Address::local(text, path));
        }
        if !REMOTE_SCHEMES.contains(&scheme_lower.as_str()) {
            return Err(bad(
                text,
                &format!(
                    "unknown scheme {scheme:?} (expected a path, file://, s3://, gs://, az://, http(s)://)"
                ),
            ));
        }
        let url = Url::parse(text).map_err(|e| bad(text, &e.to_string()))?;
        let remote = Remote::new(url).map_err(|reason| bad(text, reason))?;
        Ok(Address {
            text: text.into(),
            kind: Kind::Remote(remote),
        })
    }

    fn local(text: &str, path: PathBuf) -> Address {
        Address {
            text: text.into(),
            kind: Kind::Local(path),
        }
    }

    /// The text as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The text as given, shared: cheap to clone into errors.
    pub fn name(&self) -> &Arc<str> {
        &self.text
    }

    /// The local path, for a plain path or a `file://` URL.
    pub fn local_path(&self) -> Option<&Path> {
        match &self.kind {
            Kind::Local(p) => Some(p),
            Kind::Remote(_) => None,
        }
    }

    /// True for object store and HTTP URLs.
    pub fn is_remote(&self) -> bool {
        matches!(self.kind, Kind::Remote(_))
    }

    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(crate) fn remote(&self) -> Option<&Remote> {
        match &self.kind {
            Kind::Remote(r) => Some(r),
            Kind::Local(_) => None,
        }
    }

    /// The last segment: a file's name (`None` for a folder ending in `/`,
    /// a bucket's root, or a path such as `..`).
    pub fn file_name(&self) -> Option<&str> {
        match &self.kind {
            Kind::Local(p) => p.file_name().and_then(|n| n.to_str()),
            Kind::Remote(r) => match r.key.rsplit('/').next() {
                Some("") | None => None,
                Some(name) => Some(name),
            },
        }
    }

    /// The child `name` of this folder or prefix.
    #[must_use]
    pub fn join(&self, name: &str) -> Address {
        match &self.kind {
            Kind::Local(p) => {
                let path = p.join(name);
                let text = join_text(&self.text, name, std::path::MAIN_SEPARATOR);
                Address::local(&text, path)
            }
            Kind::Remote(r) => {
                let key = if r.key.is_empty() || r.key.ends_with('/') {
                    format!("{}{name}", r.key)
                } else {
                    format!("{}/{name}", r.key)
                };
                self.with_key(join_text(&self.text, name, '/'), key)
            }
        }
    }

    /// The sibling `name` of this file (`x.tfrecord` → `x.tfrecord.idx`).
    #[must_use]
    pub fn with_file_name(&self, name: &str) -> Address {
        match &self.kind {
            Kind::Local(p) => {
                let path = p.with_file_name(name);
                let text = match self.text.rfind(['/', std::path::MAIN_SEPARATOR]) {
                    Some(i) => format!("{}{name}", &self.text[..=i]),
                    None => name.to_string(),
                };
                Address::local(&text, path)
            }
            Kind::Remote(r) => {
                let key = match r.key.rfind('/') {
                    Some(i) => format!("{}{name}", &r.key[..=i]),
                    None => name.to_string(),
                };
                // The text as given ends with the key's last segment, maybe
                // percent-encoded: replace what follows its last `/`.
                let base = self.text.split(['?', '#']).next().unwrap_or(&self.text);
                let text = match base.rfind('/') {
                    Some(i) if i + 1 > base.find("://").map_or(0, |s| s + 3) => {
                        format!("{}{name}", &base[..=i])
                    }
                    _ => format!("{base}/{name}"),
                };
                self.with_key(text, key)
            }
        }
    }

    fn with_key(&self, text: String, key: String) -> Address {
        let Kind::Remote(r) = &self.kind else {
            return Address::local(&text, PathBuf::from(&text));
        };
        // Reparsing keeps the URL in step with the text; should the new
        // text not parse (a name with characters a URL cannot hold), the
        // key still says exactly which object is meant.
        let url = Url::parse(&text).unwrap_or_else(|_| r.url.clone());
        Address {
            text: text.into(),
            kind: Kind::Remote(Remote {
                url,
                store: r.store.clone(),
                store_url: r.store_url.clone(),
                key,
            }),
        }
    }
}

fn join_text(base: &str, name: &str, sep: char) -> String {
    if base.ends_with('/') || base.ends_with(sep) {
        format!("{base}{name}")
    } else {
        format!("{base}{sep}{name}")
    }
}

fn bad(text: &str, reason: &str) -> Error {
    Error::BadAddress {
        text: text.to_string(),
        reason: reason.to_string(),
    }
}

impl Remote {
    fn new(url: Url) -> std::result::Result<Remote, &'static str> {
        let scheme = url.scheme().to_string();
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or("it names no bucket, container or host")?
            .to_string();
        let authority = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.clone(),
        };
        let path = percent_decode(url.path().trim_start_matches('/'))?;
        let is_https = scheme == "https";
        let azure_host = [
            "dfs.core.windows.net",
            "blob.core.windows.net",
            "dfs.fabric.microsoft.com",
            "blob.fabric.microsoft.com",
        ]
        .iter()
        .any(|h| host.ends_with(h));
        let s3_path_style = host.ends_with("amazonaws.com") && host.starts_with("s3")
            || host.ends_with("r2.cloudflarestorage.com");
        let (store, store_url, key) = if is_https && (azure_host || s3_path_style) {
            // The first path segment is the container or bucket.
            let (bucket, key) = path.split_once('/').unwrap_or((&path, ""));
            if bucket.is_empty() {
                return Err("it names no bucket or container");
            }
            let root = format!("https://{authority}/{bucket}");
            (root.clone(), root, key.to_string())
        } else if scheme == "http" || scheme == "https" {
            let root = format!("{scheme}://{authority}");
            (root.clone(), root, path)
        } else {
            // `az://container@account.host/...` keeps its user part.
            let user = url.username();
            let auth = if user.is_empty() {
                authority
            } else {
                format!("{user}@{authority}")
            };
            let root = format!("{scheme}://{auth}");
            (root.clone(), root, path)
        };
        Ok(Remote {
            url,
            store,
            store_url,
            key,
        })
    }
}

fn percent_decode(s: &str) -> std::result::Result<String, &'static str> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex =
                std::str::from_utf8(&bytes[i + 1..i + 3]).map_err(|_| "bad percent-escape")?;
            let b = u8::from_str_radix(hex, 16).map_err(|_| "bad percent-escape")?;
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "the key is not UTF-8 once percent-decoded")
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Address").field(&&*self.text).finish()
    }
}

impl From<&Path> for Address {
    fn from(path: &Path) -> Address {
        Address::local(&path.to_string_lossy(), path.to_path_buf())
    }
}

impl From<PathBuf> for Address {
    fn from(path: PathBuf) -> Address {
        let text = path.to_string_lossy().into_owned();
        Address::local(&text, path)
    }
}

impl std::str::FromStr for Address {
    type Err = Error;

    fn from_str(s: &str) -> Result<Address> {
        Address::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_paths_and_urls() {
        let a = Address::parse("/tmp/x.tfrecord").unwrap();
        assert_eq!(a.local_path(), Some(Path::new("/tmp/x.tfrecord")));
        let f = Address::parse("file:///tmp/a%20b").unwrap();
        assert_eq!(f.local_path(), Some(Path::new("/tmp/a b")));
        assert_eq!(f.as_str(), "file:///tmp/a%20b");

        let s = Address::parse("s3://bucket/dir/a%20b.avro").unwrap();
        let r = s.remote().unwrap();
        assert_eq!(
            (r.store.as_str(), r.key.as_str()),
            ("s3://bucket", "dir/a b.avro")
        );
        assert_eq!(s.file_name(), Some("a b.avro"));

        let az = Address::parse("https://acct.blob.core.windows.net/cont/k/v").unwrap();
        let r = az.remote().unwrap();
        assert_eq!(r.store, "https://acct.blob.core.windows.net/cont");
        assert_eq!(r.key, "k/v");

        let h = Address::parse("http://127.0.0.1:9000/files/x").unwrap();
        assert_eq!(h.remote().unwrap().store, "http://127.0.0.1:9000");
        assert_eq!(h.remote().unwrap().key, "files/x");

        assert!(matches!(Address::parse(""), Err(Error::BadAddress { .. })));
        assert!(matches!(
            Address::parse("ftp://x/y"),
            Err(Error::BadAddress { .. })
        ));
        assert!(matches!(
            Address::parse("s3:///key"),
            Err(Error::BadAddress { .. })
        ));
    }

    #[test]
    fn joins_and_siblings() {
        let d = Address::parse("s3://b/data/").unwrap();
        let c = d.join("x.tfrecord");
        assert_eq!(c.as_str(), "s3://b/data/x.tfrecord");
        assert_eq!(c.remote().unwrap().key, "data/x.tfrecord");
        let s = c.with_file_name("x.tfrecord.idx");
        assert_eq!(s.as_str(), "s3://b/data/x.tfrecord.idx");
        assert_eq!(s.remote().unwrap().key, "data/x.tfrecord.idx");
        assert_eq!(s, Address::parse("s3://b/data/x.tfrecord.idx").unwrap());
        let root = Address::parse("s3://b").unwrap();
        assert_eq!(root.join("k").as_str(), "s3://b/k");
        assert_eq!(root.join("k").remote().unwrap().key, "k");
        assert_eq!(root.file_name(), None);

        let l = Address::parse("dir/x.tfrecord").unwrap();
        assert_eq!(l.with_file_name("x.idx").as_str(), "dir/x.idx");
        assert_eq!(
            l.with_file_name("x.idx").local_path(),
            Some(Path::new("dir/x.idx"))
        );
        assert_eq!(Address::parse("dir").unwrap().join("a").as_str(), "dir/a");
        assert_eq!(
            Address::parse("x").unwrap().with_file_name("y").as_str(),
            "y"
        );
    }
}
