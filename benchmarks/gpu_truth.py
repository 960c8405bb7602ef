"""GPU truth in one short device run: `./dev gpu truth` (on the GPU machine) or `--dry-run` (here).

A device run is short and cannot be repeated at will, so one command does the whole check, in
priority order, each part with its own deadline, and writes what it finished as it goes:

  install   pip install --no-deps --no-build-isolation -e .  (the device has no network)
  device    the device, driver, clocks, versions, NVML and measured peaks; then the tests that
            only a GPU runs (kernels on the device, CUDA timers, tuning, NCCL), -n 4
  timers    four kernels from ~5 us to ~2 ms: bench's CUDA-event and CUDA-graph timers,
            triton.testing.do_bench and Nsight Compute's gpu__time_duration, medians side by side;
            then ncu's occupancy, DRAM and SM throughput of the attention and the matmul
  vendor    the project's kernels against the vendor's, interleaved: bf16 matmul vs torch.matmul,
            fp8 e4m3 vs torch._scaled_mm, attention vs SDPA, softmax / layer norm / RMS norm vs
            torch and vs a device-to-device copy's bandwidth; each output checked against its
            reference
  static    every project kernel as loaded on the device (registers, spills, shared memory)
            beside the static analysis of the same specialization for the device's arch; and
            bench()'s async check against a matmul launched on a side stream
  baseline  three --bench-save=main runs of a reduced suite, then --bench-compare=main of the
            same code (which must pass)
  plugin    one test through the plugin with --bench-ncu, --bench-trace and --bench-peaks=measure
  ab        if time remains: A/A with --bench-ab=HEAD at 1 and 8 processes per side

Everything lands in a work folder: truth.json (every part's status, seconds and results,
rewritten after each part), truth.log, one log and JSON file per part or subprocess, the baseline
folder. The device tool returns at most 8 files from $OUT, so under $OUT the work folder is
/tmp/tesserabench-truth and after each part it is packed into $OUT/truth.tar.gz (truth.json and
truth.log are copied beside it). A part runs only while the budget leaves it its minimum; a part
cut by its deadline keeps what it had written.

`--dry-run` runs the same code on a machine without a GPU: kernels in the Triton interpreter at
tiny sizes, CPU timers standing in for the CUDA timers and do_bench, ncu and the loaded-kernel
figures skipped with a line saying so, the GPU tests only collected. The test suite runs it, so
a typo costs no device time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the kernels package is not installed; it lives at the root
    sys.path.insert(0, str(ROOT))

# The tests only a GPU runs (elsewhere they skip or run in the interpreter).
GPU_TESTS = (
    "tests/kernels",
    "tests/plugin/test_timing.py",
    "tests/tuning/test_gpu.py",
    "tests/inspect/test_capture_cli.py",
    "tests/distributed/test_torchrun.py::test_nccl_on_one_gpu_runs_and_records",
)

# The reduced suite a GPU baseline is saved from: one point per kernel family, at the sizes the
# targets are stated for (on the device), or the interpreter's tiny sizes (dry run).
BASELINE_TESTS = {
    "device": (
        "tests/bench/test_bench_matmul.py::test_matmul_square[M4096-bf16]",
        "tests/bench/test_bench_matmul.py::test_matmul_fp8_square[M4096-fp8_e4m3]",
        "tests/bench/test_bench_attention.py::test_attention[B4-H16-S4096-D128-bf16-full]",
        "tests/bench/test_bench_rows.py::test_softmax[R4096-C8192-bf16]",
        "tests/bench/test_bench_rows.py::test_rms_norm[R4096-C8192-bf16]",
    ),
    "dry": ("tests/bench/test_bench_rows.py::test_softmax[R16-C512-bf16]",),
}
AB_TESTS = {
    "device": (
        "tests/bench/test_bench_matmul.py::test_matmul_square[M4096-bf16]",
        "tests/bench/test_bench_rows.py::test_softmax[R4096-C8192-bf16]",
    ),
    "dry": ("tests/bench/test_bench_rows.py::test_softmax[R16-C512-bf16]",),
}

# name -> (longest it may take, least it needs to start), seconds
PARTS = {
    "install": (60, 5),
    "device": (90, 20),
    "timers": (110, 25),
    "vendor": (90, 30),
    "static": (60, 15),
    "baseline": (240, 60),
    "plugin": (90, 30),
    "ab": (200, 60),
}


# ---- the orchestrator ------------------------------------------------------------------------


class Truth:
    """truth.json and truth.log, rewritten as the parts finish."""

    def __init__(self, out: Path, dry: bool, budget: float, archive: Path | None = None):
        self.out, self.dry, self.budget, self.archive = out, dry, budget, archive
        self.started = time.monotonic()
        out.mkdir(parents=True, exist_ok=True)
        self.document = {
            "dry_run": dry,
            "budget_s": budget,
            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "parts": {},
        }
        self.log_path = out / "truth.log"
        self.log_path.write_text("")

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.started)

    def say(self, line: str) -> None:
        stamped = f"[{time.monotonic() - self.started:6.1f} s] {line}"
        print(stamped, flush=True)
        with open(self.log_path, "a") as log:
            log.write(stamped + "\n")

    def record(self, part: str, entry: dict) -> None:
        self.document["parts"][part] = entry
        self.document["elapsed_s"] = round(time.monotonic() - self.started, 1)
        path = self.out / "truth.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.document, indent=1, sort_keys=True, default=str))
        tmp.replace(path)
        self.pack()

    def pack(self) -> None:
        """The work folder as one archive (and the summary beside it): what a cut run returns."""
        if self.archive is None:
            return
        self.archive.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.archive.with_name(self.archive.name + ".tmp")
        with tarfile.open(tmp, "w:gz") as archive:
            archive.add(self.out, arcname="truth")
        tmp.replace(self.archive)
        for name in ("truth.json", "truth.log"):
            shutil.copyfile(self.out / name, self.archive.parent / name)


def child_env(dry: bool, plugin_installed: bool) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["TRITON_CACHE_AUTOTUNING"] = "1"  # a later process reuses the autotuner's choice
    env["TESSERABENCH_SUITE_NO_COMPILE"] = "1"  # torch.compile's first compile alone would eat a part
    env.pop("PYTEST_XDIST_WORKER", None)
    if not plugin_installed:
        env["PYTEST_ADDOPTS"] = (env.get("PYTEST_ADDOPTS", "") + " -p pytest_tesserabench.plugin").strip()
    return env


def run_logged(truth: Truth, name: str, command: list[str], timeout: float, env: dict) -> int:
    """A subprocess with its output in OUT/<name>.log; 124 when it ran past ``timeout``."""
    log = truth.out / f"{name}.log"
    truth.say(f"{name}: {' '.join(command)} (at most {timeout:.0f} s)")
    started = time.monotonic()
    with open(log, "w") as stream:
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=stream, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            code = process.wait(timeout=max(timeout, 1))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 9)  # the whole group: pytest workers and served processes too
            process.wait()
            code = 124
    tail = log.read_text(errors="replace").strip().splitlines()[-6:]
    truth.say(f"{name}: exit {code} in {time.monotonic() - started:.0f} s; last lines:")
    for line in tail:
        truth.say(f"    {line[:300]}")
    return code


def pytest_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", *args]


def part_install(truth: Truth) -> dict:
    if truth.dry:
        return {"status": "skipped", "reason": "dry run: the package is already importable here"}
    code = run_logged(
        truth,
        "install",
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-e", "."],
        PARTS["install"][0],
        dict(os.environ),
    )
    return {"status": "done" if code == 0 else "failed", "exit": code}


def plugin_is_installed() -> bool:
    probe = (
        "import importlib.metadata as m; print(any(e.name == 'tesserabench' for e in m.entry_points(group='pytest11')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    return done.stdout.strip() == "True"


def run_in_child(truth: Truth, part: str, timeout: float, env: dict) -> dict:
    """Parts that measure run in a process of their own: a hang or a crash costs only that part."""
    result_path = truth.out / f"part-{part}.json"
    result_path.unlink(missing_ok=True)
    command = [sys.executable, str(Path(__file__).resolve()), "--part", part, "--out", str(truth.out)]
    if truth.dry:
        command.append("--dry-run")
    code = run_logged(truth, part, command, timeout, env)
    results = json.loads(result_path.read_text()) if result_path.exists() else {}
    status = "done" if code == 0 else ("cut" if code == 124 else "failed")
    return {"status": status, "exit": code, **results}


def part_device(truth: Truth, timeout: float, env: dict) -> dict:
    entry = run_in_child(truth, "device", min(timeout, 30), env)
    args = ["-q", "-rs", "--durations=10", *GPU_TESTS]
    if truth.dry:
        args.append("--co")  # the list is valid; running it is the device's job
    else:
        args[:0] = ["-n", "4", "-v"]  # -v: each result is in the log as it happens
    left = timeout - entry.get("seconds", 0)
    entry["gpu_tests_exit"] = run_logged(truth, "gpu-tests", pytest_command(*args), left, env)
    if entry["gpu_tests_exit"] not in (0, 5) and entry["status"] == "done":
        entry["status"] = "failed"
    return entry


def part_baseline(truth: Truth, timeout: float, env: dict) -> dict:
    """Three saves, then a comparison of the same code. A missed performance target fails its test
    in every run (that is the vendor part's business): the comparison passes when the gate calls
    nothing REGRESSED."""
    tests = BASELINE_TESTS["dry" if truth.dry else "device"]
    folder = truth.out / "baselines"
    # No fresh processes: on the device each costs a process start and the kernels' compile-cache
    # loads, and three saves with one each did not fit the part's time.
    common = [*tests, f"--bench-dir={folder}", "--bench-max-time=0.3", "--bench-save-processes=0", "-q", "-rf"]
    deadline = time.monotonic() + timeout
    exits = []
    for run in (1, 2, 3, "compare"):
        mode = "--bench-compare=main" if run == "compare" else "--bench-save=main"
        name = "compare" if run == "compare" else f"save{run}"
        command = pytest_command(*common, mode, f"--bench-json={truth.out / f'{name}.json'}")
        exits.append(run_logged(truth, f"baseline-{name}", command, deadline - time.monotonic(), env))
        if exits[-1] == 124:
            break
    entry = {"exits": exits, "files": sorted(str(p.relative_to(truth.out)) for p in folder.rglob("*.json"))}
    compare = truth.out / "compare.json"
    if len(exits) < 4 or not compare.exists():
        return {"status": "cut" if exits[-1] == 124 else "failed", **entry}
    records = json.loads(compare.read_text())["benchmarks"].values()
    verdicts = {
        "::".join(filter(None, [r.get("nodeid"), r.get("name")])): (r.get("verdict") or {}).get("status")
        for r in records
    }
    entry["verdicts"] = verdicts
    entry["targets_missed"] = [
        f"{r.get('nodeid')}: {t['metric']} {t['ratio']:.3f}x {t['relative_to']} (needs {t['at_least']}x)"
        for r in records
        for t in r.get("targets") or ()
        if t.get("checked") and not t.get("met")
    ]
    entry["gate_passed"] = "REGRESSED" not in verdicts.values()
    # The dry run times CPU stand-ins beside whatever else the runner does (CI's other test
    # workers): what it proves is that the saves and the comparison run and write their verdicts,
    # not what the gate makes of microsecond timings on a shared CPU. On the device, a failed
    # gate fails the part.
    passed = entry["gate_passed"] or (truth.dry and exits[3] in (0, 1))
    return {"status": "done" if passed else "failed", **entry}


PLUGIN_TESTS = {
    "device": ("tests/bench/test_bench_rows.py::test_softmax[R4096-C8192-bf16]",),
    "dry": ("tests/bench/test_bench_rows.py::test_softmax[R16-C512-bf16]",),
}


def part_plugin(truth: Truth, timeout: float, env: dict) -> dict:
    """The plugin's GPU options in one run of one test: Nsight Compute counters (--bench-ncu), a
    Chrome trace per benchmark (--bench-trace), peaks measured on the device (--bench-peaks)."""
    traces = truth.out / "traces"
    run = truth.out / "plugin.json"
    code = run_logged(
        truth,
        "plugin",
        pytest_command(
            *PLUGIN_TESTS["dry" if truth.dry else "device"],
            "-q",
            "--bench",
            "--bench-max-time=0.3",
            "--bench-ncu",
            f"--bench-trace={traces}",
            "--bench-peaks=measure",
            f"--bench-json={run}",
        ),
        timeout,
        env,
    )
    entry = {"exit": code, "traces": sorted(path.name for path in traces.glob("*"))[:20]}
    if run.exists():
        records = json.loads(run.read_text())["benchmarks"].values()
        entry["ncu"] = {r.get("name") or "(first)": r.get("ncu") for r in records}
        entry["roofline"] = {r.get("name") or "(first)": r.get("roofline") for r in records}
    return {"status": "done" if code == 0 else ("cut" if code == 124 else "failed"), **entry}


def part_ab(truth: Truth, timeout: float, env: dict) -> dict:
    if subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True).returncode != 0:
        if truth.dry:
            return {"status": "skipped", "reason": "dry run outside a git checkout"}
        for git in (  # the device's copy of the tree is not a repository: make it one
            ["init", "-q"],
            ["add", "-A"],
            ["-c", "user.name=gpu", "-c", "user.email=gpu@local", "commit", "-qm", "snapshot"],
        ):
            subprocess.run(["git", *git], cwd=ROOT, check=True, capture_output=True)
    tests = AB_TESTS["dry" if truth.dry else "device"]
    deadline = time.monotonic() + timeout
    exits = {}
    for processes in (1,) if truth.dry else (1, 8):
        exits[processes] = run_logged(
            truth,
            f"ab-{processes}",
            pytest_command(
                *tests,
                "-q",
                "--bench-ab=HEAD",
                f"--bench-ab-processes={processes}",
                "--bench-max-time=0.5",
                f"--bench-json={truth.out / f'ab{processes}.json'}",
            ),
            deadline - time.monotonic(),
            env,
        )
    return {"status": "done" if all(code == 0 for code in exits.values()) else "failed", "exits": exits}


def orchestrate(out: Path, dry: bool, budget: float, only: set[str] | None, archive: Path | None = None) -> int:
    truth = Truth(out, dry, budget, archive)
    truth.say(f"gpu truth{' (dry run)' if dry else ''}: budget {budget:.0f} s, output in {out}")
    installed = True
    failed = []
    for part, (longest, least) in PARTS.items():
        if only is not None and part not in only:
            continue
        left = truth.left()
        if left < least:
            truth.say(f"{part}: not started, {left:.0f} s left and it needs {least} s")
            truth.record(part, {"status": "not started", "reason": f"{left:.0f} s of the budget left"})
            continue
        timeout = min(longest, left)
        started = time.monotonic()
        env = child_env(dry, installed)
        if part == "install":
            entry = part_install(truth)
            installed = dry or plugin_is_installed()
            entry["plugin_registered"] = installed
        elif part == "device":
            entry = part_device(truth, timeout, env)
        elif part == "baseline":
            entry = part_baseline(truth, timeout, env)
        elif part == "plugin":
            entry = part_plugin(truth, timeout, env)
        elif part == "ab":
            entry = part_ab(truth, timeout, env)
        else:
            entry = run_in_child(truth, part, timeout, env)
        entry["seconds"] = round(time.monotonic() - started, 1)
        truth.record(part, entry)
        truth.say(f"{part}: {entry['status']} in {entry['seconds']} s")
        if entry["status"] in ("failed", "cut"):
            failed.append(part)
    verdict = f"failed or cut: {', '.join(failed)}" if failed else "every part that ran passed"
    truth.say(f"done in {time.monotonic() - truth.started:.0f} s; {verdict}")
    return 1 if failed else 0


# ---- the measuring parts (each in its own process) --------------------------------------------


class Results:
    """OUT/part-<name>.json, rewritten after each figure: a part cut short keeps what it had."""

    def __init__(self, out: Path, part: str):
        self.path = out / f"part-{part}.json"
        self.data: dict = {"results": {}, "notes": []}
        self.started = time.monotonic()

    def put(self, key: str, value) -> None:
        self.data["results"][key] = value
        self.save()

    def note(self, line: str) -> None:
        print(line, flush=True)
        self.data["notes"].append(line)
        self.save()

    def save(self) -> None:
        self.data["seconds"] = round(time.monotonic() - self.started, 1)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True, default=str))
        tmp.replace(self.path)


def sizes(dry: bool) -> dict:
    """Problem sizes: the device's, or tiny ones the interpreter runs in seconds."""
    if dry:
        return {
            "add": 4096,
            "softmax": (16, 512),
            "attention": (1, 2, 64, 64),
            "matmul": (64, 128),
            "rows": (16, 512),
            "rows_long": 40,
        }
    return {
        "add": 1 << 20,  # 12 MB of traffic: about 5 us
        "softmax": (4096, 4096),
        "attention": (4, 16, 4096, 128),
        "matmul": (4096, 8192),
        "rows": (4096, 8192),
        "rows_long": 128256,  # past the register-resident limit: the looped kernels
    }


def _device(dry: bool) -> str:
    return "cpu" if dry else "cuda"


def timers_for(call, dry: bool) -> dict:
    """bench's two CUDA timers; CPU timers stand in for them in a dry run."""
    from pytest_tesserabench.measure.timing import CpuTimer, CudaEventTimer, CudaGraphTimer

    if dry:
        return {"cuda_event": CpuTimer(call), "cuda_graph": CpuTimer(call)}
    return {"cuda_event": CudaEventTimer(call, "cuda"), "cuda_graph": CudaGraphTimer(call, "cuda")}


def interleaved_medians(timers: dict, rounds: int, samples: int) -> dict:
    """Warm each timer, then rounds of ``samples`` in turn: a drift of the clocks hits all alike."""
    for timer in timers.values():
        seconds = max(timer.time_once() for _ in range(3))
        timer.calibrate(seconds)
    collected = {name: [] for name in timers}
    for _ in range(rounds):
        for name, timer in timers.items():
            collected[name] += timer.round(samples)
    return {name: statistics.median(values) for name, values in collected.items()}


def fidelity_kernels(dry: bool) -> dict:
    """name -> (zero-argument call, substring of the kernel's name in an ncu report)."""
    import torch

    from kernels import attention, matmul, softmax

    dev, size = _device(dry), sizes(dry)
    torch.manual_seed(0)
    x = torch.randn(size["add"], device=dev)
    y, z = torch.randn_like(x), torch.empty_like(x)
    rows = torch.randn(*size["softmax"], device=dev, dtype=torch.bfloat16)
    B, H, S, D = size["attention"]
    q, k, v = (torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
    n = size["matmul"][0]
    a, b = (torch.randn(n, n, device=dev, dtype=torch.bfloat16) for _ in range(2))
    mm = lambda: matmul.matmul(a, b)  # noqa: E731
    if not dry:
        # One fixed config: the autotuner, timing its candidates under ncu, can choose another
        # config than in the timing process, and the columns would compare two kernels.
        from pytest_tesserabench.tuning.space import Config

        config = Config(MATMUL_FIDELITY_CONFIG)
        c = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
        mm = lambda: matmul._launch_tma_persistent(a, b, c, config=config)  # noqa: E731
    return {
        "vector_add": (lambda: torch.add(x, y, out=z), "elementwise"),
        "softmax": (lambda: softmax.softmax(rows), "softmax"),
        "attention": (lambda: attention.attention(q, k, v), "attn"),
        "matmul_bf16": (mm, "matmul"),
    }


# The Triton tutorial's Hopper config for the TMA persistent kernel at 4096^3 bf16.
MATMUL_FIDELITY_CONFIG = {
    "BLOCK_SIZE_M": 128,
    "BLOCK_SIZE_N": 256,
    "BLOCK_SIZE_K": 64,
    "GROUP_SIZE_M": 8,
    "EPILOGUE_SUBTILE": False,
    "num_warps": 8,
    "num_stages": 3,
}


def part_device_info(results: Results, dry: bool) -> None:
    from pytest_tesserabench.machine import device as machine
    from pytest_tesserabench.machine import roofline, telemetry

    info = machine.machine_info()
    results.put("machine", info)
    results.put("machine_key", machine.machine_key(info))
    import triton

    results.put("triton", triton.__version__)
    smi = shutil.which("nvidia-smi")
    if smi:
        query = (
            "name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.limit,"
            "temperature.gpu,persistence_mode,compute_mode"
        )
        done = subprocess.run([smi, f"--query-gpu={query}", "--format=csv"], capture_output=True, text=True)
        results.put("nvidia_smi", done.stdout.strip() or done.stderr.strip())
    else:
        results.note("nvidia-smi is not on PATH: clocks from NVML only")
    probe = telemetry.Telemetry()
    probe.start()
    results.put("telemetry", probe.stop(calls=0))
    blocker = roofline.peaks_measurement_blocker()
    if blocker:
        results.note(f"measured peaks skipped: {blocker}")
        return
    with tempfile.TemporaryDirectory() as folder:
        started = time.monotonic()
        peaks = roofline.measure_peaks(folder)
        results.put("measured_peaks", peaks.to_json() if peaks else None)
        results.put("measured_peaks_seconds", round(time.monotonic() - started, 1))


NCU_CALLS = 5


def part_timers(results: Results, dry: bool, out: Path) -> None:
    from pytest_tesserabench.machine import telemetry

    kernels = fidelity_kernels(dry)
    for name, (call, _) in kernels.items():
        results.put(f"{name}/compile_and_first_call_s", _seconds(call, dry))
    for name, (call, _) in kernels.items():
        probe = telemetry.Telemetry()
        probe.start()
        row = interleaved_medians(timers_for(call, dry), *((2, 3) if dry else (5, 20)))
        if dry:
            row["do_bench"] = interleaved_medians({"do_bench": timers_for(call, dry)["cuda_event"]}, 2, 10)["do_bench"]
        else:
            import triton.testing

            row["do_bench"] = triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median")
        row["telemetry"] = probe.stop(calls=0)
        results.put(name, row)
    if dry:
        results.note("ncu skipped: dry run (no GPU); the ncu column comes from the device run")
        return
    from pytest_tesserabench.machine import profiling

    ncu = profiling.ncu_available()
    if ncu is None:
        results.note(f"ncu skipped: {profiling.ncu_skip_reason()}")
        return
    log = out / "ncu-timers.csv"
    child = [sys.executable, str(Path(__file__).resolve()), "--part", "ncu-child", "--out", str(out)]
    # clocks left as they are: those the other timers see
    command = profiling.ncu_argv(child, [profiling.GPU_TIME], ncu=ncu, log_file=log, clock_control="none")
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=os.environ.copy())
    results.put("ncu_seconds", round(time.monotonic() - started, 1))
    if done.returncode != 0:
        results.note(f"ncu exited {done.returncode}: {(done.stdout + done.stderr)[-1500:]}")
    text = log.read_text() if log.exists() else done.stdout
    try:
        per_kernel = ncu_ms_per_call(text, {name: match for name, (_, match) in kernels.items()}, NCU_CALLS)
    except profiling.NcuError as error:
        results.note(f"ncu gave nothing usable: {error}")
        return
    other = per_kernel.pop("other")
    if other is not None:
        results.note(f"ncu saw kernels of no fidelity kernel's name: {other:.4f} ms per call in all")
    for name, ms in per_kernel.items():
        row = dict(results.data["results"][name])
        row["ncu"] = ms
        results.put(name, row)
    ncu_counters(results, out, ncu, {name: kernels[name][1] for name in COUNTED_KERNELS})


# What limits the kernels that fall short of the vendor's (attention) beside one that does not.
COUNTED_KERNELS = ("attention", "matmul_bf16")
NCU_ONLY_ENV = "TESSERABENCH_TRUTH_NCU_ONLY"


def ncu_counters(results: Results, out: Path, ncu: str, matches: dict[str, str]) -> None:
    """Occupancy, DRAM and SM throughput of a few kernels, in a second ncu run: a counter that
    this ncu cannot collect then costs these figures, not the timing column above."""
    from pytest_tesserabench.machine import profiling

    log = out / "ncu-counters.csv"
    child = [sys.executable, str(Path(__file__).resolve()), "--part", "ncu-child", "--out", str(out)]
    command = profiling.ncu_argv(child, profiling.DEFAULT_METRICS, ncu=ncu, log_file=log, clock_control="none")
    started = time.monotonic()
    env = {**os.environ, NCU_ONLY_ENV: ",".join(matches)}
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env)
    results.put("ncu_counters_seconds", round(time.monotonic() - started, 1))
    if done.returncode != 0:
        results.note(f"ncu (counters) exited {done.returncode}: {(done.stdout + done.stderr)[-1500:]}")
    text = log.read_text() if log.exists() else done.stdout
    try:
        kernels = profiling.parse_ncu_csv(text)
    except profiling.NcuError as error:
        results.note(f"ncu (counters) gave nothing usable: {error}")
        return
    results.put("ncu_counters", counters_by_kernel(kernels, matches))


