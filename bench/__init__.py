"""Benchmarks of the serving stack and one-off studies, all run through one entry point.

``python -m bench list`` lists the commands; ``python -m bench NAME [args]`` runs one
(``bench.commands`` is the table of names and modules). ``make bench`` runs the suite (``suite``:
the gateway against direct Triton) and rewrites its generated block of ``docs/benchmarks.md``
(``figures``). The other benchmarks are modules of their own (``continuous``, ``ceiling``,
``shared_prefix``, ``soak``, ``push``, ``rollout``, ``tenancy/``); ``studies/`` holds the one-off
studies. What they share: ``harness`` (start and stop a private stack on the bench ports, or use a
running one), ``workload`` (the fixed inputs), ``clients`` (one request per model, gateway and
direct), ``chat`` (streaming generation), ``load`` (closed-loop runner and statistics), ``cpu`` and
``contention`` (CPU time, pinning, other processes' share of the cores), ``triton_stats`` (Triton's
and the engine's counters), ``report`` (the suite's Markdown) and ``record`` (the command line, the
machine and progress lines every report carries).
"""
