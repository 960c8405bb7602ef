"""Compile the kernels ahead of time for sm_90 and print a JSON summary (run without a GPU).

Run as a script with TRITON_INTERPRET unset: under the interpreter ``@triton.jit`` helpers are
interpreted functions, which the compiler cannot inline. test_aot_sm90.py drives it.
"""

import json
import sys

from kernels import attention, layernorm, matmul, softmax
from kernels._common import compile_for_target

C = "constexpr"


def _matmul_tma(elem, out, bk, b_k_major):
    b_block = f"[256,{bk}]" if b_k_major else f"[{bk},256]"
    sig = {
        "a_desc": f"tensordesc<{elem}[128,{bk}]>",
        "b_desc": f"tensordesc<{elem}{b_block}>",
        "c_desc": f"tensordesc<{out}[128,128]>",
        "scale_a_ptr": "*fp32",
        "scale_b_ptr": "*fp32",
        "M": "i32",
        "N": "i32",
        "K": "i32",
    }
    const = dict(
        HAS_SCALES=elem.startswith("fp8"),
        B_K_MAJOR=b_k_major,
        NUM_SMS=132,
        BLOCK_SIZE_M=128,
        BLOCK_SIZE_N=256,
        BLOCK_SIZE_K=bk,
        GROUP_SIZE_M=8,
        EPILOGUE_SUBTILE=True,
    )
    return matmul._matmul_kernel_tma_persistent, {**sig, **{k: C for k in const}}, const, 8, 3


def _matmul_pointer(elem, out, bk, b_k_major):
    """b_k_major: B column-major (K contiguous), the layout fp8 tensor cores read."""
    b_strides = {"stride_bk": C, "stride_bn": "i32"} if b_k_major else {"stride_bk": "i32", "stride_bn": C}
    sig = {
        "a_ptr": f"*{elem}",
        "b_ptr": f"*{elem}",
        "c_ptr": f"*{out}",
        "scale_a_ptr": "*fp32",
        "scale_b_ptr": "*fp32",
        "M": "i32",
        "N": "i32",
        "K": "i32",
        "stride_am": "i32",
        "stride_ak": C,
        **b_strides,
        "stride_cm": "i32",
        "stride_cn": C,
    }
    const = dict(
        stride_ak=1,
        stride_cn=1,
        **{k: 1 for k, t in b_strides.items() if t == C},
        HAS_SCALES=elem.startswith("fp8"),
        ALLOW_TF32=False,
        BLOCK_SIZE_M=128,
        BLOCK_SIZE_N=256,
        BLOCK_SIZE_K=bk,
        GROUP_SIZE_M=8,
    )
    return matmul._matmul_kernel, {**sig, **{k: C for k in const}}, const, 8, 3


def _attention(elem, head_dim, causal):
    names = ["q_ptr", "k_ptr", "v_ptr", "o_ptr"]
    sig = {n: f"*{elem}" for n in names}
    sig.update(sm_scale="fp32", H="i32", N_CTX="i32")
    for t in "qkvo":
        for s in ("z", "h", "m" if t in "qo" else "n"):
            sig[f"stride_{t}{s}"] = "i32"
        sig[f"stride_{t}k"] = C
    const = {f"stride_{t}k": 1 for t in "qkvo"}
    const.update(HEAD_DIM=head_dim, CAUSAL=causal, BLOCK_M=128, BLOCK_N=128 if head_dim == 128 else 64)
    sig.update({k: C for k in const})
    return attention._attn_fwd_kernel, sig, const, 8, 3


def specs():
    out = {}
    out["matmul_tma_bf16"] = _matmul_tma("bf16", "bf16", 64, False)
    out["matmul_tma_fp8_e4m3"] = _matmul_tma("fp8e4nv", "bf16", 128, True)
    out["matmul_pointer_fp16"] = _matmul_pointer("fp16", "fp16", 64, False)
    out["matmul_pointer_fp8_e5m2"] = _matmul_pointer("fp8e5", "bf16", 128, True)
    out["attention_bf16_d128_causal"] = _attention("bf16", 128, True)
    out["attention_fp16_d64"] = _attention("fp16", 64, False)
    sig = {"x_ptr": "*bf16", "y_ptr": "*bf16", "n_rows": "i32", "n_cols": "i32", "stride_x": "i32", "stride_y": "i32"}
    out["softmax_rows_bf16"] = (softmax._softmax_row_kernel, {**sig, "BLOCK": C}, {"BLOCK": 8192}, 16, 1)
    sig = {
        "x_ptr": "*bf16",
        "w_ptr": "*bf16",
        "b_ptr": "*bf16",
        "y_ptr": "*bf16",
        "n_rows": "i32",
        "n_cols": "i32",
        "stride_x": "i32",
        "stride_y": "i32",
        "eps": "fp32",
    }
    const = dict(RMS=False, HAS_WEIGHT=True, HAS_BIAS=True, BLOCK=8192)
    out["layer_norm_rows_bf16"] = (layernorm._norm_row_kernel, {**sig, **{k: C for k in const}}, const, 16, 1)
    return out


def main(names):
    results = {}
    for name, (fn, sig, const, warps, stages) in specs().items():
        if names and name not in names:
            continue
        try:
            compiled = compile_for_target(fn, sig, const, arch=90, num_warps=warps, num_stages=stages)
        except Exception as exc:  # reported, the test fails with the message
            results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
            continue
        ptx = compiled.asm["ptx"]
        results[name] = {
            "ok": True,
            "shared": compiled.metadata.shared,
            "wgmma": ptx.count("wgmma.mma_async"),
            "tma_load": ptx.count("cp.async.bulk.tensor"),
            "fp32_adds": ptx.count("add.f32") + ptx.count("add.rn.f32"),
            "cubin_bytes": len(compiled.asm["cubin"]),
        }
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
