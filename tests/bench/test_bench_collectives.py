"""Collective communication over torch.distributed: all-reduce, all-gather, reduce-scatter,
all-to-all, broadcast and send/recv over message sizes and dtypes, each with its algorithm and bus
bandwidth as nccl-tests defines them (pytest_tesserabench.distributed.collectives); all-reduce on each
dimension of a device mesh; and a row-parallel linear layer (matmul, then all-reduce) whose times
at several world sizes give its strong scaling.

    torchrun --nproc-per-node=4 -m pytest tests/bench/test_bench_collectives.py --bench

Without torchrun every test runs on a one-rank group (gloo without a GPU, NCCL with one): a
correctness check of each operation; send/recv and multi-rank meshes skip with the command to use.
"""

import pytest
import suite_config as cfg
import torch

from pytest_tesserabench.distributed import collectives


def _measure(bench, dist, op, size, dtype, *, group=None, name=None):
    try:
        collective = collectives.prepare(op, size, dtype, group, device=dist.device)
    except collectives.Unsupported as exc:
        pytest.skip(str(exc))
    collective.check()  # the operation's result, on data that differs per rank
    bench(collective, collective.buffers, name=name, comm_bytes=collective.nbytes, bus_factor=collective.bus_factor)


@pytest.mark.bench_sizes(size=cfg.COLLECTIVE_SIZES)
@pytest.mark.bench_precision(*cfg.COLLECTIVE_PRECISIONS)
def test_all_reduce(bench, dist, size, precision):
    _measure(bench, dist, "all_reduce", size, precision.dtype)


@pytest.mark.bench_sizes(size=cfg.COLLECTIVE_SIZES)
@pytest.mark.bench_precision(*cfg.COLLECTIVE_PRECISIONS)
def test_all_gather(bench, dist, size, precision):
    _measure(bench, dist, "all_gather", size, precision.dtype)


@pytest.mark.bench_sizes(size=cfg.COLLECTIVE_SIZES)
@pytest.mark.bench_precision(*cfg.COLLECTIVE_PRECISIONS)
def test_reduce_scatter(bench, dist, size, precision):
    _measure(bench, dist, "reduce_scatter", size, precision.dtype)


@pytest.mark.bench_sizes(size=cfg.COLLECTIVE_SIZES)
@pytest.mark.bench_precision(*cfg.COLLECTIVE_PRECISIONS)
def test_all_to_all(bench, dist, size, precision):
    _measure(bench, dist, "all_to_all", size, precision.dtype)


@pytest.mark.bench_sizes(size=cfg.COLLECTIVE_SIZES)
@pytest.mark.bench_precision(*cfg.COLLECTIVE_PRECISIONS)
def test_broadcast(bench, dist, size, precision):
    _measure(bench, dist, "broadcast", size, precision.dtype)


@pytest.mark.bench_sizes(size=cfg.COLLECTIVE_SIZES)
@pytest.mark.bench_precision(*cfg.COLLECTIVE_PRECISIONS)
def test_send_recv(bench, dist, size, precision):
    dist.require(world_size=2)
    _measure(bench, dist, "send_recv", size, precision.dtype)


@pytest.mark.bench_mesh("dp", "tp")
@pytest.mark.bench_sizes(size=cfg.MESH_SIZES)
def test_mesh_all_reduce(bench, dist, mesh, size):
    """An all-reduce inside each mesh dimension's groups, every group at once (tp inside a node,
    dp across, when tp is last and no larger than a node)."""
    dims = [name for name in mesh.mesh_dim_names if mesh[name].size() > 1]
    if not dims:
        dist.require(world_size=2)
    for name in dims:
        _measure(bench, dist, "all_reduce", size, torch.float32, group=mesh.get_group(name), name=f"{name} all_reduce")


@pytest.mark.bench_sizes(cfg.TP_LINEAR)
def test_row_parallel_linear(bench, dist, M, K, N):
    """y = x @ w with K split over the ranks: each multiplies its slice, an all-reduce sums them."""
    n = dist.world_size
    if K % n:
        pytest.skip(f"K={K} does not split over {n} ranks")
    dtype = torch.bfloat16 if dist.device.type == "cuda" else torch.float32
    # The same full operands on every rank; positive, so no cancellation blurs the comparison.
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(M, K, generator=generator).to(dist.device, dtype)
    w = torch.rand(K, N, generator=generator).to(dist.device, dtype)
    part = slice(dist.rank * K // n, (dist.rank + 1) * K // n)
    x_part, w_part = x[:, part].contiguous(), w[part].contiguous()

    def row_parallel():
        y = x_part @ w_part
        torch.distributed.all_reduce(y)
        return y

    out = bench(row_parallel, flops=2 * M * K * N)
    bench.check_accuracy(out, x.double() @ w.double(), "bf16" if dtype == torch.bfloat16 else "fp32")
