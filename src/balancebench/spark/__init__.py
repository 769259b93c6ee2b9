"""Spark execution: routing, the per-node operators and task metrics.

Strategies never import this package; it imports them. Routing is Spark SQL only (no
Python UDF): the same Murmur3 decisions as ``balancebench.routing``, evaluated by the JVM.
"""