def counters_by_kernel(kernels: list[dict], matches: dict[str, str]) -> dict[str, dict]:
    """name -> the record's ncu summary of the launches whose kernel name holds its substring."""
    from pytest_tesserabench.machine import profiling

    return {
        name: profiling.summarize_ncu([kernel for kernel in kernels if match in kernel["name"]])
        for name, match in matches.items()
    }


def ncu_ms_per_call(csv_text: str, matches: dict[str, str], calls: int) -> dict[str, float | None]:
    """gpu__time_duration per call of each named kernel: the launches whose kernel name holds its
    substring, summed, over ``calls``. Launches matching no name are summed under "other" (a
    kernel we did not expect ran inside the profiled range: say so beside the figures)."""
    from pytest_tesserabench.machine import profiling

    kernels = profiling.parse_ncu_csv(csv_text)
    totals: dict[str, float] = {}
    for kernel in kernels:
        owner = next((name for name, match in matches.items() if match in kernel["name"]), "other")
        ms = profiling._gpu_time_ms(kernel)
        if ms is not None:
            totals[owner] = totals.get(owner, 0.0) + ms
    return {name: (totals[name] / calls if name in totals else None) for name in [*matches, "other"]}


def ncu_child() -> None:
    only = [name for name in os.environ.get(NCU_ONLY_ENV, "").split(",") if name]
    kernels = fidelity_kernels(dry=False)
    profile_calls([call for name, (call, _) in kernels.items() if not only or name in only])


