"""The live capacity controller of the local stack: replicas of each pool (``replicas.py``, planned
by ``slots.py``), the gateways' signals (``signals.py``), the control loop that calls the pure
policy in ``scheduling.autoscaling`` (``controller.py``), and its admin routes (``api.py``)."""
