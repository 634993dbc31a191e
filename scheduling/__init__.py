"""The pure scheduling core: types and policies, no I/O, no clock, no asyncio.

Time comes in as ``now`` (seconds), randomness as an injected ``random.Random``, and decisions
go out as frozen dataclasses. The gateway drives these objects from asyncio, the simulator from an
event heap.
"""
