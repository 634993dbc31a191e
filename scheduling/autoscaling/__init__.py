"""The capacity controller's pure policy: signals in, replica decisions out.

``decide(snapshot, config, state, now_s) -> (decisions, new_state)`` is called on a fixed period
by the control service (live workers) and by the simulator (simulated pools); see
``docs/autoscaling.md`` for the formula."""

from scheduling.autoscaling.policy import decide
from scheduling.autoscaling.types import (
                                          Action,
                                          AutoscalingConfig,
                                          ControllerState,
                                          ModelPolicy,
                                          ModelSignals,
                                          Override,
                                          PoolModel,
                                          PoolSignals,
                                          Reason,
                                          ScaleDecision,
                                          ScalingTarget,
                                          Snapshot,
)

__all__ = ["Action", "AutoscalingConfig", "ControllerState", "ModelPolicy", "ModelSignals", "Override", "PoolModel",
           "PoolSignals", "Reason", "ScaleDecision", "ScalingTarget", "Snapshot", "decide"]
