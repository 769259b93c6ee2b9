"""Paper 003's two strategies, one class each, registered in ``STRATEGIES`` (name ->
object; ``BackpressureModel.strategies`` is its keys). Each is a ``packet_network.Strategy``:
what the network asks of a strategy is declared there, beside the network, so this
module imports the network and not the other way round.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, ClassVar

import simpy

from balancebench.core.cost_model import plan_clock
from balancebench.models.backpressure.migration_rules import (
    CREDIT,
    MIGRATION,
    branch_scores,
    is_backpressured,
    migration_routes,
    released_nodes,
)
from balancebench.models.backpressure.packet_network import Network, Strategy


class CreditStrategy:
    """``credit`` (baseline, Fig. 5): Flink's credit-based flow control on every link into
    a branch or the sink, no migration. Its mechanism is the network's ``credit_loop``;
    one credit-grant round is its decision."""

    name: ClassVar[str] = CREDIT
    timed_credit_rounds: ClassVar[bool] = True

    def flow_control(self, params: dict[str, Any]) -> str:
        return CREDIT

    def start(self, net: Network) -> None:
        """Nothing of its own: the credit loops run because the flow control is credit."""


class MigrationStrategy:
    """``migration`` (§2, Algorithm 1): the paper's stop/resume nodes (or credits, Param
    ``migration_flow_control``), plus a detection loop that lists back-pressured branches,
    scores them and routes listed tags to the lightest unlisted branch."""

    name: ClassVar[str] = MIGRATION
    timed_credit_rounds: ClassVar[bool] = False

    def flow_control(self, params: dict[str, Any]) -> str:
        return params["migration_flow_control"]

    def start(self, net: Network) -> None:
        net.env.process(self.detection_loop(net))

    def detection_loop(self, net: Network) -> Generator[simpy.Event, Any, None]:
        """Every ``detection_interval_s``: one timed ``decide``."""
        interval = net.params["detection_interval_s"]
        last_in = [0.0] * net.n_branches
        last_out = [0.0] * net.n_branches
        while True:
            yield net.env.timeout(interval)
            started = plan_clock()
            self.decide(net, interval, last_in, last_out)
            net.decision_times_s.append(plan_clock() - started)

    def decide(
        self, net: Network, interval: float, last_in: list[float], last_out: list[float]
    ) -> None:
        """Detection (§2.1), recovery (step 5), scoring and routing (steps 3-4)."""
        p = net.params
        use = [node.queue.use_share for node in net.branches]
        input_mb = [node.queue.input_mb - last_in[b] for b, node in enumerate(net.branches)]
        output_mb = [node.sent_mb - last_out[b] for b, node in enumerate(net.branches)]
        for b, node in enumerate(net.branches):
            last_in[b], last_out[b] = node.queue.input_mb, node.sent_mb
        released = released_nodes(net.listed, use, p["recovery_queue_share"], p["recovery_rule"])
        if released:
            net.listed -= released
            net.recoveries += len(released) if p["recovery_rule"] == "per_node" else 1
        for b in range(net.n_branches):
            if b not in net.listed and is_backpressured(
                use[b], input_mb[b], output_mb[b], p["backpressure_queue_share"]
            ):
                net.listed.add(b)
                net.detections += 1
        io = [(i - o) / interval for i, o in zip(input_mb, output_mb, strict=True)]
        scores = branch_scores(
            use, io, net.branch_bandwidth_mb_per_s, p["alpha"], p["beta"], p["bw_normalisation"]
        )
        routes = migration_routes(net.n_branches, net.listed, scores)
        if routes != net.routes:
            for tag, (old, new) in enumerate(zip(net.routes, routes, strict=True)):
                if new != old and new != tag:
                    net.migrations += 1
                    if len(net.migration_log) < 200:
                        net.migration_log.append(
                            {"time_s": round(net.env.now, 6), "heavy": tag, "light": new}
                        )
            net.routes = routes
            net.source.wake.notify()


#: Strategy name -> strategy, in the model's order (credit first: the baseline).
STRATEGIES: dict[str, Strategy] = {s.name: s for s in (CreditStrategy(), MigrationStrategy())}
