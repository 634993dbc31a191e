"""The ``shunter`` command (``cli.main:app``): the local stack, operator commands, the simulator."""
