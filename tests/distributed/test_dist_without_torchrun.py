"""A `dist` test in a plain pytest run gets a one-rank group: collective benchmarks double as
correctness tests, tests that need more ranks skip with the exact torchrun command to use.

Run in a subprocess: the process group is process-wide, and this session may hold its own.
"""

import json


def test_one_rank_group_records_and_skips_with_the_command(pytester, fast, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # its own measurement lock, not the one other sessions share
    out = tmp_path / "run.json"
    pytester.makepyfile(
        test_coll="""
        import pytest, torch
        from pytest_tesserabench.distributed import collectives

        def test_all_reduce(bench, dist):
            assert (dist.rank, dist.world_size, dist.backend, dist.device.type) == (0, 1, "gloo", "cpu")
            assert dist.get_world_size() == 1 and dist.group.WORLD is not None  # torch.distributed's own names
            op = collectives.prepare("all_reduce", 4096, torch.float32)
            op.check()
            bench(op, op.buffers, comm_bytes=op.nbytes, bus_factor=op.bus_factor)

        def test_send_recv(dist):
            dist.require(world_size=2)

        @pytest.mark.bench_mesh(dp=2, tp=2)
        def test_mesh(mesh):
            pass

        @pytest.mark.bench_mesh("dp", "tp")
        def test_every_layout(mesh):
            assert mesh.mesh_dim_names == ("dp", "tp") and mesh.size() == 1
        """
    )
    result = pytester.runpytest_subprocess("--bench", *fast, f"--bench-json={out}", "-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "*algbw*busbw*",
            "*needs 2 ranks, this run has 1; run it with: torchrun --nproc-per-node=2 -m pytest *--bench*",
            "*mesh dp=2,tp=2 does not fit 1 rank(s): it needs 4; run it with: torchrun --nproc-per-node=4 -m pytest*",
        ]
    )
    (record,) = json.loads(out.read_text())["benchmarks"].values()
    block = record["distributed"]
    assert (block["world_size"], block["backend"], block["bus_factor"], block["busbw_gbps"]) == (1, "gloo", 0.0, 0.0)
    assert block["algbw_gbps"] == 4096 / (record["stats"]["median_ms"] / 1e3) / 1e9
    assert record["bytes"] is None and record["roofline"] is None  # network bytes are not memory traffic
    machine = json.loads(out.read_text())["machine"]
    assert "world_size" not in machine  # a plain run keeps its plain machine key


def test_nccl_without_a_gpu_is_one_clear_line(pytester):
    pytester.makepyfile("def test_a(dist):\n    pass\n")
    # In-process is safe: the backend is refused before any process group is made.
    result = pytester.runpytest("--bench-dist-backend=nccl", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*dist fixture: --bench-dist-backend=nccl: no CUDA GPU is usable here; use gloo*"])
    assert "Traceback" not in result.stdout.str()


def test_bad_bench_arguments_for_a_collective(pytester, fast):
    pytester.makepyfile(
        """
        import pytest
        from pytest_tesserabench.measure.fixture import BenchUsageError

        def test_a(bench):
            with pytest.raises(BenchUsageError, match="needs comm_bytes="):
                bench(sum, [1], bus_factor=1.5)
            with pytest.raises(BenchUsageError, match="comm_bytes=-1"):
                bench(sum, [1], comm_bytes=-1)
        """
    )
    pytester.runpytest("--bench", *fast, "-p", "no:cacheprovider").assert_outcomes(passed=1)
