//! What only grist-ofrecord's tests need on top of grist-testkit's corpus
//! helpers: the views of a case in this crate's types.

use grist_ofrecord::{Dataset, PartNaming};
use grist_testkit::corpus::FolderCase;

/// An OFRecord corpus case in grist-ofrecord's types.
pub(crate) trait OfCase {
    /// The dataset as OneFlow's reader options open it.
    fn dataset(&self) -> grist_ofrecord::Result<Dataset>;

    /// The part naming of the reader options.
    fn naming(&self) -> PartNaming;
}

impl OfCase for FolderCase {
    fn dataset(&self) -> grist_ofrecord::Result<Dataset> {
        let opts = &self.expected["reader_options"];
        Dataset::open(
            self.dataset_dir(),
            opts["data_part_num"].as_u64().expect("data_part_num") as usize,
            &self.naming(),
        )
    }

    fn naming(&self) -> PartNaming {
        let opts = &self.expected["reader_options"];
        PartNaming::oneflow(
            opts["part_name_prefix"].as_str().expect("part_name_prefix"),
            opts["part_name_suffix_length"]
                .as_i64()
                .expect("part_name_suffix_length"),
        )
    }
}
