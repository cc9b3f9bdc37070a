//! `feature_map::sparse_rows` against its definition, on generated index
//! lists (sorted, with empty rows, unsorted, past the batch).

use std::ops::Range;

use grist_tensor::feature_map::sparse_rows;

/// The definition: every entry's row in `0..rows`, never decreasing; row
/// `r`'s range holds the entries of row `r`.
fn reference(indices: &[i64], rank: usize, rows: usize) -> Option<Vec<Range<usize>>> {
    let ids: Vec<i64> = indices.chunks_exact(rank).map(|t| t[0]).collect();
    let sorted = ids.windows(2).all(|w| w[0] <= w[1]);
    if !sorted || ids.iter().any(|&b| b < 0 || b >= rows as i64) {
        return None;
    }
    let ranges = (0..rows as i64)
        .map(|r| {
            let start = ids.iter().filter(|&&b| b < r).count();
            start..start + ids.iter().filter(|&&b| b == r).count()
        })
        .collect();
    Some(ranges)
}

#[test]
fn sparse_rows_matches_its_definition() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let (mut ok, mut refused) = (0, 0);
    for case in 0..2000 {
        let rank = 1 + next(3) as usize;
        let rows = next(6) as usize;
        let nnz = next(12) as usize;
        let mut ids: Vec<i64> = (0..nnz).map(|_| next(rows as u64 + 2) as i64 - 1).collect();
        // Most lists sorted, as decoders return them.
        if case % 4 != 0 {
            ids.sort_unstable();
        }
        let indices: Vec<i64> = ids
            .iter()
            .flat_map(|&b| std::iter::once(b).chain((1..rank).map(|k| k as i64)))
            .collect();
        let got = sparse_rows("f", &indices, rank, rows).ok();
        assert_eq!(got, reference(&indices, rank, rows), "{ids:?} rows {rows}");
        if got.is_some() { ok += 1 } else { refused += 1 }
    }
    // Both outcomes were exercised.
    assert!(ok > 100 && refused > 100, "{ok} {refused}");
}
