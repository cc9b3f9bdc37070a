//! The loader's saved state: where in which epoch it is, small enough to
//! checkpoint with a model.

use serde::{Deserialize, Serialize};

use grist_tensor::ChunkPos;

use crate::stream::StreamCursor;

/// Where a loader is, as [`Loader::state`](crate::Loader::state) saves it
/// and [`Loader::restore`](crate::Loader::restore) takes it back.
///
/// It holds the epoch and how many batches of it were yielded, and for a
/// stream the stream's position plus the chunks of the shuffle buffer (by
/// position, with how many of their rows were used): a few hundred bytes
/// of JSON, independent of the data's size. A loader built with the same
/// arguments (files, batch size, seed, shard, ...) and restored from it
/// yields exactly the batches the saved one would have yielded next; a
/// loader built otherwise refuses it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderState {
    pub(crate) version: u32,
    pub(crate) fingerprint: u64,
    pub(crate) epoch: u64,
    pub(crate) batches: u64,
    pub(crate) resume: Resume,
}

impl LoaderState {
    /// The epoch the next batch belongs to (counted from 0).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// How many batches of that epoch were yielded.
    pub fn batches_in_epoch(&self) -> u64 {
        self.batches
    }
}

/// The format of [`LoaderState`].
pub(crate) const STATE_VERSION: u32 = 1;

/// Where the reading resumes within the epoch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Resume {
    /// At the start of the epoch.
    Fresh,
    /// Records read by number: at this batch of the epoch.
    Indexed { batch: u64 },
    /// A stream: the chunks still in the shuffle buffer, and the stream's
    /// cursor after the last chunk taken from it.
    Stream {
        /// `None`: no chunk was taken yet.
        cursor: Option<StreamCursor>,
        /// The stream's end was reached.
        ended: bool,
        buffer: Vec<BufferedState>,
    },
}

/// A chunk in the shuffle buffer: where to read it again, and what of it
/// was used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BufferedState {
    pub(crate) input: usize,
    pub(crate) pos: ChunkPos,
    /// Rows of the chunk already in batches.
    pub(crate) taken: u64,
    /// Of those, the rows cut off the front of the chunk's data, and the
    /// bytes they took (sequential chunks: the rest decodes from there
    /// without the cut rows being read again).
    pub(crate) cut_rows: u64,
    pub(crate) cut_bytes: u64,
}
