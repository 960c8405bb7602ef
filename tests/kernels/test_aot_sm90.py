"""Every kernel builds for sm_90 (Hopper), fp8 and TMA paths included, with no GPU present.

The build runs in a subprocess without TRITON_INTERPRET (see aot_build_sm90.py). The checks are
on what the compiler produced: Hopper tensor-core instructions (wgmma) in the matmul and
attention kernels, TMA bulk copies in the persistent matmul, software pipelining (several
stages of operand buffers in shared memory) and a fit in the 227 KiB an H100 block may use.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
H100_MAX_SHARED = 227 * 1024


@pytest.fixture(scope="module")
def built():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, str(HERE / "aot_build_sm90.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        pytest.fail(f"the sm_90 build script failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


KERNELS = [
    "matmul_tma_bf16",
    "matmul_tma_fp8_e4m3",
    "matmul_pointer_fp16",
    "matmul_pointer_fp8_e5m2",
    "attention_bf16_d128_causal",
    "attention_fp16_d64",
    "softmax_rows_bf16",
    "layer_norm_rows_bf16",
]


@pytest.mark.parametrize("name", KERNELS)
def test_builds_for_sm90_within_shared_memory(built, name):
    result = built[name]
    assert result["ok"], result.get("error")
    assert result["cubin_bytes"] > 0
    assert result["shared"] <= H100_MAX_SHARED


@pytest.mark.parametrize("name", [k for k in KERNELS if k.startswith(("matmul", "attention"))])
def test_uses_hopper_tensor_cores(built, name):
    assert built[name]["wgmma"] > 0


@pytest.mark.parametrize("name", ["matmul_tma_bf16", "matmul_tma_fp8_e4m3"])
def test_persistent_path_uses_tma(built, name):
    assert built[name]["tma_load"] > 0


def test_pointer_matmul_is_pipelined(built):
    # 128x64 A tile + 64x256 B tile in fp16 is 48 KiB a stage; 3 stages were asked for.
    assert built["matmul_pointer_fp16"]["shared"] >= 2 * 48 * 1024


def test_fp8_products_are_added_into_fp32_after_each_k_tile(built):
    # Hopper's fp8 tensor cores accumulate with fewer bits than fp32: each K tile's product is
    # added into the fp32 accumulator (max_num_imprecise_acc); bf16's accumulate in fp32 already.
    for fp8 in ("matmul_tma_fp8_e4m3", "matmul_pointer_fp8_e5m2"):
        assert built[fp8]["fp32_adds"] > 0, fp8
    assert built["matmul_tma_bf16"]["fp32_adds"] == 0
