"""Ahead-of-time analysis of small kernels for sm_80 and sm_90, checked against NVIDIA's tools.

No GPU is needed: Triton compiles for a named target and its wheel ships ptxas, nvdisasm and
cuobjdump. Compiles are shared through one module-scoped cache (a few seconds in all).
"""

import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import inspect_sample_kernels as samples  # noqa: E402

from pytest_tesserabench.inspect import (  # noqa: E402
    analyse_launches,
    format_kernel_lines,
    specialize,
    tools,  # noqa: E402
)
from pytest_tesserabench.inspect.archs import ARCH_LIMITS  # noqa: E402
from pytest_tesserabench.inspect.cubin import parse_ptxas_log, parse_res_usage, read_resources  # noqa: E402
from pytest_tesserabench.inspect.occupancy import theoretical_occupancy  # noqa: E402

ARCHS = ("sm_90", "sm_80")


def vector_add_launch():
    x = torch.empty(4096)
    return specialize(samples.vector_add_kernel, (x, x, x, 4096), {"BLOCK": 1024})


def matmul_launch(num_stages=3, num_warps=4, maxnreg=None, block=(64, 64, 32)):
    a = torch.empty(256, 256, dtype=torch.float16)
    options = {"BM": block[0], "BN": block[1], "BK": block[2], "num_warps": num_warps, "num_stages": num_stages}
    if maxnreg:
        options["maxnreg"] = maxnreg
    return specialize(samples.small_matmul_kernel, (a, a, a, 256, 256, 256, 256, 256, 256), options)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("inspect-cache")


@pytest.fixture(scope="module")
def analysed(cache_dir):
    launches = {
        "add": vector_add_launch(),
        "matmul": matmul_launch(),
        "spill": matmul_launch(num_warps=4, maxnreg=168, block=(128, 256, 32)),
    }
    records = analyse_launches(launches.values(), ARCHS, cache_dir=cache_dir)
    by_key = {
        (name, record["arch"]): record for name, record in zip([name for name in launches for _ in ARCHS], records)
    }
    return launches, by_key


def _cubin(dump, record):
    path = dump / record["name"] / f"{record['name']}-{record['spec_id']}-{record['arch']}.cubin"
    return path.read_bytes()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kernel", ["add", "matmul", "spill"])
def test_registers_and_shared_equal_cuobjdump_res_usage(analysed, cache_dir, tmp_path, kernel, arch):
    launches, records = analysed
    record = records[(kernel, arch)]
    analyse_launches([launches[kernel]], [arch], cache_dir=cache_dir, dump_dir=tmp_path)
    cubin = _cubin(tmp_path, record)
    usage = parse_res_usage(tools.res_usage(cubin))[record["name"]]
    assert record["registers"] == usage["REG"]
    assert record["static_shared_bytes"] == usage["SHARED"]
    assert record["local_bytes"] == usage["STACK"]  # the per-thread frame spills live in
    assert record["shared_bytes"] == usage["SHARED"] + record["dynamic_shared_bytes"]
    # The ELF parser is the primary source; it must agree with itself on a re-read too.
    assert read_resources(cubin, record["name"]).registers == usage["REG"]


@pytest.mark.parametrize("arch", ARCHS)
def test_occupancy_follows_the_calculator(analysed, arch):
    _, records = analysed
    for kernel in ("add", "matmul", "spill"):
        record = records[(kernel, arch)]
        expected = theoretical_occupancy(
            ARCH_LIMITS[arch],
            threads_per_block=record["num_warps"] * 32,
            registers_per_thread=record["registers"],
            shared_bytes_per_block=record["shared_bytes"] - record["reserved_shared_bytes"],
        )
        assert (record["occupancy"], record["blocks_per_sm"], record["limiter"]) == (
            round(expected.occupancy, 4),
            expected.blocks_per_sm,
            expected.limiter,
        )
    add = records[("add", arch)]
    assert (add["occupancy"], add["limiter"]) == (1.0, "warps")  # a few registers, no shared memory


def test_tensor_cores_show_at_every_level(analysed):
    _, records = analysed
    hopper, ampere = records[("matmul", "sm_90")], records[("matmul", "sm_80")]
    assert hopper["ttir"]["dot"] == 1 and hopper["ttir"]["loops"] == 1
    assert hopper["ttgir"]["mma_version"] == 3 and hopper["ttgir"]["warp_group_dot"] >= 1
    assert hopper["instructions"]["wgmma"] > 0 and hopper["sass"]["HGMMA"] > 0
    assert ampere["ttgir"]["mma_version"] == 2 and ampere["ttgir"]["async_copies"] > 0
    assert ampere["instructions"]["mma"] > 0 and ampere["instructions"]["cp_async"] > 0
    assert ampere["sass"]["HMMA"] > 0 and ampere["tensor_core_instructions"] == ampere["sass"]["tensor_core"]
    assert ampere["ttgir"]["pipeline_buffers"] >= 2  # num_stages=3: multi-buffered tiles
    assert records[("add", "sm_90")]["tensor_core_instructions"] == 0
    for record in records.values():
        assert set(record["compile_ms"]) == {"ttir", "ttgir", "llir", "ptx", "cubin"}
        assert record["instructions"]["total"] > 0 and record["sass_instructions"] > 0
    # ... and in the human output, one line of the mix per kernel
    (line,) = [line for line in format_kernel_lines([hopper]) if "mix:" in line]
    assert "TTIR load" in line and "dot 1" in line and f"wgmma {hopper['instructions']['wgmma']}" in line
    assert f"SASS {hopper['sass']['total']} instructions" in line and f"HGMMA {hopper['sass']['HGMMA']}" in line
    assert f"PTX {hopper['instructions']['total']} instructions" in line


