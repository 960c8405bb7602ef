"""A collective's record: its distributed block in the run file and its columns in the table."""

import pytest

from pytest_tesserabench.record.results import BenchRecord, DocumentError, Stats
from pytest_tesserabench.report.terminal import render_summary


def record(nodeid, distributed=None, group="g"):
    return BenchRecord(
        nodeid=nodeid,
        name=None,
        group=group,
        timer="cpu",
        rounds_ms=[2.0] * 3,
        stats=Stats.of([2.0] * 3),
        distributed=distributed,
    )


BLOCK = {
    "world_size": 4,
    "backend": "gloo",
    "comm_bytes": 1e6,
    "bus_factor": 1.5,
    "algbw_gbps": 0.5,
    "busbw_gbps": 0.75,
}


def test_the_block_survives_the_run_file():
    data = record("t.py::a", dict(BLOCK)).to_json()
    assert data["distributed"] == BLOCK
    assert BenchRecord.from_json("t.py::a", data).distributed == BLOCK
    assert "distributed" not in record("t.py::b").to_json()  # single-process records are unchanged


def test_a_bad_block_is_named():
    data = record("t.py::a", {**BLOCK, "busbw_gbps": -1}).to_json()
    with pytest.raises(DocumentError, match=r"distributed\.busbw_gbps: is -1; expected a number >= 0"):
        BenchRecord.from_json("t.py::a", data)


def test_bandwidth_columns_only_where_collectives_are():
    text = render_summary({"c": record("t.py::c", dict(BLOCK), group="coll"), "m": record("t.py::m", group="math")})
    coll, math = text.split("math")
    assert "algbw" in coll and "busbw" in coll and "750 MB/s" in coll
    assert "algbw" not in math and "busbw" not in math


def test_quiet_lines_keep_a_collectives_bandwidths():
    text = render_summary({"c": record("t.py::c", dict(BLOCK)), "m": record("t.py::m")}, width=120, verbosity=-1)
    coll, math = text.splitlines()
    assert "algbw 500 MB/s  busbw 750 MB/s" in coll and "busbw" not in math
