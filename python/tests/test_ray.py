"""grist.ray on a local Ray: round trips through Datasink and Datasource
for the four formats, record-range splits, TFRecord -> Avro, and no file
left by a failed write task."""

from __future__ import annotations

import os

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

import grist  # noqa: E402
import grist.ray as gr  # noqa: E402

from torch_ray_data import (  # noqa: E402
    FORMATS,
    RANDOM_ACCESS,
    SPEC,
    check_rows,
    varlen_rows,
    write_dataset,
)


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray of 2 CPUs for this module (or the one already running)."""
    started = not ray.is_initialized()
    if started:
        # Workers import grist, and this module (functions defined here are
        # pickled by reference), from where this process does.
        path = [
            os.path.dirname(os.path.abspath(__file__)),
            os.path.dirname(os.path.dirname(os.path.abspath(grist.__file__))),
        ]
        if os.environ.get("PYTHONPATH"):
            path.append(os.environ["PYTHONPATH"])
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(path)}},
        )
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    yield
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return write_dataset(str(tmp_path_factory.mktemp("src")), "tfrecord", sizes=(60, 45, 70))


def rows_of(ds):
    """All rows of a Ray dataset as (ids, x, tok rows) in id order."""
    table = ds.to_arrow_refs()
    import pyarrow as pa

    table = pa.concat_tables(ray.get(table))
    ids = table.column("id").to_numpy()
    x = np.stack(table.column("x").to_pylist()).astype(np.float32)
    order = np.argsort(ids)
    return ids[order], x[order], table


def batches_rows(batches):
    ids, xs, toks = [], [], []
    for b in batches:
        n = len(b["id"])
        ids.append(b["id"])
        xs.append(b["x"])
        toks.extend(varlen_rows(b["tok"], n))
    return np.concatenate(ids), np.concatenate(xs), toks


def read_back(folder):
    """Everything under `folder` read with grist itself, in order, with the
    spec.json the Datasink wrote."""
    spec = os.path.join(folder, "spec.json")
    return batches_rows(grist.read_batches(folder, spec, batch_size=64))


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_each_format(local_ray, source, tmp_path, fmt):
    out = str(tmp_path / fmt)
    ds = ray.data.read_datasource(gr.Datasource(source.files, source.spec), override_num_blocks=3)
    ds.write_datasink(gr.Datasink(out, fmt, SPEC))
    parts = gr.Datasink(out, fmt).parts
    assert parts, "no part written"
    names = {grist.part_name(fmt, i) for i in range(16)}
    for p in parts:
        assert os.path.basename(p) in names, p
    # grist reads the parts back with the same rows.
    ids, x, tok = read_back(out)
    assert sorted(ids.tolist()) == sorted(source.ids.tolist())
    check_rows(source, ids, x, tok)
    # And so does the Datasource.
    back = ray.data.read_datasource(gr.Datasource(out, os.path.join(out, "spec.json")))
    assert back.count() == len(source.ids)
    got_ids, got_x, _ = rows_of(back)
    assert got_ids.tolist() == sorted(source.ids.tolist())
    row_of = source.row_of()
    np.testing.assert_array_equal(got_x, source.x[[row_of[int(i)] for i in got_ids]])


def test_tfrecord_to_avro(local_ray, source, tmp_path):
    out = str(tmp_path / "avro")
    (
        ray.data.read_datasource(gr.Datasource(source.files, source.spec))
        .write_datasink(gr.Datasink(out, "avro"))
    )
    names = sorted(os.listdir(out))
    assert any(n.endswith(".avro") for n in names), names
    # No spec given: the Datasink took it from the Arrow metadata and wrote
    # the one the Avro parts read back with (an Avro array alone does not
    # say "dense, 2 values").
    ids, x, tok = read_back(out)
    assert sorted(ids.tolist()) == sorted(source.ids.tolist())
    check_rows(source, ids, x, tok)


@pytest.mark.parametrize("fmt", RANDOM_ACCESS)
def test_record_range_splits_cover_every_record_once(tmp_path, fmt):
    written = write_dataset(str(tmp_path), fmt, sizes=(103,))
    src = gr.Datasource(written.files, written.spec, batch_size=16, min_records_per_task=1)
    tasks = src.get_read_tasks(4)
    assert len(tasks) == 4
    seen = []
    for task in tasks:
        import pyarrow as pa

        table = pa.concat_tables(list(task()))
        assert table.num_rows == task.metadata.num_rows
        seen.append(table.column("id").to_numpy())
    # Contiguous ranges in file order, together every record once.
    np.testing.assert_array_equal(np.concatenate(seen), written.ids)
    assert sum(t.metadata.num_rows for t in tasks) == len(written.ids)


def test_record_ranges_through_ray(local_ray, tmp_path):
    written = write_dataset(str(tmp_path), "ffrecord", sizes=(90,))
    src = gr.Datasource(written.files, written.spec, batch_size=8, min_records_per_task=10)
    ds = ray.data.read_datasource(src, override_num_blocks=4)
    ids, _, _ = rows_of(ds)
    assert ids.tolist() == sorted(written.ids.tolist())


def test_split_by_file(source):
    src = gr.Datasource(source.files, source.spec)
    tasks = src.get_read_tasks(2)
    assert len(tasks) == 2
    groups = [list(t.metadata.input_files) for t in tasks]
    assert sum(groups, []) == source.files
    assert src.estimate_inmemory_data_size() == sum(os.path.getsize(f) for f in source.files)
    # More tasks than files: one file each.
    assert len(src.get_read_tasks(8)) == len(source.files)


def test_records_split_refused_for_streams(source):
    with pytest.raises(ValueError, match="record number"):
        gr.Datasource(source.files, source.spec, split="records")


def test_failed_write_task_leaves_no_file(local_ray, source, tmp_path):
    out = str(tmp_path / "failed")

    def fail_after_first(batch, seen=[]):  # noqa: B006 - counts calls in the task
        # The first batch reaches the writer (a file is begun), the second
        # fails inside the same fused read -> map -> write task.
        seen.append(1)
        if len(seen) > 1:
            raise RuntimeError("boom after the first batch")
        return batch

    ds = ray.data.read_datasource(
        gr.Datasource(source.files, source.spec, batch_size=16), override_num_blocks=1
    )
    with pytest.raises(Exception, match="boom"):
        ds.map_batches(fail_after_first, batch_size=16).write_datasink(
            gr.Datasink(out, "avro", SPEC)
        )
    # Not even a temporary file of the aborted writer.
    left = os.listdir(out) if os.path.isdir(out) else []
    assert left == [], left


def test_existing_output_is_refused_unless_overwrite(local_ray, source, tmp_path):
    out = str(tmp_path / "again")
    ds = ray.data.read_datasource(gr.Datasource(source.files, source.spec))
    ds.write_datasink(gr.Datasink(out, "ffrecord", SPEC))
    with pytest.raises(Exception, match="already holds"):
        ds.write_datasink(gr.Datasink(out, "ffrecord", SPEC))
    ds.write_datasink(gr.Datasink(out, "ffrecord", SPEC, overwrite=True))
    ids, _, _ = read_back(out)
    assert sorted(ids.tolist()) == sorted(source.ids.tolist())


def test_projection_reads_only_the_selected_features(local_ray, source):
    src = gr.Datasource(source.files, source.spec)
    spec, columns = src.apply_projection({"id": "id"})._task_spec()
    features = spec["features"] if isinstance(spec, dict) else spec
    assert [f["name"] for f in features] == ["id"] and columns == ["id"]
    ds = ray.data.read_datasource(src).select_columns(["id"])
    rows = ds.take_all()
    assert all(set(r) == {"id"} for r in rows)
    assert sorted(r["id"] for r in rows) == sorted(source.ids.tolist())
    assert ray.data.read_datasource(src).count() == len(source.ids)
