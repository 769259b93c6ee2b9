"""The JVM router in a test: used where ``make setup`` compiled it, skipped where no JDK
compiler is found, and a failure where javac is installed but the session cannot use it."""

from __future__ import annotations

import shutil

import pytest


def jvm_router_or_skip(spark) -> None:
    from balancebench.spark import jvm_routing

    path, why = jvm_routing.routing_path(spark)
    if path != "jvm":
        if shutil.which("javac") is None:
            pytest.skip(f"no JDK compiler here: {why}")
        pytest.fail(f"javac is installed but the JVM router is not used: {why}")
