"""Pipelines of engine stages: the Scenario, the TCP run, host paths.

``sim`` is the only floor that composes ``engine`` stages; the engine below it
never imports it.
"""
