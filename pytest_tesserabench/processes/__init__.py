"""Pytest processes of a tree that measure a test's calls on request, for the session that
started them.

* ``served``: the session's handle on one such process (start, connect, run a test, warm up,
  measure blocks of rounds, close), and ``ProcessError`` when one cannot start or dies.
* ``serve``: the process's own end (``--bench-ab-serve``): collects the same tests and runs one on
  request.
* ``fresh``: a run's fresh processes (``ProcessPool``), which measure a save's benchmarks again
  (``--bench-save-processes``) and an undecided or failing one in history mode
  (``--bench-confirm``), each as a run of its own for the gate.
* ``zygote``: A/B's served processes forked from one process that imported the heavy libraries
  once (a torch import each was a third of an A/B run on a 2-CPU runner).
* ``lead_bound``: such a process ends when the session that started it dies, even inside a test.
* ``leftovers``: the temp folders of a session killed before it could remove them, removed by the
  next one.

A/B (``ab/``) serves both of its sides with them. This package imports the record, the sampling
plan and the gate's ``Processes`` type; nothing of A/B, history or reports.
"""
