"""Break the wiring on purpose and check that a test notices: each mutation below cuts one
connection (a hook that no longer calls, a value that no longer travels, a comparison flipped),
and the tests named with it must then fail.

    .venv/bin/python benchmarks/wiring_mutations.py            # all mutations
    .venv/bin/python benchmarks/wiring_mutations.py -k canary   # those whose name matches

Each mutation runs in a fresh copy of the working tree (tracked and untracked files, no .venv),
so the checkout is never touched. Prints one line per mutation (KILLED by a failing test, or
SURVIVED) and exits 1 if any survived.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]


PLUGIN = "pytest_tesserabench/plugin.py"
SESSION = "pytest_tesserabench/session.py"
TERMINAL = "pytest_tesserabench/report/terminal.py"
WIRING = "tests/plugin/test_wiring.py"
CONFIRM = "tests/plugin/test_confirm.py"

MUTATIONS = (
    # The nine the review found surviving (issue 9, section 2).
    Mutation(
        "MISSING verdicts",
        SESSION,
        "verdicts.update(self.comparison.missing(self.records, self.ran))",
        "pass",
        (WIRING,),
    ),
    Mutation(
        "alpha/m count reaching the gate",
        "pytest_tesserabench/history/comparison.py",
        "m=max(self.n_compared, len(records)),",
        "m=len(records),",
        (WIRING,),
    ),
    Mutation(
        "what would settle each INCONCLUSIVE one, under the comparison",
        "pytest_tesserabench/report/terminal.py",
        "        width=width,\n        hints=True,",
        "        width=width,\n        hints=False,",
        (WIRING,),
    ),
    Mutation(
        "end-of-run canary",
        PLUGIN,
        "        if state.records:\n            try:\n                state.context.time_canary(",
        "        if False:\n            try:\n                state.context.time_canary(",
        (WIRING,),
    ),
    Mutation(
        "verdicts stripped from saved baselines",
        "pytest_tesserabench/record/results.py",
        "replace(r, samples_ms=[], verdict=None, ab=None,",
        "replace(r, samples_ms=[], ab=None,",
        (WIRING, "tests/gate/test_baseline.py"),
    ),
    Mutation("per-test threshold from the marker", SESSION, "{r.id: threshold for r in records}", "{}", (WIRING,)),
    Mutation(
        "direction of the software-version diff",
        TERMINAL,
        "software_differences(state.context.machine_info, comparison.baseline.latest_machine)",
        "software_differences(comparison.baseline.latest_machine, state.context.machine_info)",
        (WIRING,),
    ),
    Mutation("not-run count", TERMINAL, "    if not_run:\n", "    if False:\n", (WIRING,)),
    Mutation(
        "noisy note",
        "pytest_tesserabench/report/rows.py",
        "if record.stats and record.stats.noisy:",
        "if False:",
        (WIRING, "tests/plugin/test_report.py"),
    ),
    # Wiring added since.
    Mutation(
        "noisy flag from the sampler",
        "pytest_tesserabench/measure/sampling.py",
        "            result.noisy = stop != _CONVERGED",
        "            result.noisy = False",
        (WIRING, "tests/plugin/test_sampling.py"),
    ),
    Mutation(
        "interpreter switched on by the plugin",
        PLUGIN,
        "early_config.stash[INTERPRET_KEY] = interpret.apply(mode)",
        "pass",
        ("tests/plugin/test_user_project.py",),
    ),
    Mutation(
        "autotuner's first config under the interpreter",
        "pytest_tesserabench/machine/interpret.py",
        "        if not interpreting():\n",
        "        if True:\n",
        ("tests/plugin/test_user_project.py",),
    ),
    Mutation(
        "IMPOSSIBLE verdicts",
        SESSION,
        "            if reason:\n                verdicts[record.id]",
        "            if False:\n                verdicts[record.id]",
        ("tests/plugin/test_impossible_plugin.py",),
    ),
    Mutation(
        "extra_info checked per test",
        PLUGIN,
        "        problem = fixture.json_problem()",
        "        problem = None",
        ("tests/plugin/test_bad_input_plugin.py",),
    ),
    Mutation(
        "outcome written on the report",
        PLUGIN,
        "            records.append(replace(record, outcome=report.outcome))",
        "            records.append(record)",
        ("tests/plugin/test_gate_e2e.py",),
    ),
    Mutation(
        "nothing saved from an interrupted run",
        "pytest_tesserabench/outputs.py",
        "        if interrupted:",
        "        if False:",
        ("tests/plugin/test_bad_input_plugin.py",),
    ),
    Mutation(
        "kernels matched by config",
        "pytest_tesserabench/gate/kernels.py",
        "old = variants.get(_variant_key(kernel))",
        "old = next(iter(variants.values()))",
        ("tests/gate/test_kernel_gate.py",),
    ),
    Mutation(
        "record on a GPU, gate anywhere",
        "pytest_tesserabench/history/comparison.py",
        "        if with_kernels:",
        "        if False:",
        ("tests/plugin/test_static_analysis.py",),
    ),
    Mutation(
        "unknown baseline name is a usage error",
        "pytest_tesserabench/history/comparison.py",
        "if name not in known and settings.save != name:",
        "if False:",
        ("tests/plugin/test_gate_e2e.py",),
    ),
    Mutation(
        "stale temporaries removed",
        "pytest_tesserabench/history/baseline.py",
        "            files.remove_stale_temporaries(path)\n",
        "",
        ("tests/gate/test_bad_input.py",),
    ),
    Mutation(
        "file mode kept",
        "pytest_tesserabench/record/files.py",
        "        os.chmod(temporary, mode)",
        "        pass",
        ("tests/gate/test_bad_input.py",),
    ),
    Mutation(
        "outputs checked before measuring",
        "pytest_tesserabench/options.py",
        "    if not settings.enabled:\n        return\n    checks",
        "    return\n    checks",
        ("tests/plugin/test_bad_input_plugin.py", "tests/plugin/test_options.py"),
    ),
    Mutation(
        "validation of record values",
        "pytest_tesserabench/record/results.py",
        "    if not _is_number(value):\n        raise",
        "    if False:\n        raise",
        ("tests/gate/test_bad_input.py",),
    ),
    Mutation(
        "A/B stopping early as UNCHANGED at the printed interval's error over the looks",
        "pytest_tesserabench/gate/paired.py",
        "    return 1 - (1 - confidence) / looks",
        "    return 1 - (1 - confidence) / looks / 100",
        ("tests/gate/test_ab_rule.py",),
    ),
    Mutation(
        "every other benchmark in how unalike a run took its shift",
        "pytest_tesserabench/gate/model.py",
        "spread = moderated(float(np.var(others, ddof=1)))",
        "spread = moderated(float(np.var(np.delete(others, np.argmax(np.abs(others - value))), ddof=1)))",
        ("tests/gate/test_golden.py",),
    ),
    Mutation(
        "first benchmarks widened by the canary's move",
        "pytest_tesserabench/gate/model.py",
        "Shift(0.0, model.shift_sd**2 + moved**2, source, canary_moved=moved)",
        "Shift(0.0, model.shift_sd**2, source, canary_moved=moved)",
        ("tests/gate/test_run_effect.py", "tests/plugin/test_run_effect_plugin.py"),
    ),
    Mutation(
        "the run's canary reaching the shift",
        "pytest_tesserabench/history/comparison.py",
        "shifts={r.id: history.shift(r.id, measured, canary) for r in records},",
        "shifts={r.id: history.shift(r.id, measured, None) for r in records},",
        ("tests/plugin/test_run_effect_plugin.py",),
    ),
    Mutation(
        "a suite-wide shift fails the run",
        "pytest_tesserabench/plugin.py",
        "if failed or (state.suite is not None and state.suite.failed):",
        "if failed:",
        ("tests/plugin/test_run_effect_plugin.py",),
    ),
    Mutation(
        "A/B served processes pinned to one CPU",
        "pytest_tesserabench/processes/serve.py",
        "            os.sched_setaffinity(0, {cpu})\n        except OSError:",
        "            pass\n        except OSError:",
        ("tests/plugin/test_ab.py",),
    ),
    Mutation(
        "A/B served processes draw their environment size",
        "pytest_tesserabench/processes/served.py",
        'env[PAD_ENV] = "x" * secrets.randbelow(PAD_MAX + 1)',
        'env[PAD_ENV] = "x" * PAD_MAX',
        ("tests/plugin/test_ab.py",),
    ),
    Mutation(
        "A/B judged over process pairs",
        "pytest_tesserabench/ab/lead.py",
        "    if process_pairs > 1:",
        "    if process_pairs > 1000:",
        ("tests/plugin/test_ab.py",),
    ),
    Mutation(
        "A/B process pairs go round",
        "pytest_tesserabench/ab/interleave.py",
        "        process = pair % count",
        "        process = 0",
        ("tests/gate/test_ab_rule.py", "tests/plugin/test_ab.py"),
    ),
    Mutation(
        "CPU samples leave out the run-queue wait",
        "pytest_tesserabench/measure/timing.py",
        "out.append((clock() - t0 - wait) / inner / 1e6)",
        "out.append((clock() - t0) / inner / 1e6)",
        ("tests/plugin/test_run_queue.py",),
    ),
    Mutation(
        "the run-queue wait is read from schedstat's run_delay",
        "pytest_tesserabench/machine/run_queue.py",
        "lambda text: int(text.split()[1])",
        "lambda text: int(text.split()[0])",
        ("tests/plugin/test_run_queue.py",),
    ),
    Mutation(
        "bench()'s measuring path carries the wait into the record",
        "pytest_tesserabench/measure/sampling.py",
        "        samples = _timed_round(timer, plan, result)",
        "        samples = timer.round(plan.samples_per_round)",
        ("tests/plugin/test_run_queue.py",),
    ),
    Mutation(
        "A/B served processes select with -k/-m as the lead did",
        "pytest_tesserabench/ab/lead.py",
        "pytest_args=[*measurement_args(self.settings), *self.selection],",
        "pytest_args=measurement_args(self.settings),",
        ("tests/plugin/test_ab.py",),
    ),
    Mutation(
        "A/B: a test deselected here is not a deleted one",
        "pytest_tesserabench/ab/hooks.py",
        "        self.deselected.update(item.nodeid for item in items)",
        "        pass",
        ("tests/plugin/test_ab.py",),
    ),
    Mutation(
        "A/B: the reference's records join ours",
        "pytest_tesserabench/ab/hooks.py",
        "                ours[name] = replace(record, ab=ab)",
        "                pass",
        ("tests/plugin/test_ab.py",),
    ),
    Mutation(
        "A/B: MISSING verdicts reach the report",
        "pytest_tesserabench/ab/hooks.py",
        "            setattr(report, MISSING_ATTR, item.stash[MISSING_KEY])",
        "            pass",
        ("tests/plugin/test_ab.py",),
    ),
    Mutation(
        "A/B: REF collects the test files deleted here",
        "pytest_tesserabench/ab/lead.py",
        "        if not existing and not deleted_here:",
        "        deleted_here = []\n        if not existing and not deleted_here:",
        ("tests/plugin/test_ab.py",),
    ),
    Mutation(
        "passes: the earlier passes run",
        "pytest_tesserabench/passes_hooks.py",
        "        run_earlier(self.passes, items,",
        "        return\n        run_earlier(self.passes, items,",
        ("tests/plugin/test_passes.py",),
    ),
    Mutation(
        "passes: the hooks are registered when the run makes several passes",
        PLUGIN,
        "        config.pluginmanager.register(PassesHooks(state, BENCH_KEY), PassesHooks.NAME)",
        "        pass",
        ("tests/plugin/test_passes.py",),
    ),
    Mutation(
        "passes: an earlier pass is neither judged nor reported",
        "pytest_tesserabench/passes_hooks.py",
        "        fixture.records.clear()\n",
        "        pass\n",
        ("tests/plugin/test_passes.py",),
    ),
    Mutation(
        "passes: a test that failed in an earlier pass only is said",
        "pytest_tesserabench/passes_hooks.py",
        "            item.warn(\n",
        "            return report\n            item.warn(\n",
        ("tests/plugin/test_passes.py",),
    ),
    Mutation(
        "a later run drifts on its own by the suite's typical drift",
        "pytest_tesserabench/gate/rule.py",
        "        + config.later_run_drift * prior_var  # the candidate's own later drift (GateConfig)\n",
        "",
        ("tests/gate/test_gate_simulation.py",),
    ),
    Mutation(
        "passes: the reported pass pools the earlier rounds",
        "pytest_tesserabench/measure/passes.py",
        "        rounds_ms=rounds,",
        "        rounds_ms=last.rounds_ms,",
        ("tests/plugin/test_passes.py",),
    ),
    Mutation(
        "passes: earlier centres tell the run's shift",
        "pytest_tesserabench/passes_hooks.py",
        "                self.state.measured[record.id] = centre\n",
        "                pass\n",
        ("tests/plugin/test_run_effect_plugin.py",),
    ),
    Mutation(
        "the run's conditions soften verdicts, in the plugin and offline",
        "pytest_tesserabench/gate/pipeline.py",
        "return conditions.review(records, verdicts, self.runs, self.config) if self.timings else verdicts",
        "return verdicts",
        ("tests/plugin/test_passes.py",),
    ),
    Mutation(
        "a crowded-out multi-threaded benchmark is not judged by its time",
        "pytest_tesserabench/gate/conditions.py",
        "verdicts = crowded(records, cpu_shared(records, verdicts), baseline_runs, config)",
        "verdicts = cpu_shared(records, verdicts)",
        ("tests/gate/test_conditions.py",),
    ),
    Mutation(
        "the record carries the CPU its own process used",
        "pytest_tesserabench/measure/fixture.py",
        "                own_cpu_s=m.own_cpu_s,\n",
        "",
        ("tests/plugin/test_neighbours.py",),
    ),
    Mutation(
        "imported runs stay out of what a run is compared with",
        "pytest_tesserabench/gate/pipeline.py",
        "        baseline_runs = [run for run in baseline_runs if not is_imported(run)]",
        "        pass",
        ("tests/gate/test_imported_history.py",),
    ),
    Mutation(
        "a benchmark only in imported runs says so",
        "pytest_tesserabench/gate/pipeline.py",
        "            if not base and bench_id in self.imported:",
        "            if False:",
        ("tests/plugin/test_pytest_benchmark_together.py",),
    ),
    Mutation(
        "imported runs are filed in the order they were made",
        "pytest_tesserabench/history/baseline.py",
        "            if by_date:",
        "            if False:",
        ("tests/gate/test_imported_history.py",),
    ),
    Mutation(
        "fresh processes are one moment against this process's",
        "pytest_tesserabench/gate/pipeline.py",
        "                later_together=True,",
        "                later_together=False,",
        ("tests/gate/test_gate_rule.py",),
    ),
    Mutation(
        "the moments' disagreement reaches the verdict",
        "pytest_tesserabench/gate/rule.py",
        "    disagree = (2 * nc.cand_spread > np.abs(diff)) | one_unmoved | moments_apart",
        "    disagree = (2 * nc.cand_spread > np.abs(diff)) | one_unmoved",
        ("tests/gate/test_gate_rule.py",),
    ),
    Mutation(
        "a crowded-out benchmark has no say in the run's shift",
        "pytest_tesserabench/gate/pipeline.py",
        "    if history.crowded_out(record):",
        "    if False:",
        ("tests/gate/test_conditions.py",),
    ),
    Mutation(
        "the session's measured centres reach the run's shift",
        SESSION,
        "                add_measured(self.comparison.history, self.measured, record)",
        "                pass",
        ("tests/plugin/test_run_effect_plugin.py",),
    ),
    Mutation(
        "offline compare: the measuring order",
        "pytest_tesserabench/gate/pipeline.py",
        "for bench_id in candidate.measured_order or list(candidate.benchmarks):",
        "for bench_id in list(candidate.benchmarks):",
        ("tests/plugin/test_run_effect_plugin.py",),
    ),
    Mutation(
        "the settle command is written",
        TERMINAL,
        '    unresolved = unresolved_line(verdicts, failing=settings.unresolved == "fail", settle=settle)',
        '    unresolved = unresolved_line(verdicts, failing=settings.unresolved == "fail")',
        ("tests/plugin/test_run_effect_plugin.py",),
    ),
    Mutation(
        "saving records the canaries before the benchmarks",
        "pytest_tesserabench/measure/instruments.py",
        "if not (settings.compare or settings.ab or settings.save) or settings.ab_serve:",
        "if not (settings.compare or settings.ab) or settings.ab_serve:",
        ("tests/plugin/test_run_effect_plugin.py",),
    ),
    Mutation(
        "the suite-wide shift: every pass, most benchmarks",
        "pytest_tesserabench/gate/model.py",
        "    everywhere = min(float(np.percentile(p, 25)) for p in by_pass)",
        "    everywhere = float(np.median(values))",
        ("tests/gate/test_run_effect.py",),
    ),
    Mutation(
        "the neighbours' CPU reaches the record",
        "pytest_tesserabench/measure/fixture.py",
        "                others_cpu_s=m.others_cpu_s,",
        "",
        ("tests/plugin/test_run_effect_plugin.py",),
    ),
    Mutation(
        "a regression beside busy processes is noted",
        "pytest_tesserabench/gate/conditions.py",
        "    if others >= neighbours.SHARED_CPUS:",
        "    if others < 0:",
        ("tests/plugin/test_run_effect_plugin.py",),
    ),
    Mutation(
        "the CI summary says what the run says about itself",
        "pytest_tesserabench/report/markdown_report.py",
        "    head = _headline(data) + _notes(data) + _regressions(data)",
        "    head = _headline(data) + _regressions(data)",
        ("tests/plugin/test_run_effect_plugin.py",),
    ),
    Mutation(
        "no timing verdict across different numbers of passes",
        "pytest_tesserabench/gate/conditions.py",
        'timed = verdict.status in ("REGRESSED", "IMPROVED", "UNCHANGED", "INCONCLUSIVE")',
        "timed = False",
        ("tests/plugin/test_passes.py",),
    ),
    Mutation(
        "the run's shift carries how unalike the benchmarks took it",
        "pytest_tesserabench/gate/model.py",
        "        return Shift(value, error + unalike**2,",
        "        return Shift(value, error,",
        ("tests/gate/test_gate_rule.py", "tests/gate/test_gate_simulation.py"),
    ),
    Mutation(
        "the suite-wide shift is known before the reports",
        PLUGIN,
        "        state.suite = state.suite_shift()  # (before the reports, which say it too)\n"
        "        failed = write_outputs(state, reporter, interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)\n",
        "        failed = write_outputs(state, reporter, interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)\n"
        "        state.suite = state.suite_shift()\n",
        ("tests/plugin/test_run_effect_plugin.py",),
    ),
    Mutation(
        "history kept per benchmark",
        "pytest_tesserabench/history/baseline.py",
        "            runs = kept_runs(runs, history)",
        "            runs = runs[-history:]",
        ("tests/gate/test_baseline.py",),
    ),
    Mutation(
        "interpreter timings are out of the run's shift",
        "pytest_tesserabench/gate/centres.py",
        "    summary = record_summary(record) if record.timing_gated else None",
        "    summary = record_summary(record)",
        ("tests/gate/test_run_effect.py",),
    ),
    Mutation(
        "the summary says what the run could not judge",
        "pytest_tesserabench/report/terminal.py",
        '    unresolved = unresolved_line(verdicts, failing=settings.unresolved == "fail", settle=settle)',
        "    unresolved = None",
        (WIRING,),
    ),
    Mutation(
        "--bench-confirm: the step is called",
        "pytest_tesserabench/gate/pipeline.py",
        "    processes = measure_again(again)\n",
        "    return verdicts\n",
        (CONFIRM,),
    ),
    Mutation(
        "--bench-confirm: the fresh processes join the candidate's",
        "pytest_tesserabench/gate/pipeline.py",
        "candidates = [record, *(p[bench_id] for p in processes if bench_id in p)]",
        "candidates = [record]",
        (CONFIRM, "tests/gate/test_gate_rule.py"),
    ),
    Mutation(
        "--bench-confirm: the processes are judged as one run, centred on the median one",
        "pytest_tesserabench/gate/pipeline.py",
        "                candidate_spread=False,\n",
        "",
        ("tests/gate/test_gate_rule.py",),
    ),
    Mutation(
        "--bench-confirm: a served process ignores the project's --bench-compare",
        "pytest_tesserabench/options.py",
        "            values.pop(name, None)",
        "            pass",
        (CONFIRM, "tests/plugin/test_options.py"),
    ),
    Mutation(
        "--bench-confirm: the fresh blocks read as passes",
        "pytest_tesserabench/processes/fresh.py",
        "        pass_rounds=tuple(len(block.rounds_ms) for block in blocks),",
        "        pass_rounds=(),",
        (CONFIRM,),
    ),
    Mutation(
        "stage 4: an undecided benchmark is measured again where more processes reading it half-way up could decide it",
        "pytest_tesserabench/gate/pipeline.py",
        " / verdicts[r.id].ratio) ** reach) for r in undecided}",
        " / verdicts[r.id].ratio)) for r in undecided}",
        ("tests/gate/test_gate_rule.py",),
    ),
    Mutation(
        "fresh processes: rounds sized as a pass's, not to the whole budget",
        "pytest_tesserabench/processes/fresh.py",
        "        process.warm_up(None, share=pass_share(record))",
        "        process.warm_up(None)",
        (CONFIRM,),
    ),
    Mutation(
        "fresh processes: the served process warms up for its share",
        "pytest_tesserabench/processes/serve.py",
        "max_time=budget.max_time * share",
        "max_time=budget.max_time",
        (CONFIRM,),
    ),
    Mutation(
        "passes: each pass starts on the next CPU",
        "pytest_tesserabench/measure/passes.py",
        "        start_on_cpu(self.passes.current, timer.name)",
        "        pass",
        ("tests/plugin/test_passes.py",),
    ),
    Mutation(
        "passes: an earlier pass takes no canary",
        "pytest_tesserabench/measure/fixture.py",
        "canary = instruments.local_canary() if kept else None",
        "canary = instruments.local_canary()",
        ("tests/plugin/test_passes.py",),
    ),
    Mutation(
        "passes: an earlier pass takes no profiler trace",
        "pytest_tesserabench/measure/fixture.py",
        "if self._settings.trace_dir is not None and kept:",
        "if self._settings.trace_dir is not None:",
        ("tests/plugin/test_passes.py",),
    ),
    Mutation(
        "passes: a pass warms up for its share",
        "pytest_tesserabench/measure/passes.py",
        "            warmup=budget.warmup / self.total,\n",
        "",
        ("tests/plugin/test_passes.py",),
    ),
    Mutation(
        "A/B: served processes forked by the zygote",
        "pytest_tesserabench/ab/lead.py",
        "process.launch(self.zygote)",
        "process.launch()",
        ("tests/plugin/test_ab.py",),
    ),
    Mutation(
        "A/B: Ctrl-C closes the served processes before the summaries",
        "pytest_tesserabench/ab/hooks.py",
        "        self.lead.close(interrupted=True)",
        "        pass",
        ("tests/plugin/test_ab.py",),
    ),
    Mutation(
        "a served process lets Ctrl-C go (the lead stops it)",
        "pytest_tesserabench/processes/serve.py",
        "            signal.signal(signal.SIGINT, signal.SIG_IGN)",
        "            pass",
        ("tests/plugin/test_ab.py",),
    ),
    Mutation(
        "fresh processes: Ctrl-C closes them before the summaries",
        "pytest_tesserabench/processes/hooks.py",
        "            self.state.process_pool.close(interrupted=True)",
        "            pass",
        ("tests/plugin/test_sigterm_save.py",),
    ),
    Mutation(
        "zygote: a child's exit status read from its file",
        "pytest_tesserabench/processes/zygote.py",
        "self.returncode = int(self._status_path.read_text())",
        "pass",
        ("tests/plugin/test_zygote.py",),
    ),
    Mutation(
        "fresh processes: each block starts on the next CPU",
        "pytest_tesserabench/processes/fresh.py",
        "process.block(rounds, turn=k, memory=True)",
        "process.block(rounds, memory=True)",
        (CONFIRM,),
    ),
    Mutation(
        "--bench-confirm: an undecided verdict past the threshold is measured again",
        "pytest_tesserabench/gate/pipeline.py",
        '    return verdict.status == "INCONCLUSIVE" and verdict.ratio >= 1 + (verdict.threshold or 0.0)',
        "    return False",
        (CONFIRM, "tests/gate/test_gate_rule.py"),
    ),
    Mutation(
        "--bench-confirm: processes that disagree by more than the change confirm nothing",
        "pytest_tesserabench/gate/rule.py",
        "disagree = (2 * nc.cand_spread > np.abs(diff)) | one_unmoved | moments_apart",
        "disagree = (nc.cand_spread > np.abs(diff)) | one_unmoved | moments_apart",
        ("tests/gate/test_gate_rule.py",),
    ),
    Mutation(
        "a comparison whose centres read apart from the results' medians says what each figure is",
        "pytest_tesserabench/report/comparison_table.py",
        "    if not paired and centres_apart(verdicts, records):",
        "    if False:",
        ("tests/plugin/test_report.py",),
    ),
    Mutation(
        "--bench-ab: a served process's wait for the lead is not counted against --bench-timeout",
        "pytest_tesserabench/processes/serve.py",
        "                with paused():  # (waiting for the lead is not this call running: --bench-timeout)",
        "                if True:",
        ("tests/plugin/test_ab.py",),
    ),
    Mutation(
        "a far baseline process is far from the shift the other benchmarks read",
        "pytest_tesserabench/gate/pipeline.py",
        "        i: {j: float(v) if np.isfinite(v) else model.run_shifts[j] for j, v in zip(runs, others[row])}",
        "        i: {j: model.run_shifts[j] for j, v in zip(runs, others[row])}",
        ("tests/gate/test_gate_rule.py",),
    ),
    Mutation(
        "--bench-confirm: a slowdown one of the processes read less than half of confirms nothing",
        "pytest_tesserabench/gate/rule.py",
        "one_unmoved = ((diff > 0) & (nc.low_diff <= least / 2))",
        "one_unmoved = ((diff > 0) & (nc.low_diff <= -1))",
        ("tests/gate/test_gate_rule.py",),
    ),
    Mutation(
        "the pool canary's move is read against the slowest of the baseline's runs",
        "pytest_tesserabench/gate/conditions.py",
        "            return min(mine) / max(theirs), pool",
        "            return min(mine) / min(theirs), pool",
        ("tests/gate/test_conditions.py",),
    ),
    Mutation(
        "the memory canary's correction reaches the verdict",
        "pytest_tesserabench/gate/pipeline.py",
        "        records = [self.memory.adjusted(r) for r in records]\n        processes = [",
        "        processes = [",
        ("tests/gate/test_memory.py",),
    ),
    Mutation(
        "the memory canary reads the memory against the CPU",
        "pytest_tesserabench/measure/canary.py",
        "    return from_memory / from_cache if from_cache > 0 else 0.0",
        "    return from_memory if from_cache > 0 else 0.0",
        ("tests/gate/test_memory.py",),
    ),
    Mutation(
        "the run's shift is read from memory-corrected centres",
        "pytest_tesserabench/gate/pipeline.py",
        "    centre = log_centre(history.memory.adjusted(record))",
        "    centre = log_centre(record)",
        ("tests/gate/test_memory.py",),
    ),
    Mutation(
        "the run's shift is read from memory-corrected earlier passes",
        "pytest_tesserabench/gate/centres.py",
        "    return memory.passes_centre(record.id, [list(part) for part in split[:-1]], earlier)\n",
        "    return memory.passes_centre(record.id, [list(part) for part in split[:-1]], [])\n",
        ("tests/gate/test_memory.py",),
    ),
    Mutation(
        "the suite-wide shift is read from memory-corrected centres",
        "pytest_tesserabench/gate/pipeline.py",
        "        records = [self.memory.adjusted(r) for r in records]\n        return records_suite_shift(",
        "        records = list(records)\n        return records_suite_shift(",
        ("tests/gate/test_memory.py",),
    ),
    Mutation(
        "a fresh process's reading is said at the baseline's memory speed",
        "pytest_tesserabench/gate/pipeline.py",
        "centre = log_centre(memory_model.adjusted(fresh)) if fresh",
        "centre = log_centre(fresh) if fresh",
        ("tests/gate/test_memory.py",),
    ),
    Mutation(
        "a slowdown past the slowest memory the baseline met says its correction is a guess",
        "pytest_tesserabench/gate/memory.py",
        "or here is None or here <= slope.slowest else",
        "or here is None else",
        ("tests/gate/test_memory.py",),
    ),
    Mutation(
        "only a slowdown's verdict says the memory was past the baseline's",
        "pytest_tesserabench/gate/pipeline.py",
        'beyond = self.memory.beyond(bench_id, candidates) if status == "REGRESSED" else None',
        "beyond = self.memory.beyond(bench_id, candidates)",
        ("tests/gate/test_memory.py",),
    ),
    Mutation(
        "the memory canary times its two kinds of sum in turn",
        "pytest_tesserabench/measure/canary.py",
        "    times = [(memory.round(1)[0], cache.round(1)[0]) for _ in range(MEMORY_CALLS)]",
        "    times = list(zip(memory.round(MEMORY_CALLS), cache.round(MEMORY_CALLS)))",
        ("tests/gate/test_memory.py",),
    ),
    Mutation(
        "the memory canary's slope is never negative",
        "pytest_tesserabench/gate/memory.py",
        "Slope(max(sxy / precision, 0.0),",
        "Slope(sxy / precision,",
        ("tests/gate/test_memory.py",),
    ),
    Mutation(
        "the memory canary is timed after each pass of a CPU benchmark",
        "pytest_tesserabench/measure/sampling.py",
        '    if ranks.size == 1 and timer.name == "cpu":',
        "    if False:",
        ("tests/plugin/test_passes.py",),
    ),
    Mutation(
        "--bench-confirm: a fresh process times the memory canary after each block",
        "pytest_tesserabench/processes/fresh.py",
        "process.block(rounds, turn=k, memory=True)",
        "process.block(rounds, turn=k, memory=False)",
        ("tests/plugin/test_confirm.py",),
    ),
    Mutation(
        "a fresh process's memory canary is kept in the run file",
        "pytest_tesserabench/record/results.py",
        "            memory_canary=process.memory_canary,\n",
        "",
        ("tests/plugin/test_confirm.py",),
    ),
    Mutation(
        "a speed-up one of the processes read as a slowdown is not IMPROVED",
        "pytest_tesserabench/gate/rule.py",
        "((diff < 0) & (nc.high_diff >= most / 2))",
        "((diff < 0) & (nc.high_diff >= 1))",
        ("tests/gate/test_gate_rule.py",),
    ),
    Mutation(
        "--bench-confirm: the median process carries the variance of a median",
        "pytest_tesserabench/gate/rule.py",
        "    h_b, h_c = bc.shape[-1], cc.shape[-1]",
        "    h_b, h_c = bc.shape[-1], 1",
        ("tests/gate/test_gate_rule.py",),
    ),
    Mutation(
        "--bench-confirm: the run file keeps the fresh processes",
        "pytest_tesserabench/processes/hooks.py",
        "            self._keep_processes(item, again, processes)\n",
        "",
        (CONFIRM,),
    ),
    Mutation(
        "--bench-confirm: a fresh process reads the ini file named with -c",
        "pytest_tesserabench/processes/hooks.py",
        '                extra_args=["-c", str(item.config.inipath)] if item.config.inipath else [],',
        "                extra_args=[],",
        (CONFIRM,),
    ),
    Mutation(
        "--bench-confirm: tesserabench compare judges with the kept processes",
        "pytest_tesserabench/gate/pipeline.py",
        "                measure_again=measure_again if kept else None,",
        "                measure_again=None,",
        (CONFIRM, "tests/gate/test_gate_rule.py"),
    ),
    Mutation(
        "--bench-confirm: the summary line",
        "pytest_tesserabench/report/terminal.py",
        "    confirmed = confirm_line(state.records.values(), verdicts)",
        "    confirmed = None",
        (CONFIRM,),
    ),
    Mutation(
        "--bench-save-processes: the option reaches the settings",
        "pytest_tesserabench/options.py",
        '    "bench_save_processes": "save_processes",\n',
        "",
        (CONFIRM,),
    ),
    Mutation(
        "fresh processes: the hooks are registered when saving or comparing",
        PLUGIN,
        "        config.pluginmanager.register(FreshProcessHooks(state, BENCH_KEY, FRESH_KEY), FreshProcessHooks.NAME)",
        "        pass",
        (CONFIRM,),
    ),
    Mutation(
        "fresh processes: the gate is handed the way to measure a test again",
        PLUGIN,
        "            fresh.measure_again if fresh is not None else None,",
        "            None,",
        (CONFIRM,),
    ),
    Mutation(
        "--bench-save-processes: a save measures every benchmark in fresh processes",
        "pytest_tesserabench/processes/hooks.py",
        "        if self.settings.save is None or self.settings.save_processes <= 0:",
        "        if True:",
        (CONFIRM,),
    ),
    Mutation(
        "--bench-save-processes: the interpreter's timings are not measured again",
        "pytest_tesserabench/processes/hooks.py",
        "        measured = [r for r in records if r.timing_gated and state.lacks_process_draws(r.id)]",
        "        measured = [r for r in records if state.lacks_process_draws(r.id)]",
        ("tests/plugin/test_passes.py",),
    ),
    Mutation(
        "--bench-save-processes: a run that saves confirms on the processes it saves",
        "pytest_tesserabench/processes/hooks.py",
        "            kept = measured_by_the_save(again)\n            if kept is not None:",
        "            kept = measured_by_the_save(again)\n            if False:",
        (CONFIRM,),
    ),
    Mutation(
        "a save says before measuring what its fresh processes will cost",
        TERMINAL,
        "        lines.append(save_processes_line(state.process_draws(), settings.save_processes))",
        "        pass",
        (CONFIRM,),
    ),
    Mutation(
        "--bench-save-processes: not once the baseline holds enough process draws",
        "pytest_tesserabench/session.py",
        "        return self.process_draws().get(bench_id, 1) < baseline.SAVE_DRAWS",
        "        return True",
        (CONFIRM,),
    ),
    Mutation(
        "fresh processes (a save's, --bench-confirm's) are started once per run",
        "pytest_tesserabench/processes/hooks.py",
        "        if state.process_pool is None:\n",
        "        if True:\n",
        (CONFIRM,),
    ),
    Mutation(
        "--bench-save-processes: a process that dies is replaced at the next test",
        "pytest_tesserabench/processes/fresh.py",
        "                self.slots[index] = None\n                problem = problem or str(exc)",
        "                self.cannot_start = str(exc)\n                problem = problem or str(exc)",
        (CONFIRM,),
    ),
    Mutation(
        "--bench-save-processes: a save short of fresh processes says so",
        "pytest_tesserabench/processes/hooks.py",
        "        if processes.problem:\n            item.warn(",
        "        if False:\n            item.warn(",
        (CONFIRM,),
    ),
    Mutation(
        "--bench-save-processes: the baseline keeps them",
        "pytest_tesserabench/record/results.py",
        "replace(r, samples_ms=[], verdict=None, ab=None, kernels=",
        "replace(r, samples_ms=[], verdict=None, ab=None, confirm=None, kernels=",
        (CONFIRM,),
    ),
    Mutation(
        "--bench-save-processes: the gate reads them as runs of the history",
        "pytest_tesserabench/gate/pipeline.py",
        "        runs = with_processes(baseline_runs)",
        "        runs = list(baseline_runs)",
        (CONFIRM,),
    ),
    # The rebuilt gate (issue 29): each rule that can change a verdict, and what reports it.
    Mutation(
        "the threshold is the user's: a verdict is UNCHANGED only where it is ruled out",
        "pytest_tesserabench/gate/rule.py",
        'np.where(ci_high >= theta, "INCONCLUSIVE", "UNCHANGED")',
        'np.where(diff >= theta, "INCONCLUSIVE", "UNCHANGED")',
        ("tests/gate/test_gate_rule.py",),
    ),
    Mutation(
        "a verdict the removed shift outweighs is decided neither way",
        "pytest_tesserabench/gate/rule.py",
        'by_shift = ~by_processes & (status != "INCONCLUSIVE") & dominated',
        "by_shift = ~by_processes & dominated & False",
        ("tests/gate/test_gate_rule.py",),
    ),
    Mutation(
        "the shift's degrees of freedom reach the interval",
        "pytest_tesserabench/gate/rule.py",
        "df = np.where(shift_var > 0, var**2",
        "df = np.where(shift_var < 0, var**2",
        ("tests/gate/test_gate_rule.py", "tests/gate/test_gate_simulation.py"),
    ),
    Mutation(
        "a baseline process far from the others is left out",
        "pytest_tesserabench/gate/pipeline.py",
        "far = np.abs(values - np.median(values)) > config.outlier_z * scale",
        "far = np.abs(values - np.median(values)) < 0",
        ("tests/gate/test_gate_rule.py",),
    ),
    Mutation(
        "detectable: the size a verdict could have caught",
        "pytest_tesserabench/gate/rule.py",
        "detectable = np.expm1((stats.t.ppf(1 - level, df) + stats.t.ppf(config.power, df)) * sd)",
        "detectable = np.expm1(stats.t.ppf(config.power, df) * sd)",
        (WIRING, "tests/gate/test_gate_simulation.py"),
    ),
    Mutation(
        "--bench-unresolved=fail fails an INCONCLUSIVE test",
        "pytest_tesserabench/plugin.py",
        'unresolved_fails = self.state.settings.unresolved == "fail" and self.state.comparison is not None',
        "unresolved_fails = False",
        (WIRING,),
    ),
    Mutation(
        "a save says which benchmarks the gate cannot judge at the threshold",
        "pytest_tesserabench/outputs.py",
        "            if undetectable:\n",
        "            if False:\n",
        ("tests/plugin/test_gate_e2e.py",),
    ),
    Mutation(
        "tesserabench show: what the gate can catch",
        "pytest_tesserabench/cli.py",
        "        _print_detectable(console, data.runs, args)\n",
        "",
        ("tests/gate/test_cli_report.py",),
    ),
    Mutation(
        "--bench-compare says when the baseline crept",
        TERMINAL,
        "    creep = creep_line(state)\n",
        "    creep = None\n",
        ("tests/gate/test_history_steps.py",),
    ),
    Mutation(
        "against another machine's baseline a run measures in one pass",
        PLUGIN,
        "        _one_pass_when_no_timing_is_compared(state)\n",
        "",
        ("tests/plugin/test_static_analysis.py",),
    ),
    Mutation(
        "the timer is chosen from the first call's result too",
        "pytest_tesserabench/measure/fixture.py",
        "interpreted=interpreted, result=result)",
        "interpreted=interpreted)",
        ("tests/plugin/test_timing.py",),
    ),
    Mutation(
        "the CUDA timers flush L2 by reading",
        "pytest_tesserabench/measure/timing.py",
        "        self.flush_buffer.sum()\n",
        "        self.flush_buffer.zero_()\n",
        ("tests/plugin/test_timing.py",),
    ),
    Mutation(
        "under ncu each benchmark marks its profiled call",
        "pytest_tesserabench/measure/fixture.py",
        "                profiling.mark_benchmark()\n",
        "",
        ("tests/plugin/test_fixture.py",),
    ),
    Mutation(
        "--bench-ncu splits a test's kernels between its benchmarks",
        PLUGIN,
        "profiling.ncu_for_records(counters, len(records))",
        "[counters] + [None] * (len(records) - 1)",
        ("tests/plugin/test_fixture.py",),
    ),
    Mutation(
        "the summary names a benchmark past --bench-threads",
        TERMINAL,
        "    if beyond:\n        terminalreporter.write_line(beyond, yellow=True)\n",
        "",
        ("tests/plugin/test_threads.py",),
    ),
    Mutation(
        "A/B times the interpreter's timings in the lead alone",
        "pytest_tesserabench/ab/lead.py",
        "if unpaired is None and timer.name in UNGATED_TIMERS:",
        "if False:",
        ("tests/plugin/test_ab.py",),
    ),
    Mutation(
        "A/B's other served processes warm up like their side's first",
        "pytest_tesserabench/ab/lead.py",
        "process.warm_up(cpu, like=leader)",
        "process.warm_up(cpu)",
        ("tests/plugin/test_ab.py",),
    ),
    Mutation(
        "a baseline keeps its kernels' work figures",
        "pytest_tesserabench/record/results.py",
        "            (kept.setdefault(outer[0], {}) if outer else kept)[key] = source[key]\n",
        "            pass\n",
        ("tests/gate/test_kernel_gate.py",),
    ),
    Mutation(
        "a save names the processes its baseline leaves out",
        "pytest_tesserabench/outputs.py",
        "(state.left_out(path) if saved else {}).items()",
        "{}.items()",
        (CONFIRM,),
    ),
    Mutation(
        "the plugin's earlier passes are corrected for the memory's speed, as a run file's are read",
        "pytest_tesserabench/passes_hooks.py",
        "readings if len(readings) == len(earlier) else []",
        "[]",
        ("tests/plugin/test_run_effect_plugin.py",),
    ),
    Mutation(
        "a run file's test is judged with all its benchmarks measured, as the plugin judges it",
        "pytest_tesserabench/gate/pipeline.py",
        "            add_measured(history, measured, candidate.benchmarks[bench_id])\n        for bench_id in ids:\n",
        "            add_measured(history, measured, candidate.benchmarks[bench_id])\n",
        ("tests/plugin/test_run_effect_plugin.py",),
    ),
    Mutation(
        "a run file's fresh processes keep the seconds they cost",
        "pytest_tesserabench/gate/pipeline.py",
        "Processes([p for p in measured if p], seconds, source=",
        "Processes([p for p in measured if p], 0.0, source=",
        ("tests/plugin/test_run_effect_plugin.py",),
    ),
    Mutation(
        "a tensor's dtype is recorded as a precision policy names it",
        "pytest_tesserabench/measure/fixture.py",
        "        return policy_of_dtype(name) or name  #",
        "        return name  #",
        ("tests/plugin/test_fixture.py",),
    ),
    Mutation(
        "the tables say once what noisy means",
        "pytest_tesserabench/report/terminal.py",
        "    return out + noisy_legend(measured, width)\n",
        "    return out\n",
        ("tests/plugin/test_report.py",),
    ),
    Mutation(
        "a comparison names its baseline's file as the repository does",
        "pytest_tesserabench/history/comparison.py",
        "({_shown(self.path)}, {runs}",
        "({self.path}, {runs}",
        ("tests/plugin/test_run_effect_plugin.py",),
    ),
    Mutation(
        "a save names left-out processes that are its own as such",
        "pytest_tesserabench/gate/pipeline.py",
        "all(self.saves[j] == newest for j in slow)",
        "False",
        (CONFIRM,),
    ),
    Mutation(
        "a run measured otherwise than its baseline is refused before measuring",
        "pytest_tesserabench/plugin.py",
        "            _refuse_measuring_otherwise(state)\n",
        "            pass\n",
        ("tests/plugin/test_passes.py",),
    ),
    Mutation(
        "tesserabench history asks for ruptures whatever the history's length",
        "pytest_tesserabench/cli.py",
        "        ruptures_library()\n    except MissingLibrary as exc:\n",
        "        pass\n    except MissingLibrary as exc:\n",
        ("tests/gate/test_history_steps.py",),
    ),
    Mutation(
        "a save that cannot judge some benchmarks says when the machine's speed moved within the run",
        "pytest_tesserabench/outputs.py",
        "moved = speed_moved(state.records.values(), settings.threshold)",
        "moved = None",
        ("tests/plugin/test_gate_e2e.py",),
    ),
    Mutation(
        "a save names only the left-out processes slower by the threshold",
        "pytest_tesserabench/session.py",
        "history.left_out_times(slower_by=history.config.threshold)",
        "history.left_out_times()",
        (CONFIRM,),
    ),
    Mutation(
        "a benchmark's threads are read at the most CPUs a baseline run kept busy",
        "pytest_tesserabench/gate/conditions.py",
        "    return max(usual) if usual else None\n",
        "    return statistics.median(usual) if usual else None\n",
        ("tests/gate/test_conditions.py",),
    ),
    Mutation(
        "a pool slower by the threshold leaves a multi-threaded slowdown undecided",
        "pytest_tesserabench/gate/conditions.py",
        "read[0] < min(verdict.ci[0], 1 + (verdict.threshold or config.threshold))",
        "read[0] < verdict.ci[0]",
        ("tests/gate/test_conditions.py",),
    ),
    Mutation(
        "a multi-threaded benchmark in a process without torch gets the BLAS canary",
        "pytest_tesserabench/measure/sampling.py",
        "            elif (blas := canary.measure_blas_canary()) is not None:  # (no torch in the process)\n",
        "            elif False:\n",
        ("tests/plugin/test_sampling.py",),
    ),
    Mutation(
        "the pool condition reads the BLAS canary too",
        "pytest_tesserabench/gate/conditions.py",
        '("blas_canary_ms", "numpy\'s BLAS threads")',
        '("pool_canary_ms", "numpy\'s BLAS threads")',
        ("tests/gate/test_conditions.py",),
    ),
    Mutation(
        "bench() checks what the first call returned (work not yet done, a memoised function)",
        "pytest_tesserabench/measure/fixture.py",
        "        _refuse(label, integrity.check_first_call(fn, result, allowed))\n",
        "",
        ("tests/plugin/test_integrity.py",),
    ),
    Mutation(
        "a save from a modified checkout says so",
        "pytest_tesserabench/outputs.py",
        '                if commit.get("dirty") and commit.get("sha"):\n',
        "                if False:\n",
        ("tests/plugin/test_run_effect_plugin.py",),
    ),
    Mutation(
        "the comparison prints only the hints with a cause of their own",
        "pytest_tesserabench/report/comparison_table.py",
        "if hints and v.hint_text and v.hint()",
        "if hints and v.hint()",
        ("tests/plugin/test_wiring.py",),
    ),
    Mutation(
        "every measuring process fixes the allocator's thresholds",
        "pytest_tesserabench/plugin.py",
        "        allocator.fix_thresholds()\n",
        "        pass\n",
        ("tests/plugin/test_allocator.py",),
    ),
    Mutation(
        "the suite line reads the canaries of every benchmark",
        "pytest_tesserabench/gate/pipeline.py",
        "            canary_records=records,\n",
        "",
        ("tests/gate/test_conditions.py",),
    ),
    Mutation(
        "the conditions read the pool canary",
        "pytest_tesserabench/gate/conditions.py",
        "    verdicts = pool_slow(records, verdicts, baseline_runs, config)\n",
        "",
        ("tests/gate/test_conditions.py",),
    ),
    Mutation(
        "a multi-threaded benchmark's passes take the pool canary",
        "pytest_tesserabench/measure/sampling.py",
        "                result.pool_canary_ms.append(pool)\n",
        "                pass\n",
        ("tests/plugin/test_sampling.py",),
    ),
    Mutation(
        "passes pool their pool canaries",
        "pytest_tesserabench/measure/passes.py",
        "        pool_canary_ms=[c for part in parts for c in part.pool_canary_ms],\n",
        "",
        ("tests/plugin/test_passes.py",),
    ),
    Mutation(
        "a record keeps its pool canaries",
        "pytest_tesserabench/measure/fixture.py",
        "                pool_canary_ms=tuple(m.pool_canary_ms),\n",
        "",
        ("tests/plugin/test_passes.py",),
    ),
    Mutation(
        "a kernel run by the interpreter is timed without a budget",
        "pytest_tesserabench/measure/fixture.py",
        "budget = sampling.Budget(max_time=0.0, min_rounds=rounds,",
        "budget = sampling.Budget(max_time=settings.max_time, min_rounds=rounds,",
        ("tests/plugin/test_passes.py",),
    ),
    Mutation(
        "timings against another machine's baseline are said under the results",
        TERMINAL,
        "        terminalreporter.write_line(elsewhere, red=not figures, yellow=figures)",
        "        pass",
        ("tests/plugin/test_static_analysis.py",),
    ),
    Mutation(
        "--bench-unresolved=fail fails a timing another machine's baseline cannot judge",
        PLUGIN,
        "            elif elsewhere and record.timing_gated and record.measured_rounds:",
        "            elif False:",
        ("tests/plugin/test_static_analysis.py",),
    ),
    Mutation(
        "--bench-unresolved=fail refuses a run with nothing to compare with",
        PLUGIN,
        '        if state.not_compared and settings.unresolved == "fail":',
        "        if False:",
        ("tests/plugin/test_gate_e2e.py",),
    ),
    Mutation(
        "--bench-work-threshold reaches history mode",
        "pytest_tesserabench/history/comparison.py",
        ", work_threshold=self.settings.work_threshold",
        "",
        ("tests/plugin/test_static_analysis.py",),
    ),
    Mutation(
        "--bench-work-threshold reaches A/B",
        SESSION,
        ", work_threshold=self.settings.work_threshold",
        "",
        ("tests/plugin/test_ab_result.py",),
    ),
    Mutation(
        "an fp32 check of a TF32 dot warns",
        "pytest_tesserabench/measure/fixture.py",
        "            if tf32:",
        "            if False:",
        ("tests/plugin/test_static_analysis.py",),
    ),
)


def copy_tree(destination: Path) -> None:
    listed = (
        subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def stale() -> list[str]:
    """The mutations whose text is no longer found exactly once in its file (the code moved)."""
    out = []
    for mutation in MUTATIONS:
        path = ROOT / mutation.file
        count = path.read_text().count(mutation.old) if path.is_file() else 0
        if count != 1:
            out.append(f"{mutation.name}: {mutation.file}: found {count} times")
    return out


def run(mutation: Mutation) -> tuple[str, float]:
    with tempfile.TemporaryDirectory(prefix="tesserabench-mutant-") as folder:
        tree = Path(folder)
        copy_tree(tree)
        path = tree / mutation.file
        text = path.read_text()
        if text.count(mutation.old) != 1:
            return f"NOT APPLIED ({mutation.old!r} found {text.count(mutation.old)} times)", 0.0
        path.write_text(text.replace(mutation.old, mutation.new))
        env = {**os.environ, "PYTHONPATH": str(tree)}  # subprocesses import the mutant too
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *mutation.tests],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
        )
        elapsed = time.perf_counter() - start
        if done.returncode == 0:
            return "SURVIVED", elapsed
        # The outer run's own summary lines (pytester runs inside print theirs too).
        failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED tests/", "ERROR tests/"))]
        return f"KILLED by {failed[0].split(' - ')[0] if failed else 'exit ' + str(done.returncode)}", elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only mutations whose name contains this")
    parser.add_argument("--check", action="store_true", help="only say which mutations no longer apply")
    args = parser.parse_args()
    if args.check:
        gone = stale()
        print("\n".join(gone) or f"all {len(MUTATIONS)} mutations apply")
        return 1 if gone else 0
    survived = 0
    for mutation in MUTATIONS:
        if args.k not in mutation.name:
            continue
        verdict, seconds = run(mutation)
        survived += not verdict.startswith("KILLED")
        print(f"{mutation.name:48s} {verdict} ({seconds:.0f} s)", flush=True)
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
