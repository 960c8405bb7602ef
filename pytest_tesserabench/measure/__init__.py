"""Measuring: the ``bench`` fixture (``fixture``) and its time limit (``time_limit``), the
sampling plan and stopping rule (``sampling``), the timers (``timing``: CPU, CUDA events, CUDA
graphs, the L2 flush outside the timed window), interleaved passes (``passes``), precision
policies and accuracy (``precision``, ``accuracy``), what a measurement uses besides its timer
(``instruments``: the device lock, kernel capture, telemetry, static analysis) and the canary
(``canary``). It imports the record and the machine; never the gate, history or reports.
"""