def profile_calls(calls) -> None:
    """Under ncu: warm each call outside the profiled range, then NCU_CALLS calls inside it."""
    import torch

    from pytest_tesserabench.machine import profiling

    os.environ[profiling.NCU_ENV_VAR] = "1"
    for call in calls:
        for _ in range(3):
            call()
        torch.cuda.synchronize()
        with profiling.ncu_region():
            for _ in range(NCU_CALLS):
                call()


def _seconds(call, dry: bool) -> float:
    started = time.monotonic()
    call()
    if not dry:
        import torch

        torch.cuda.synchronize()
    return round(time.monotonic() - started, 2)


def _max_error(out, reference) -> float:
    return float((out.float() - reference.float()).abs().max())


def vendor_pairs(dry: bool) -> list[tuple[str, object, object, dict]]:
    """(name, ours, theirs, facts) with ``facts`` holding flops or bytes and the accuracy check."""
    import torch
    import torch.nn.functional as F

    from kernels import attention, layernorm, matmul, softmax

    dev, size = _device(dry), sizes(dry)
    torch.manual_seed(0)
    pairs = []
    for n in size["matmul"]:
        a, b = (torch.randn(n, n, device=dev, dtype=torch.bfloat16) for _ in range(2))
        pairs.append(
            (
                f"matmul_bf16_{n}",
                lambda a=a, b=b: matmul.matmul(a, b),
                lambda a=a, b=b: torch.matmul(a, b),
                {"flops": matmul.flops(n, n, n), "check": lambda out, a=a, b=b: _max_error(out, torch.matmul(a, b))},
            )
        )
        fmax = torch.finfo(torch.float8_e4m3fn).max
        a32, b32 = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
        sa, sb = a32.abs().max() / fmax, b32.abs().max() / fmax
        a8 = (a32 / sa).to(torch.float8_e4m3fn)
        b8 = (b32 / sb).to(torch.float8_e4m3fn).t()  # column-major, as torch._scaled_mm wants
        sa, sb = sa.float().reshape(()), sb.float().reshape(())
        pairs.append(
            (
                f"matmul_fp8_e4m3_{n}",
                lambda a8=a8, b8=b8, sa=sa, sb=sb: matmul.matmul_fp8(a8, b8, sa, sb, out_dtype=torch.bfloat16),
                lambda a8=a8, b8=b8, sa=sa, sb=sb: torch._scaled_mm(
                    a8, b8, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16
                ),
                {
                    "flops": matmul.flops(n, n, n),
                    "check": lambda out, a8=a8, b8=b8, sa=sa, sb=sb: _max_error(
                        out, torch._scaled_mm(a8, b8, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
                    ),
                },
            )
        )
    B, H, S, D = size["attention"]
    q, k, v = (torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        pairs.append(
            (
                f"attention_{'causal' if causal else 'full'}",
                lambda causal=causal: attention.attention(q, k, v, causal=causal),
                lambda causal=causal: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                {
                    "flops": attention.flops(B, H, S, D, causal=causal),
                    "check": lambda out, causal=causal: _max_error(
                        out, F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    ),
                },
            )
        )
    R, C = size["rows"]
    x = torch.randn(R, C, device=dev, dtype=torch.bfloat16)
    w, bias = torch.randn(C, device=dev, dtype=torch.bfloat16), torch.randn(C, device=dev, dtype=torch.bfloat16)
    moved = 2 * x.numel() * x.element_size()
    rows = [
        ("softmax", lambda: softmax.softmax(x), lambda: torch.softmax(x, dim=-1)),
        ("layer_norm", lambda: layernorm.layer_norm(x, w, bias), lambda: F.layer_norm(x, (C,), w, bias, 1e-5)),
        ("rms_norm", lambda: layernorm.rms_norm(x, w), lambda: F.rms_norm(x, (C,), w, 1e-6)),
    ]
    for name, ours, theirs in rows:
        pairs.append(
            (name, ours, theirs, {"bytes": moved, "check": lambda out, theirs=theirs: _max_error(out, theirs())})
        )
    dst = torch.empty_like(x)
    pairs.append(("copy", lambda: dst.copy_(x), None, {"bytes": moved}))
    return pairs


def part_vendor(results: Results, dry: bool) -> None:
    for name, ours, theirs, facts in vendor_pairs(dry):
        first = _seconds(ours, dry)
        timers = timers_for(ours, dry)
        row = {"compile_and_first_call_s": first}
        chosen = {"ours": timers["cuda_event"]}
        if theirs is not None:
            chosen["theirs"] = timers_for(theirs, dry)["cuda_event"]
        medians = interleaved_medians(chosen, *((2, 2) if dry else (5, 10)))
        row.update({f"{side}_ms": ms for side, ms in medians.items()})
        if theirs is not None:
            row["ours_over_theirs_speed"] = medians["theirs"] / medians["ours"]
            row["max_abs_error_vs_theirs"] = facts["check"](ours())
        if "flops" in facts:
            row.update({f"{side}_tflops": facts["flops"] / (ms * 1e-3) / 1e12 for side, ms in medians.items()})
        if "bytes" in facts:
            row.update({f"{side}_gbps": facts["bytes"] / (ms * 1e-3) / 1e9 for side, ms in medians.items()})
        results.put(name, row)
    copy = results.data["results"].get("copy", {}).get("ours_gbps")
    for name in ("softmax", "layer_norm", "rms_norm"):
        row = results.data["results"].get(name)
        if copy and row:
            row["ours_over_copy_bandwidth"] = row["ours_gbps"] / copy
            results.put(name, row)


POINTER_CONFIG = types.SimpleNamespace(
    kernel_kwargs={"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8},
    options={"num_stages": 4, "num_warps": 8},
)


def static_launches(dry: bool, every: bool = False) -> tuple[list, dict]:
    """Every project kernel, launched once under capture: ([(call name, launch)], {call name: error})."""
    import torch

    from kernels import attention, layernorm, matmul, softmax
    from pytest_tesserabench.inspect import capture_launches

    dev, size = _device(dry), sizes(dry)
    n = size["matmul"][0] if dry else 1024
    a, b = (torch.randn(n, n, device=dev, dtype=torch.bfloat16) for _ in range(2))
    c = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    a8 = a.to(torch.float8_e4m3fn)
    b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()
    one = torch.ones((), device=dev)
    B, H, S, D = (1, 2, 64, 64) if dry else (1, 4, 1024, 128)
    q, k, v = (torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
    R, C = size["rows"]
    x = torch.randn(R if dry else 256, C, device=dev, dtype=torch.bfloat16)
    long_x = torch.randn(4, size["rows_long"], device=dev, dtype=torch.bfloat16)
    w = torch.randn(x.shape[-1], device=dev, dtype=torch.bfloat16)
    long_w = torch.randn(long_x.shape[-1], device=dev, dtype=torch.bfloat16)
    looped = {"max_fused_cols": 16} if dry else {}  # the interpreter reaches the looped path early
    calls = {
        "matmul bf16": lambda: matmul.matmul(a, b),
        "matmul fp8": lambda: matmul.matmul_fp8(a8, b8, one, one),
        # one config of its autotuning space: the pointer kernel's other nine would only add compiles
        "matmul pointer kernel": lambda: matmul._launch_pointer(a, b, c, config=POINTER_CONFIG),
        "attention": lambda: attention.attention(q, k, v),
        "attention causal": lambda: attention.attention(q, k, v, causal=True),
        "softmax": lambda: softmax.softmax(x),
        "softmax looped": lambda: softmax.softmax(long_x, **looped),
        "layer_norm": lambda: layernorm.layer_norm(x, w, w),
        "layer_norm looped": lambda: layernorm.layer_norm(long_x, long_w, long_w, **looped),
        "rms_norm": lambda: layernorm.rms_norm(x, w),
    }
    if dry and not every:  # the interpreter is slow; two kernels show the path works
        calls = {name: calls[name] for name in ("softmax", "rms_norm")}
    launches, errors = [], {}
    for name, call in calls.items():
        try:
            with capture_launches() as captured:
                call()
            launches += [(name, launch) for launch in captured]
        except Exception as error:  # one kernel that fails must not hide the others' figures
            errors[name] = f"{type(error).__name__}: {error}"
    return launches, errors


def side_stream_check(results: Results, dry: bool) -> None:
    """bench()'s async check on the device: a matmul launched on a side stream (the timer's events
    on the current stream see none of it) must be named; the same matmul on the current stream
    must pass."""
    if dry:
        results.note("the async check on a side stream skipped: dry run (tests/plugin/test_integrity.py fakes it)")
        return
    import torch

    from pytest_tesserabench.measure import integrity

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()

    def on_side_stream():
        with torch.cuda.stream(side):
            return a @ a

    # Warm, as the call is when bench() checks it (after its rounds): a first call on a new stream
    # was not flagged, its cause not yet known.
    for call in (on_side_stream, lambda: a @ a):
        call()
    torch.cuda.synchronize()
    results.put(
        "async check",
        {
            "side stream": integrity.check_async(on_side_stream, torch, "cuda"),
            "current stream": integrity.check_async(lambda: a @ a, torch, "cuda"),
        },
    )


def part_static(results: Results, dry: bool) -> None:
    from pytest_tesserabench.inspect import analyse_launches

    arch = "sm_90"
    if not dry:
        import torch

        major, minor = torch.cuda.get_device_capability()
        arch = f"sm_{major}{minor}"
    launches, errors = static_launches(dry)
    for name, error in errors.items():
        results.note(f"{name}: could not launch: {error}")
    if dry:
        results.note("loaded-kernel figures skipped: dry run (kernels ran in the interpreter)")
    equal = 0
    for name, launch in launches:
        record = analyse_launches([launch], [arch])[0]
        compiled = launch.compiled
        loaded = None
        if compiled is not None:
            spills = getattr(compiled, "n_spills", None)  # the driver's local memory, in 4-byte words
            loaded = {
                "registers": getattr(compiled, "n_regs", None),
                "local_bytes": None if spills is None else 4 * spills,
                "dynamic_shared_bytes": getattr(compiled.metadata, "shared", None),
            }
        static = {
            "registers": record.get("registers"),
            "local_bytes": record.get("local_bytes"),
            "dynamic_shared_bytes": record.get("dynamic_shared_bytes"),
            "spill_stores": record.get("spill_stores"),
            "shared_bytes": record.get("shared_bytes"),
            "occupancy": record.get("occupancy"),
            "compile_ms": record.get("compile_ms"),
            "error": record.get("error"),
        }
        same = loaded is not None and all(loaded[key] == static[key] for key in loaded)
        equal += same
        results.put(
            f"{name}: {launch.name}",
            {
                "arch": arch,
                "config": launch.config,
                "static": static,
                "loaded": loaded,
                "equal": same if loaded else None,
            },
        )
    results.data["equal"] = f"{equal} of {len(launches)}"
    results.save()


def run_part(part: str, out: Path, dry: bool) -> int:
    if dry:  # the interpreter, as the plugin sets it up (with its fixes for older Tritons' interpreter)
        from pytest_tesserabench.machine import interpret

        interpret.apply("always")
    if part == "ncu-child":
        ncu_child()
        return 0
    results = Results(out, part)
    runner = {
        "device": lambda: part_device_info(results, dry),
        "timers": lambda: part_timers(results, dry, out),
        "vendor": lambda: part_vendor(results, dry),
        "static": lambda: (side_stream_check(results, dry), part_static(results, dry)),
    }[part]
    runner()
    results.save()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="run here without a GPU: interpreter, tiny sizes")
    parser.add_argument(
        "--out", type=Path, help="the work folder (default: /tmp/tesserabench-truth under $OUT, else .bench-out/truth)"
    )
    parser.add_argument(
        "--archive", type=Path, help="pack the work folder here after each part (default: $OUT/truth.tar.gz)"
    )
    parser.add_argument("--budget", type=float, default=450, help="seconds for all the parts together (default 450)")
    parser.add_argument("--only", help=f"comma-separated parts to run, of {', '.join(PARTS)}")
    parser.add_argument("--part", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    device_out = os.environ.get("OUT")
    out = args.out or (Path("/tmp/tesserabench-truth") if device_out else ROOT / ".bench-out" / "truth")
    archive = args.archive or (Path(device_out) / "truth.tar.gz" if device_out else None)
    if args.part:
        return run_part(args.part, out, args.dry_run)
    only = None
    if args.only:
        only = {name.strip() for name in args.only.split(",") if name.strip()}
        unknown = only - set(PARTS)
        if unknown:
            parser.error(f"--only: unknown parts {sorted(unknown)}; choose from {', '.join(PARTS)}")
    return orchestrate(out, args.dry_run, args.budget, only, archive)


if __name__ == "__main__":
    sys.exit(main())
