//! `grist convert`: killed with SIGKILL at random points and run again,
//! shards and their merge, the refusal to overwrite another conversion,
//! and `--verify` catching a damaged output. Expected values always come
//! from reading the inputs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use grist::tensor::json::{batch_to_json, compare_json};
use grist::tensor::{Batch, SpecFile, Values};

use crate::support::{Run, grist};

/// Everything the loader reads from `sources` with `spec`, in order.
fn load(sources: &[PathBuf], spec: &SpecFile) -> Vec<Batch> {
    grist::loader()
        .with_paths(sources.iter().cloned())
        .with_spec_file(spec.clone())
        .with_batch_size(100)
        .build()
        .unwrap_or_else(|e| panic!("{sources:?}: {e}"))
        .map(|b| b.unwrap_or_else(|e| panic!("{sources:?}: {e}")))
        .collect()
}

fn read_spec(path: &Path) -> SpecFile {
    SpecFile::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The outputs in `out`, read with the `spec.json` there.
fn load_out(out: &Path) -> Vec<Batch> {
    load(&[out.to_path_buf()], &read_spec(&out.join("spec.json")))
}

/// Fails unless `got` holds exactly the records of `want`, in order,
/// value for value and dtype for dtype.
fn assert_same(want: &[Batch], got: &[Batch], what: &str) {
    let rows = |b: &[Batch]| b.iter().map(Batch::rows).sum::<usize>();
    assert_eq!(rows(want), rows(got), "{what}: records");
    assert_eq!(want.len(), got.len(), "{what}: batches");
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        if let Err(m) = compare_json(&batch_to_json(w), &batch_to_json(g)) {
            panic!("{what}: batch {i} differs: {m}");
        }
    }
}

