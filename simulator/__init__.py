"""Discrete-event simulator of GPU pools driving the ``scheduling`` core in virtual time.

Empty until the simulator issue lands; the folder exists so the import contracts hold from day one.
"""
