//! Until the error vocabulary lands: this crate's errors behind the format
//! contract.

use grist_tensor::{ErrorKind, FormatError};

impl FormatError for crate::Error {
    fn location(&self) -> Option<&grist_tensor::Location> {
        None
    }

    fn kind(&self) -> ErrorKind {
        ErrorKind::Data
    }
}