def test_the_mix_line_shows_every_count_the_reference_lists_that_is_not_zero():
    # extra work a change adds (a math op, an SFU instruction) must show where a GPU-less reader looks
    from pytest_tesserabench.inspect.summary import mix_line

    record = {
        "ttir": {"load": 1, "store": 1, "reduce": 2, "math": 3, "scan": 0},
        "ttgir": {"layouts": {"blocked": 1}, "warp_group_dot": 2, "tma_copies": 4},
        "instructions": {"total": 120, "ld_global": 1, "sfu": 2, "mbarrier": 3, "cp_async_bulk": 1},
        "sass": {"total": 98},
    }
    assert mix_line(record) == (
        "mix: TTIR load 1, store 1, reduce 2, math 3 · TTGIR blocked, warp_group_dot 2, tma_copies 4 · "
        "PTX 120 instructions, ld_global 1, cp_async_bulk 1, sfu 2, mbarrier 3 · SASS 98 instructions"
    )


def test_spills_are_reported_and_match_ptxas(analysed):
    _, records = analysed
    for arch in ARCHS:
        spilling = records[("spill", arch)]
        assert spilling["registers"] <= 168
        assert spilling["spill_bytes"] > 0 and spilling["spill_loads"] > 0
        assert spilling["local_bytes"] >= spilling["spill_bytes"] / 1024  # a frame exists
        assert spilling["sass"]["local_stores"] > 0
        assert records[("add", arch)]["spill_bytes"] == 0
    assert "SPILLS" in "\n".join(format_kernel_lines([records[("spill", "sm_90")]]))


def test_ptxas_log_parser():
    log = (
        "ptxas info    : Function properties for k\n"
        "    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads\n"
        "ptxas info    : Used 32 registers, used 1 barriers, 400 bytes cmem[0]\n"
    )
    assert parse_ptxas_log(log) == {"spill_stores": 12, "spill_loads": 16, "registers": 32}


def test_compile_failure_is_a_record_not_an_exception(cache_dir):
    a = torch.empty(64, dtype=torch.float16)
    launch = specialize(samples.bad_dot_kernel, (a, a), {"BLOCK": 8})
    records = analyse_launches([launch, vector_add_launch()], ["sm_80"], cache_dir=cache_dir)
    assert records[0]["error"] and records[0]["registers"] is None
    assert records[1]["error"] is None
    assert "compile failed" in format_kernel_lines(records)[0]


def test_unknown_arch_is_a_value_error_listing_accepted():
    with pytest.raises(ValueError, match="sm_80, sm_86, sm_89, sm_90, sm_100"):
        analyse_launches([vector_add_launch()], ["sm_75"])


def test_a_warm_cache_compiles_nothing_and_keys_the_specialization(analysed, cache_dir, monkeypatch):
    from pytest_tesserabench.inspect import analysis

    launches, records = analysed
    compiled = []
    real = analysis.compile_for_arch
    monkeypatch.setattr(analysis, "compile_for_arch", lambda launch, arch: compiled.append(arch) or real(launch, arch))
    again = analyse_launches([launches["matmul"]], ARCHS, cache_dir=cache_dir)
    assert compiled == []  # (what a warm lookup costs is benchmarks/inspect_speed.py's figure)
    assert again[0] == records[("matmul", "sm_90")]
    other = analyse_launches([matmul_launch(num_stages=2)], ["sm_80"], cache_dir=cache_dir)[0]
    assert other["num_stages"] == 2 and other["spec_id"] != records[("matmul", "sm_80")]["spec_id"]


def test_ir_dump_has_every_level_with_findable_names(analysed, cache_dir, tmp_path):
    launches, _ = analysed
    record = analyse_launches([launches["add"]], ["sm_90"], cache_dir=cache_dir, dump_dir=tmp_path)[0]
    folder = tmp_path / "vector_add_kernel"
    names = sorted(path.name for path in folder.iterdir())
    stem = f"vector_add_kernel-{record['spec_id']}-sm_90"
    assert names == sorted(f"{stem}.{ext}" for ext in ("ttir", "ttgir", "llir", "ptx", "cubin", "sass", "json"))
    assert ".target sm_90a" in (folder / f"{stem}.ptx").read_text()
    assert re.search(r"LDG|STG", (folder / f"{stem}.sass").read_text())


def test_missing_nvdisasm_degrades_with_a_note(monkeypatch, tmp_path):
    def missing(name):
        raise tools.ToolMissing(f"{name} not found")

    monkeypatch.setattr(tools, "find_tool", missing)
    record = analyse_launches([vector_add_launch()], ["sm_80"], cache_dir=tmp_path)[0]
    assert record["error"] is None and record["sass"] is None and record["sass_instructions"] is None
    assert record["registers"] > 0 and record["tensor_core_instructions"] == 0
    assert any("nvdisasm" in note for note in record["notes"])
    assert not list(tmp_path.rglob("record.json"))  # degraded results are not cached


def test_a_triton_compile_error_is_summarised_by_its_cause():
    # Triton puts the position first, then the source line and a caret, and the cause alone last.
    from pytest_tesserabench.inspect.summary import error_summary

    error = (
        "CompilationError: at 3:25:\n    offsets = tl.arange(0, BLOCK)\n                         ^\n"
        "arange's range must be a power of 2"
    )
    assert error_summary(error) == "CompilationError: at 3:25: ... arange's range must be a power of 2"
    # other errors as before: the last "...Error:" line, or the only line
    assert (
        error_summary("ptxas fatal   : Unresolved extern function 'f'")
        == "ptxas fatal   : Unresolved extern function 'f'"
    )
    assert error_summary("RuntimeError: out of resources") == "RuntimeError: out of resources"
