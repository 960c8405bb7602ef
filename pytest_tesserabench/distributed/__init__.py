"""Benchmarks across processes: pytest under torchrun, one torch.distributed rank per process.

``torchrun --nproc-per-node=N -m pytest ... --bench`` starts N pytest sessions; each is a rank.
They collect the same tests (checked), run them in the same order, measure each ``bench()`` call
together (rounds start on a barrier; a sample is the slowest rank's) and agree on every test's
outcome, so a rank that raises fails the test on every rank, named. Rank 0 alone prints the
summary and writes files. torchrun launches and rendezvouses (also across nodes); this package
only uses torch.distributed.

- ``launch``: is this process a torchrun rank, and with which backend (no torch import).
- ``world``: the process group, a gloo control group, the store; the ``Dist`` fixture value.
  It imports torch, and is imported only under torchrun or for the ``dist`` fixture.
- ``agreement``: pure rules: the same selection everywhere, one outcome per test.
- ``mesh``: device-mesh shapes for ``@pytest.mark.bench_mesh``.
- ``hooks``: the pytest hooks of a torchrun session (a plugin object, like pytest-xdist's).
"""
