"""The shared typed configuration: what the gateway, control, the simulator and the Triton python
backends all read, below all of them and above the pure core (``scheduling``).

Every file is read once at the edge into frozen, validated objects (``StrictModel``); a bad file
raises ``ConfigError`` naming the file and the field. Modules: ``stack`` (pools, models, Triton
launch settings), ``scheduling`` (policy, SLOs, capacity profiles -> the core's types),
``tenants`` (API keys -> tenants), ``control`` (the control plane's settings), ``workers`` (where
each worker listens), ``engine`` (engine parameters of LLM models), ``paths`` (the local stack's
folders).
"""