/// Every name in `dir`, hidden ones too.
fn names(dir: &Path) -> Vec<String> {
    grist_testkit::dir_entries(dir)
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

/// How a run is stopped.
#[derive(Clone, Copy, Debug)]
enum Kill {
    /// After this many milliseconds.
    After(u64),
    /// Once this many parts are there.
    Parts(usize),
    /// With the manifest in its temporary file (the test hook holds it
    /// there).
    InManifest,
}

/// Starts `grist args` and kills it with SIGKILL as `kill` says; whether
/// it was killed (rather than finished first).
fn run_and_kill(args: &[String], out: &Path, kill: Kill) -> bool {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_grist"));
    cmd.args(args).stdout(Stdio::null()).stderr(Stdio::null());
    if let Kill::InManifest = kill {
        cmd.env(grist::PAUSE_BEFORE_MANIFEST, "60000");
    }
    let mut child = cmd.spawn().expect("running grist");
    let started = Instant::now();
    let deadline = Duration::from_secs(120);
    loop {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        let listing = std::fs::read_dir(out)
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let now = match kill {
            Kill::After(ms) => started.elapsed() >= Duration::from_millis(ms),
            Kill::Parts(k) => listing.iter().filter(|n| n.starts_with("part-")).count() >= k,
            Kill::InManifest => listing.iter().any(|n| n.starts_with(".manifest.json.")),
        };
        if now {
            // SIGKILL: nothing of grist runs after it.
            child.kill().unwrap();
            child.wait().unwrap();
            return true;
        }
        assert!(started.elapsed() < deadline, "{kill:?}: never happened");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// `grist convert` of a few MB of prod19, killed at random points
/// (several seeds: after a random delay, after k parts, in the middle of
/// the manifest's write; sometimes twice), then run again to the end:
/// the outputs hold every input record exactly once, in order, and no
/// temporary file is left.
#[test]
fn killed_conversions_finish_with_every_record_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("in");
    grist([
        "gen",
        "prod19",
        "--records",
        "4000",
        "--out",
        data.to_str().unwrap(),
    ])
    .assert_ok("gen");
    let input = data.join("prod19.tfrecord");
    let spec_path = data.join("prod19.spec.json");
    let want = load(std::slice::from_ref(&input), &read_spec(&spec_path));
    let targets: [&[&str]; 4] = [
        &["--to", "avro"],
        &["--to", "tfrecord", "--compression", "GZIP"],
        &["--to", "ffrecord"],
        &["--to", "ofrecord"],
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut kills_done = 0;
    for seed in 0..8u64 {
        let out = dir.path().join(format!("out-{seed}"));
        let mut args: Vec<String> = vec!["convert".into()];
        args.extend(targets[seed as usize % 4].iter().map(|s| s.to_string()));
        args.extend(
            [
                "--spec",
                spec_path.to_str().unwrap(),
                "--records-per-file",
                "300",
                input.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
            ]
            .map(String::from),
        );
        let mut kills = vec![match seed % 3 {
            0 => Kill::After(rng.below(1500)),
            1 => Kill::Parts(1 + rng.below(12) as usize),
            _ => Kill::InManifest,
        }];
        if seed % 4 == 3 {
            kills.push(Kill::Parts(1 + rng.below(13) as usize));
        }
        for kill in kills {
            let killed = run_and_kill(&args, &out, kill);
            if matches!(kill, Kill::InManifest) {
                assert!(killed, "seed {seed}: the hook holds the manifest");
                // Killed in the middle of the manifest's write: the
                // parts are all there, the manifest is not.
                assert!(!out.join("manifest.json").exists());
            }
            kills_done += usize::from(killed);
        }
        let run = grist(&args);
        run.assert_ok(&format!("seed {seed}: the run after"));
        assert_same(&want, &load_out(&out), &format!("seed {seed}"));
        let left = names(&out);
        assert!(
            !left
                .iter()
                .any(|n| n.starts_with('.') || n.starts_with("convert-journal")),
            "seed {seed}: {left:?}"
        );
        let manifest = grist::Manifest::read(
            &grist::Storage::new(),
            &grist::Address::from(out.join("manifest.json")),
        )
        .unwrap();
        assert_eq!(manifest.records, 4000, "seed {seed}");
        assert_eq!(manifest.parts.len(), 14, "seed {seed}");
        // And once more: nothing to do.
        let again = grist(&args);
        again.assert_ok(&format!("seed {seed}: again"));
        assert!(again.stderr.contains("nothing to do"), "{}", again.stderr);
    }
    // Those waiting for parts or the manifest always kill; a random delay
    // may come after the end.
    assert!(kills_done >= 6, "{kills_done} runs killed");
}

/// TFRecord files of records `id` (the ranges given) with a few floats
/// each (`v`: `id % 7` values), and their spec file.
fn write_ids(dir: &Path, ranges: &[std::ops::Range<i64>]) -> (Vec<PathBuf>, PathBuf) {
    use grist::tfrecord::{ExampleBuilder, RecordWriter};
    std::fs::create_dir_all(dir).unwrap();
    let mut paths = Vec::new();
    for (n, range) in ranges.iter().enumerate() {
        let path = dir.join(format!("in-{n:02}.tfrecord"));
        let mut w = RecordWriter::create(&path, Default::default()).unwrap();
        for i in range.clone() {
            let values: Vec<f32> = (0..(i % 7)).map(|k| (i * 10 + k) as f32 + 0.5).collect();
            let e = ExampleBuilder::new()
                .with_int64s("id", [i])
                .with_floats("v", values);
            w.write_record(&e.encode()).unwrap();
        }
        w.finish().unwrap();
        paths.push(path);
    }
    let spec = dir.join("spec.json");
    std::fs::write(
        &spec,
        r#"{"features": [
            {"name": "id", "kind": "dense", "dtype": "int64", "shape": []},
            {"name": "v", "kind": "varlen", "dtype": "float32"}]}"#,
    )
    .unwrap();
    (paths, spec)
}

fn ids(batches: &[Batch]) -> Vec<i64> {
    let mut ids = Vec::new();
    for b in batches {
        let Values::Int64(v) = &b.get("id").unwrap().as_dense().unwrap().values else {
            panic!("id is int64");
        };
        ids.extend_from_slice(v);
    }
    ids
}

fn convert_args(spec: &Path, inputs: &[PathBuf], out: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec!["convert".into(), "--spec".into()];
    args.push(spec.display().to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    args.extend(["-o".to_string(), out.display().to_string()]);
    args
}

/// `--shard I/3` for each I (one of them from RANK/WORLD_SIZE instead),
/// then `--merge`: the union of the shards is the inputs, each record
/// once, and the manifest counts them; without a shard's manifest the
/// merge fails naming it.
#[test]
fn shards_and_merge() {
    let dir = tempfile::tempdir().unwrap();
    let ranges: Vec<_> = (0..5).map(|k| k * 50..(k + 1) * 50 + k).collect();
    let (inputs, spec) = write_ids(&dir.path().join("in"), &ranges);
    let mut want = ids(&load(&inputs, &read_spec(&spec)));
    want.sort_unstable();
    let out = dir.path().join("out");
    for i in 0..3 {
        let run = if i == 1 {
            let args = convert_args(&spec, &inputs, &out, &["--to", "avro"]);
            let output = Command::new(env!("CARGO_BIN_EXE_grist"))
                .args(&args)
                .env("RANK", "1")
                .env("WORLD_SIZE", "3")
                .output()
                .unwrap();
            Run {
                ok: output.status.success(),
                code: output.status.code(),
                stdout: String::from_utf8(output.stdout).unwrap(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            }
        } else {
            let shard = format!("{i}/3");
            grist(convert_args(
                &spec,
                &inputs,
                &out,
                &["--to", "avro", "--shard", &shard],
            ))
        };
        run.assert_ok(&format!("shard {i}"));
        assert!(out.join(format!("manifest-{i}-of-3.json")).exists());
    }
    assert!(
        names(&out).iter().any(|n| n.starts_with("part-00001-")),
        "RANK/WORLD_SIZE made shard 1: {:?}",
        names(&out)
    );
    let mut got = ids(&load_out(&out));
    got.sort_unstable();
    assert_eq!(got, want);
    let run = grist(["convert", "--merge", out.to_str().unwrap()]);
    run.assert_ok("merge");
    let manifest = grist::Manifest::read(
        &grist::Storage::new(),
        &grist::Address::from(out.join("manifest.json")),
    )
    .unwrap();
    assert_eq!(manifest.records, want.len() as u64);

    std::fs::remove_file(out.join("manifest-2-of-3.json")).unwrap();
    let run = grist(["convert", "--merge", out.to_str().unwrap()]);
    run.assert_failed("merge without shard 2");
    assert!(
        run.stderr.contains("manifest-2-of-3.json") && run.stderr.contains("shard 2"),
        "{}",
        run.stderr
    );
    let run = grist(convert_args(
        &spec,
        &inputs,
        &out,
        &["--to", "avro", "--shard", "3/3"],
    ));
    assert!(!run.ok && run.stderr.contains("3/3"), "{}", run.stderr);
}

/// Another conversion into the same folder fails (one line, naming
/// convert.json and --force) and changes nothing; with --force it
/// replaces the outputs.
#[test]
fn a_different_conversion_needs_force() {
    let dir = tempfile::tempdir().unwrap();
    let (inputs, spec) = write_ids(&dir.path().join("in"), std::slice::from_ref(&(0..100)));
    let out = dir.path().join("out");
    let args = |extra: &[&str]| {
        let mut a = vec!["--to", "tfrecord"];
        a.extend_from_slice(extra);
        convert_args(&spec, &inputs, &out, &a)
    };
    grist(args(&["--records-per-file", "30"])).assert_ok("first");
    let before: Vec<_> = names(&out)
        .into_iter()
        .map(|n| (std::fs::read(out.join(&n)).unwrap(), n))
        .collect();
    let run = grist(args(&["--records-per-file", "40"]));
    run.assert_failed("another split");
    assert!(
        run.stderr.contains("convert.json") && run.stderr.contains("--force"),
        "{}",
        run.stderr
    );
    let after: Vec<_> = names(&out)
        .into_iter()
        .map(|n| (std::fs::read(out.join(&n)).unwrap(), n))
        .collect();
    assert_eq!(before, after, "nothing touched");
    grist(args(&["--records-per-file", "40", "--force"])).assert_ok("forced");
    let parts = names(&out)
        .into_iter()
        .filter(|n| n.starts_with("part-"))
        .count();
    assert_eq!(parts, 3);
    assert_eq!(ids(&load_out(&out)), (0..100).collect::<Vec<_>>());
}

/// The TFRecord frames of `path`: (payload) each.
fn frames(path: &Path) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
        out.push(bytes[at + 12..at + 12 + len].to_vec());
        at += 12 + len + 4;
    }
    out
}

/// `--verify` passes on good outputs and, with one float of one record
/// changed in a written part (framing and CRCs still valid), fails naming
/// the part, the record and the feature.
#[test]
fn verify_catches_a_changed_value() {
    let dir = tempfile::tempdir().unwrap();
    let (inputs, spec) = write_ids(&dir.path().join("in"), &[0..30, 30..60]);
    let out = dir.path().join("out");
    let args = convert_args(
        &spec,
        &inputs,
        &out,
        &["--to", "tfrecord", "--records-per-file", "20", "--verify"],
    );
    let run = grist(&args);
    run.assert_ok("verify of good outputs");
    assert!(run.stderr.contains("verified"), "{}", run.stderr);

    // Record 7 of part 1 is id 27: 6 floats in `v`. Change the first.
    let part = out.join("part-00001.tfrecord");
    let mut records = frames(&part);
    let record = &mut records[7];
    let key = record
        .windows(3)
        .position(|w| w == b"\x0a\x01v")
        .expect("the key v");
    // key, then Feature (tag, len), FloatList (tag, len), packed (tag,
    // len), the floats.
    let first_float = key + 3 + 6;
    record[first_float] ^= 0x01;
    let mut w = grist::tfrecord::RecordWriter::create(&part, Default::default()).unwrap();
    for r in &records {
        w.write_record(r).unwrap();
    }
    w.finish().unwrap();

    let run = grist(&args);
    assert!(!run.ok, "verify of a changed part passed");
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert!(
        run.stderr.contains("part-00001.tfrecord")
            && run.stderr.contains("record 7")
            && run.stderr.contains("feature v"),
        "{}",
        run.stderr
    );
}

/// Without --spec the spec is inferred and printed on stderr: TFRecord by
/// sampling, then Avro (the outputs) from its writer schema; --verify
/// checks both conversions.
#[test]
fn without_a_spec_it_is_inferred() {
    let dir = tempfile::tempdir().unwrap();
    let (inputs, _) = write_ids(&dir.path().join("in"), &[0..40, 40..70]);
    let avro = dir.path().join("avro");
    let mut args: Vec<String> = ["convert", "--to", "avro", "--verify"]
        .map(String::from)
        .to_vec();
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    args.extend(["-o".to_string(), avro.display().to_string()]);
    let run = grist(&args);
    run.assert_ok("tfrecord to avro, inferred");
    assert!(
        run.stderr.contains("inferred spec") && run.stderr.contains("\"v\""),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("verified"), "{}", run.stderr);
    let back = dir.path().join("back");
    let run = grist([
        "convert",
        "--to",
        "tfrecord",
        "--verify",
        avro.to_str().unwrap(),
        "-o",
        back.to_str().unwrap(),
    ]);
    run.assert_ok("avro to tfrecord, inferred");
    assert!(run.stderr.contains("verified"), "{}", run.stderr);
    assert_eq!(ids(&load_out(&back)), (0..70).collect::<Vec<_>>());
}
