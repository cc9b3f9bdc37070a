//! Limits on allocations sized by input data.

use crate::error::TensorError;

/// Upper bounds checked before any allocation whose size comes from the
/// input, so hostile lengths fail cleanly instead of exhausting memory.
///
/// ```
/// use grist_tensor::Limits;
/// let limits = Limits::default().with_max_record_bytes(1 << 20);
/// assert!(limits.check_record(2 << 20).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    max_record_bytes: u64,
    max_alloc_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_record_bytes: 1 << 30,
            max_alloc_bytes: 4 << 30,
        }
    }
}

impl Limits {
    /// Limits that allow everything the address space allows.
    pub fn unlimited() -> Self {
        Limits {
            max_record_bytes: u64::MAX,
            max_alloc_bytes: u64::MAX,
        }
    }

    /// The largest record (payload) accepted. By default, 1 GiB.
    #[must_use]
    pub fn with_max_record_bytes(mut self, bytes: u64) -> Self {
        self.max_record_bytes = bytes;
        self
    }

    /// The largest single allocation sized by input data. By default, 4 GiB.
    #[must_use]
    pub fn with_max_alloc_bytes(mut self, bytes: u64) -> Self {
        self.max_alloc_bytes = bytes;
        self
    }

    /// The largest record accepted.
    pub fn max_record_bytes(&self) -> u64 {
        self.max_record_bytes
    }

    /// The largest allocation accepted.
    pub fn max_alloc_bytes(&self) -> u64 {
        self.max_alloc_bytes
    }

    /// Checks a record length against the record limit.
    pub fn check_record(&self, len: u64) -> Result<(), TensorError> {
        if len > self.max_record_bytes {
            return Err(TensorError::LimitExceeded {
                what: "record",
                requested: len,
                max: self.max_record_bytes,
            });
        }
        Ok(())
    }

    /// Checks an allocation of `bytes` for `what` against the allocation
    /// limit.
    pub fn check_alloc(&self, what: &'static str, bytes: u64) -> Result<(), TensorError> {
        if bytes > self.max_alloc_bytes {
            return Err(TensorError::LimitExceeded {
                what,
                requested: bytes,
                max: self.max_alloc_bytes,
            });
        }
        Ok(())
    }
}
