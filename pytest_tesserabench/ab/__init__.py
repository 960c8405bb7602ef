"""Same-job A/B against a git ref (``--bench-ab=REF``).

The candidate (A: the working tree, this pytest) and the reference (B: REF checked out into a
worktree under the pytest cache) are measured in one job, interleaved in short blocks (ABBA), and
compared pair by pair, so whatever the machine does to both sides cancels.

* ``worktree``: resolve REF, check it out, clean up (also after Ctrl-C or a killed run).
* ``reference``: the A side's handle on the B process (a pytest run in the worktree, serving).
* ``serve``: the B side: collects the same tests and runs one on request, measuring blocks of
  rounds when asked.
* ``interleave``: the ABBA schedule and the paired stopping rule.

Why a long-lived B process rather than importing both trees into one: each tree's code must be
imported by its own interpreter (module names collide: ``kernels.matmul`` exists on both sides),
and test fixtures (inputs, compiled kernels) should be set up once per test, not once per block.
A pytest process in the worktree gives both: it collects the same tests with the REF's conftest
and fixtures, and keeps the test's objects alive while the A side asks for blocks.
"""
