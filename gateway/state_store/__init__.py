"""The state several gateways share (``protocol.StateStore``): ``embedded`` (in this process, the
default) or ``redis``."""
