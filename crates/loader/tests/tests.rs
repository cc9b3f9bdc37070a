//! Integration tests of grist-loader.
