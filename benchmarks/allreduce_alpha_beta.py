"""All-reduce against the alpha-beta model: on paper for NVLink systems, measured here with gloo.

Model (Hockney's alpha-beta; n ranks, S bytes, per-step latency alpha, per-rank link bandwidth B
in each direction, a fixed launch cost alpha0):

    ring:  t = alpha0 + 2(n-1) alpha + 2(n-1)/n * S/B          (reduce-scatter, then all-gather)
    tree:  t = alpha0 + 2 ceil(log2 n) alpha + 2 S/B            (pipelined reduce, then broadcast)
    busbw = 2(n-1)/n * S / t                                     (nccl-tests' definition)

Part 1 prints the expected bus bandwidth against S for 8 GPUs over NVLink 4 (H100 SXM) and 72
GPUs in one NVLink 5 domain (GB200 NVL72), with the figures docs/distributed.md sources.

Part 2 measures this machine's loopback link the way the model describes a link: alpha is half
the round trip of a 1-byte TCP ping-pong between two processes over 127.0.0.1, B the throughput
of a 256 MiB one-way TCP stream (gloo's transport is TCP). It then runs the collective suite under
torchrun with gloo (n = 2 and 4) and prints the measured all-reduce bus bandwidth beside the ring
model's for those parameters (gloo's allreduce is a ring, gloo/allreduce.cc), and the send/recv
benchmark (one ring step: each rank sends S to the next) beside alpha + S/B.

    .venv/bin/python benchmarks/allreduce_alpha_beta.py [--ranks 2 4] [--max-time 0.5]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

# NVLink systems (docs/distributed.md gives the sources). B is per direction: half the quoted
# bidirectional per-GPU figure. alpha and alpha0: NCCL's own tuning model (src/graph/tuning.cc,
# Simple protocol): hwLat[NVLINK][RING] = 3.4 us per step, [TREE] = 4.0 us, baseLat = 8.4 us.
SYSTEMS = {
    "8x H100 SXM, NVLink 4 (900 GB/s per GPU)": {"n": 8, "B": 450e9},
    "72x B200, NVL72 NVLink 5 (1.8 TB/s per GPU)": {"n": 72, "B": 900e9},
}
NCCL_ALPHA0, NCCL_ALPHA_RING, NCCL_ALPHA_TREE = 8.4e-6, 3.4e-6, 4.0e-6


def ring_time(S: float, n: int, alpha: float, B: float, alpha0: float = 0.0) -> float:
    return alpha0 + 2 * (n - 1) * alpha + 2 * (n - 1) / n * S / B


def tree_time(S: float, n: int, alpha: float, B: float, alpha0: float = 0.0) -> float:
    return alpha0 + 2 * math.ceil(math.log2(n)) * alpha + 2 * S / B


def busbw(S: float, n: int, t: float) -> float:
    return 2 * (n - 1) / n * S / t


def size_label(S: int) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if S >= scale:
            return f"{S // scale} {unit}"
    return f"{S} B"


def on_paper() -> None:
    sizes = [KiB * 4**k for k in range(11)]  # 1 KiB .. 1 GiB
    for name, system in SYSTEMS.items():
        n, B = system["n"], system["B"]
        print(f"\n{name}: n = {n}, B = {B / 1e9:.0f} GB/s per direction, alpha0 = 8.4 us, alpha ring 3.4 / tree 4.0 us")
        print("| S | ring t | ring busbw GB/s | tree t | tree busbw GB/s |")
        print("|---:|---:|---:|---:|---:|")
        for S in sizes:
            tr = ring_time(S, n, NCCL_ALPHA_RING, B, NCCL_ALPHA0)
            tt = tree_time(S, n, NCCL_ALPHA_TREE, B, NCCL_ALPHA0)
            print(
                f"| {size_label(S)} | {tr * 1e6:.1f} us | {busbw(S, n, tr) / 1e9:.1f} "
                f"| {tt * 1e6:.1f} us | {busbw(S, n, tt) / 1e9:.1f} |"
            )
        half = n * (2 * (n - 1) * NCCL_ALPHA_RING + NCCL_ALPHA0) * B / (2 * (n - 1))
        print(f"ring reaches half its peak bus bandwidth at S = {half / MiB:.1f} MiB")


def measure(n: int, sizes: list[int], max_time: float, out: Path) -> dict:
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
        "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/bench/test_bench_collectives.py",
        "-k", "fp32 and (test_all_reduce or test_send_recv)", "--bench", f"--bench-max-time={max_time}",
        f"--bench-json={out}",
    ]  # fmt: skip
    env = {**os.environ, "TESSERABENCH_COLLECTIVE_SIZES": ",".join(map(str, sizes))}
    print(f"\n$ TESSERABENCH_COLLECTIVE_SIZES={env['TESSERABENCH_COLLECTIVE_SIZES']} {' '.join(command[1:])}")
    subprocess.run(command, cwd=REPO, env=env, check=True, capture_output=True, text=True)
    times: dict = {"all_reduce": {}, "send_recv": {}}
    for record_id, record in json.loads(out.read_text())["benchmarks"].items():
        op = "all_reduce" if "test_all_reduce" in record_id else "send_recv"
        times[op][int(record["params"]["size"])] = record["stats"]["median_ms"] / 1e3
    return times


def _loopback_peer(port: int, stream_bytes: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while conn.recv(1) == b"p":  # ping-pong until told otherwise
            conn.sendall(b"p")
        received, buffer = 0, bytearray(1 << 20)
        while received < stream_bytes:
            received += conn.recv_into(buffer)
        conn.sendall(b"k")


def loopback_parameters(repeats: int = 3) -> tuple[float, float]:
    """(alpha, B) of TCP over 127.0.0.1: the median alpha and the best B of ``repeats`` tries (other
    work on the machine only ever slows a stream down)."""
    tries = [loopback_once() for _ in range(repeats)]
    return float(np.median([alpha for alpha, _ in tries])), max(bandwidth for _, bandwidth in tries)


def loopback_once(pings: int = 5000, stream_bytes: int = 256 * MiB) -> tuple[float, float]:
    """(alpha seconds, B bytes per second) of TCP over 127.0.0.1 between two processes."""
    import multiprocessing
    import time

    with socket.create_server(("127.0.0.1", 0)) as server:
        peer = multiprocessing.Process(target=_loopback_peer, args=(server.getsockname()[1], stream_bytes))
        peer.start()
        conn, _ = server.accept()
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        round_trips = []
        for _ in range(pings):
            t0 = time.perf_counter()
            conn.sendall(b"p")
            conn.recv(1)
            round_trips.append(time.perf_counter() - t0)
        conn.sendall(b"s")
        chunk = bytes(1 << 20)
        t0 = time.perf_counter()
        for _ in range(stream_bytes // len(chunk)):
            conn.sendall(chunk)
        conn.recv(1)
        seconds = time.perf_counter() - t0
    peer.join()
    return float(np.median(round_trips)) / 2, stream_bytes / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--max-time", type=float, default=0.5, help="--bench-max-time per benchmark")
    parser.add_argument("--sizes", default=",".join(str(KiB * 4**k) for k in range(8)), help="bytes, 1 KiB..16 MiB")
    args = parser.parse_args()
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print("\n## On paper")
    on_paper()
    print("\n## Measured: gloo over loopback on this machine")
    sizes = [int(s) for s in args.sizes.split(",")]
    alpha, B = loopback_parameters()
    print(
        f"loopback TCP: alpha = {alpha * 1e6:.1f} us (half a 1-byte round trip, median of 3), "
        f"B = {B / 1e9:.2f} GB/s one way (best of 3 streams of 256 MiB)"
    )
    with tempfile.TemporaryDirectory() as folder:
        for n in args.ranks:
            times = measure(n, sizes, args.max_time, Path(folder) / f"ws{n}.json")
            print(f"\nn = {n}")
            print(
                "| S | send/recv t | model alpha + S/B | all-reduce t | ring model t | measured busbw GB/s "
                "| model busbw GB/s | measured / model |"
            )
            print("|---:|---:|---:|---:|---:|---:|---:|---:|")
            for S in sizes:
                t = times["all_reduce"][S]
                model = ring_time(S, n, alpha, B)
                print(
                    f"| {size_label(S)} | {times['send_recv'][S] * 1e6:.0f} us | {(alpha + S / B) * 1e6:.0f} us "
                    f"| {t * 1e6:.0f} us | {model * 1e6:.0f} us | {busbw(S, n, t) / 1e9:.3f} "
                    f"| {busbw(S, n, model) / 1e9:.3f} | {model / t:.2f} |"
                )
    print(f"\nload average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
