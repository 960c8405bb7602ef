"""Same-job A/B against a git ref (``--bench-ab=REF``).

The candidate (A: the working tree) and the reference (B: REF checked out into a worktree under
the pytest cache) are measured in one job, interleaved in short blocks (ABBA), and compared pair by
pair, so whatever the machine does to both sides cancels; several served processes per side, so
what a process does to its own timings averages out and shows in the interval.

* ``worktree``: resolve REF, check it out, clean up (also after Ctrl-C or a killed run).
* ``interleave``: the ABBA schedule over process pairs.
* ``lead``: the pytest that runs the session: starts the served processes, runs each test in all
  of them, interleaves, hands the pairs to the rule (gate.paired.process_decision).

Why long-lived served processes rather than importing both trees into one: each tree's code must
be imported by its own interpreter (module names collide: ``kernels.matmul`` exists on both
sides), and test fixtures (inputs, compiled kernels) should be set up once per test, not once per
block. A pytest process in each tree (``processes.served``, the fresh processes' machinery)
gives both: it collects the same tests with the tree's own
conftest and fixtures, and keeps the test's objects alive while the lead asks for blocks. Why
served on both sides, several each: a process's timings carry a steady bias of its own (memory
layout, allocator state), 1-10% on CPU code here, that no interleaving cancels (docs/gate.md).
"""
