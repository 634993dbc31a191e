"""The execution-time model: how long an engine iteration, a non-LLM batch, a cold start take.

Kept apart from scheduling (as in Vidur): the simulated workers ask it how long their work takes;
the scheduler sees only the capacity profile built from it (``gpu.LlmPerf.profile``).

- ``protocol``: what an LLM worker needs from a timing model (``EngineLimits``, ``IterationWork``,
  ``LlmPerfModel.iteration_s``);
- ``gpu``: GPUs from published figures (``LlmPerf``, ``BatchedPerf``), with the constants it uses
  and their sources in ``hardware`` (``GpuSpec``, ``LlmArchitecture``, ``Efficiency``) and its
  fidelity to the published points it was calibrated on in ``fidelity``;
- ``fitted``: a real engine measured by a bench command (``FittedPerf``), from the step-time law
  that ``step_fit`` fits to its timed steps.
"""
