"""Baselines that are not configurations of the scheduling core (those live in ``policies``)."""
