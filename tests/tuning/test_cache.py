"""The persistent tuning cache: keys, readable JSON, invalidation, corrupt files, concurrent writers."""

import importlib.util
import json
import multiprocessing
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from pytest_tesserabench.record import files
from pytest_tesserabench.tuning.cache import (
    TuningCache,
    TuningCacheWarning,
    entry_key,
    kernel_source_hash,
    key_of,
)


def entry(kernel="matmul", source_hash="aaaaaaaaaaaa", M=4096, arch="sm_90", triton="3.6.0", **extra):
    return {
        "kernel": kernel,
        "source_hash": source_hash,
        "bucket": {"M": M, "N": 4096, "K": 4096},
        "shape": {"M": M, "N": 4096, "K": 4096},
        "dtypes": ["bf16"],
        "arch": arch,
        "triton": triton,
        "config": {"BLOCK_SIZE_M": 128, "num_warps": 8},
        "median_ms": 0.25,
        "method": "measured",
        **extra,
    }


def test_the_key_names_kernel_dtypes_bucket_arch_triton_and_source():
    key = entry_key("matmul", "abc123abc123", {"N": 4096, "M": 2048, "K": 512}, ["bf16"], "sm_90", "3.6.0")
    assert key == "matmul bf16 K=512,M=2048,N=4096 sm_90 triton-3.6.0 src-abc123abc123"
    keys = {key_of(entry(**change)) for change in ({}, {"M": 2048}, {"arch": "sm_80"}, {"triton": "3.9.0"})}
    keys |= {key_of(entry(source_hash="bbbbbbbbbbbb")), key_of(entry(kernel="attention"))}
    assert len(keys) == 6  # every part of the key tells entries apart


def test_entries_round_trip_through_sorted_readable_json(tmp_path):
    cache = TuningCache(tmp_path / "tuning_cache.json")
    assert cache.load() == {} and cache.find("matmul", "aaaaaaaaaaaa", {"M": 4096}, ["bf16"], "sm_90", "3.6.0") is None
    cache.record(entry(arch="sm_90"))
    cache.record(entry(arch="sm_80"))
    text = cache.path.read_text()
    data = json.loads(text)
    assert data["schema"] == 1 and len(data["entries"]) == 2
    assert text == files.dumps(data)  # diff-friendly: sorted, indented, as every committed file
    found = cache.find("matmul", "aaaaaaaaaaaa", {"M": 4096, "N": 4096, "K": 4096}, ["bf16"], "sm_80", "3.6.0")
    assert found["config"] == {"BLOCK_SIZE_M": 128, "num_warps": 8}
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic writer left no temporary behind


def test_a_changed_kernel_source_invalidates_its_entries(tmp_path):
    cache = TuningCache(tmp_path / "cache.json")
    cache.record(entry(source_hash="old000000000", arch="sm_90"))
    cache.record(entry(source_hash="old000000000", arch="sm_80"))
    cache.record(entry(kernel="attention", source_hash="old000000000"))
    assert cache.find("matmul", "new000000000", {"M": 4096, "N": 4096, "K": 4096}, ["bf16"], "sm_90", "3.6.0") is None
    dropped = cache.record(entry(source_hash="new000000000", arch="sm_90"))
    assert dropped == 2  # both old matmul entries; the attention entry is another kernel's
    kernels = sorted((e["kernel"], e["source_hash"]) for e in cache.load().values())
    assert kernels == [("attention", "old000000000"), ("matmul", "new000000000")]


def _write_module(folder: Path, name: str, body: str):
    """The module ``hash_kernels`` as the file ``name`` holds it: one kernel module, edited."""
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    spec = importlib.util.spec_from_file_location("hash_kernels", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["hash_kernels"] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["hash_kernels"]
    return module


KERNEL = """
import triton
import triton.language as tl

{prefix}
@triton.jit
def _helper(x):
    return x {op} 1


@triton.jit
def kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, _helper(tl.load(x_ptr + offs)))
"""


def test_the_source_hash_follows_the_kernel_and_its_jit_callees_only(tmp_path):
    base = _write_module(tmp_path, "hash_base", KERNEL.format(prefix="", op="+"))
    moved = _write_module(tmp_path, "hash_moved", KERNEL.format(prefix="# a comment\n\n\nUNRELATED = 3\n", op="+"))
    callee = _write_module(tmp_path, "hash_callee", KERNEL.format(prefix="", op="-"))
    assert kernel_source_hash(base.kernel) == kernel_source_hash(moved.kernel)  # lines moved, code the same
    assert kernel_source_hash(base.kernel) != kernel_source_hash(callee.kernel)  # a called @jit function changed
    assert len(kernel_source_hash(base.kernel)) == 12


def test_a_corrupt_cache_is_ignored_with_a_warning_and_rewritten_atomically(tmp_path):
    path = tmp_path / "tuning_cache.json"
    path.write_text('{"schema": 1, "entries": {"matmul ...": ')  # cut off mid-write
    cache = TuningCache(path)
    with pytest.warns(TuningCacheWarning, match=r"tuning_cache.json: the tuning cache is not valid JSON.*ignoring it"):
        assert cache.load() == {}
    with pytest.warns(TuningCacheWarning, match=r"a copy is kept at .*tuning_cache.json.corrupt"):
        cache.record(entry())
    assert len(json.loads(path.read_text())["entries"]) == 1
    assert path.with_name("tuning_cache.json.corrupt").read_text().startswith('{"schema": 1, "entries"')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(TuningCache(path).load()) == 1  # clean again: no warning


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"schema": 2, "entries": {}}', "not a tuning cache of schema 1"),
        ("[1, 2]", "not a tuning cache of schema 1"),
        ('{"schema": 1, "entries": {"x": {"kernel": "matmul"}}}', "1 malformed entry"),
        (b"\xff\xfe{\x00", "encoded as UTF-16"),
    ],
)
def test_other_unusable_files_warn_and_read_as_empty(tmp_path, content, message):
    path = tmp_path / "cache.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.warns(TuningCacheWarning, match=message):
        assert TuningCache(path).load() == {}


def _writer(path: str, worker: int, count: int) -> None:
    cache = TuningCache(path)
    for i in range(count):
        cache.record(entry(M=16 * (worker * 1000 + i + 1)))


def test_concurrent_writers_lose_no_entries(tmp_path):
    path = tmp_path / "tuning_cache.json"
    workers, per_worker = 4, 15
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_writer, args=(str(path), w, per_worker)) for w in range(workers)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [p.exitcode for p in processes] == [0] * workers
    assert len(TuningCache(path).load()) == workers * per_worker
