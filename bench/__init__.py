"""Benchmark harness: the gateway against direct Triton, side by side, on the same stack.

Run ``python -m bench.run --help``. Modules: ``stack`` (start/stop a private stack on its own
ports), ``workload`` (the fixed inputs), ``clients`` (one request per model, gateway and direct),
``chat`` (streaming generation), ``load`` (closed-loop runner and statistics), ``report``
(JSON and Markdown) and ``run`` (the CLI).
"""
