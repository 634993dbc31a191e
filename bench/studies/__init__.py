"""One-off studies: measurements made once to choose a setting or to fit the simulator, kept runnable.

Each is a command of the bench entry point, ``python -m bench studies.NAME [args]`` (``python -m
bench list`` lists them). The simulator's fidelity pipeline: ``fit_cpu_worker`` (the engine's step
law), ``served_cost`` and ``served_ttft`` (what serving adds to it), ``fidelity_real`` (a small
trace, ``fidelity_trace``, replayed for real by ``replay`` and simulated) and ``fidelity_report``
(the replays side by side). The settings chosen by measurement: ``stalls``, ``prefix_copy``,
``quantization``, ``engine_threads``. Studies build on the benchmarks' modules; nothing outside
this package imports it.
"""
