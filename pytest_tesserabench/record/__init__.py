"""The record: what a run measured and what the gate said, in one typed form and one JSON form
(``results``: ``BenchRecord``, ``Verdict``, ``RunDocument``, validated on the way in), the
summary statistics of its samples (``stats``), files written atomically under a lock
(``files``), locks that say who holds them and are waited for a bounded time (``held_lock``),
and the units every report prints (``units``). It imports nothing else of the package: every
other concern reads and writes records.
"""
