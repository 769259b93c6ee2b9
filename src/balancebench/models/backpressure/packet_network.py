"""Paper 003's network in SimPy: source -> branches -> sink, links with bandwidth and
delay, stop/resume or credit flow control, the data source, the sink's partial counts.

The strategy (``backpressure_strategies``) is an object the network asks for its flow
control, for whether a credit round is its timed decision, and to start its own processes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
import simpy

from balancebench.core.cost_model import plan_clock
from balancebench.core.lazy import lazy_module
from balancebench.models.backpressure.migration_rules import (
    CREDIT,
    STOP_RESUME,
    credit_grant,
    exclusive_slots,
    record_segment,
)
from balancebench.models.backpressure.queues import NodeQueue, consumer_process

# Loaded on first use: the model registry and its Params are read without it (lazy.py).
pd = lazy_module("pandas")

SERVICE_DISTRIBUTIONS = ("deterministic", "exponential")
DATA_SOURCE_PAUSES = ("shift", "catch_up")


class _Wake:
    """A re-armable event: a blocked sender waits on ``event``; ``notify`` wakes it."""

    __slots__ = ("env", "event")

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.event = env.event()

    def notify(self) -> None:
        if not self.event.triggered:
            self.event.succeed()
        self.event = self.env.event()


@dataclass
class _Channel:
    """A link into a node: sender-side gate (credits or stop flag), receiver-side slots."""

    sender_wake: _Wake
    bandwidth_mb_per_s: float
    delay_s: float
    mode: str
    credit: int = 0
    stopped: bool = False
    exclusive: int = 0
    queued: int = 0
    outstanding: int = 0
    stopped_since_s: float = 0.0
    stopped_total_s: float = 0.0

    def can_send(self) -> bool:
        return self.credit > 0 if self.mode == CREDIT else not self.stopped


class _Node:
    def __init__(
        self,
        sim: Network,
        name: str,
        capacity: int,
        service_rate_mb_per_s: float,
        mode: str,
    ) -> None:
        self.sim = sim
        self.name = name
        self.mode = mode
        self.service_rate_mb_per_s = service_rate_mb_per_s
        self.queue = NodeQueue(sim.env, capacity, size_of=lambda item: sim.size_mb[item[0]])
        self.inputs: list[_Channel] = []
        self.wake = _Wake(sim.env)
        self.stopped = False
        self.sent_mb = 0.0
        self.blocked_s = 0.0
        self.queue.after_put.append(self._after_put)
        self.queue.after_get.append(self._after_get)

    def _after_put(self, _item: tuple[int, int]) -> None:
        if self.mode == STOP_RESUME and not self.stopped and len(self.queue) >= self.queue.capacity:
            self.stopped = True
            for channel in self.inputs:
                self.sim.signal(channel, stop=True, counted=self.name != "source")

    def _after_get(self, item: tuple[int, int]) -> None:
        if self.mode == CREDIT:
            self.inputs[item[1]].queued -= 1
        elif self.stopped and len(self.queue) <= self.sim.resume_share * self.queue.capacity:
            self.stopped = False
            for channel in self.inputs:
                self.sim.signal(channel, stop=False, counted=False)


class Strategy(Protocol):
    """What the network asks of a strategy (``backpressure_strategies.STRATEGIES``), and
    nothing else depends on which strategy runs:

    - ``flow_control(params)``: the flow control of the branch and sink inputs
      (``STOP_RESUME`` or ``CREDIT``);
    - ``timed_credit_rounds``: whether one credit-grant round is the strategy's decision
      (timed into ``plan_time_ms``);
    - ``start(net)``: start the strategy's own SimPy processes (after the consumers and
      the credit loops)."""

    name: ClassVar[str]
    timed_credit_rounds: ClassVar[bool]

    def flow_control(self, params: dict[str, Any]) -> str: ...

    def start(self, net: Network) -> None: ...


class Network:
    """Paper 003's network for one strategy (an object of
    ``backpressure_strategies.STRATEGIES``) on one packet table."""

    def __init__(
        self,
        params: dict[str, Any],
        strategy: Strategy,
        packets: pd.DataFrame,
        rng: np.random.Generator,
    ) -> None:
        self.params = params
        self.strategy = strategy
        self.rng = rng
        self.env = simpy.Environment()
        self.n_branches = len(params["branch_service_rate_mb_per_s"])
        self.arrival_s = packets["time_s"].to_numpy(dtype=np.float64)
        self.tag = packets["branch"].to_numpy(dtype=np.int64)
        self.size_mb = packets["size_mb"].to_numpy(dtype=np.float64)
        self.value = packets["value"].to_numpy(dtype=np.int64)
        self.n = len(packets)
        # Offset of each packet within its tag's stream (the source is FIFO, so this is
        # also the order in which the source dispatches the tag's packets).
        self.offset = packets.groupby("branch", sort=False).cumcount().to_numpy()
        self.resume_share = params["resume_share"]
        network_mode = strategy.flow_control(params)
        self.network_mode = network_mode

        self.source = _Node(
            self, "source", params["source_queue_packets"],
            params["source_service_rate_mb_per_s"], STOP_RESUME,
        )  # fmt: skip
        self.branches = [
            _Node(
                self,
                f"branch_{b}",
                params["branch_queue_packets"][b],
                params["branch_service_rate_mb_per_s"][b],
                network_mode,
            )  # fmt: skip
            for b in range(self.n_branches)
        ]
        self.sink = _Node(
            self, "sink", params["sink_queue_packets"],
            params["sink_service_rate_mb_per_s"], network_mode,
        )  # fmt: skip
        self.data_source_wake = _Wake(self.env)
        # The data source feeds the source queue locally (no delay, stop/resume).
        self.source.inputs.append(_Channel(self.data_source_wake, math.inf, 0.0, STOP_RESUME))
        for b, branch in enumerate(self.branches):
            branch.inputs.append(
                _Channel(
                    self.source.wake,
                    params["source_link_bandwidth_mb_per_s"][b],
                    params["source_link_delay_s"][b],
                    network_mode,
                )
            )
            self.sink.inputs.append(
                _Channel(
                    branch.wake,
                    params["sink_link_bandwidth_mb_per_s"][b],
                    params["sink_link_delay_s"][b],
                    network_mode,
                )
            )
        for node in (*self.branches, self.sink):
            for channel, slots in zip(
                node.inputs, exclusive_slots(node.queue.capacity, len(node.inputs)), strict=True
            ):
                channel.exclusive = slots
        self.branch_bandwidth_mb_per_s = [
            min(
                params["source_link_bandwidth_mb_per_s"][b],
                params["sink_link_bandwidth_mb_per_s"][b],
            )
            for b in range(self.n_branches)
        ]

        # Routing and migration bookkeeping
        # (``backpressure_strategies.MigrationStrategy.decide`` updates it).
        self.routes = list(range(self.n_branches))
        self.listed: set[int] = set()
        self.segments: list[list[int]] = []
        self.migration_log: list[dict[str, Any]] = []
        self.migrated_packets = 0
        self.migrated_mb = 0.0
        self.migrations = 0
        self.recoveries = 0
        self.detections = 0
        self.decision_times_s: list[float] = []
        self.stop_signals = 0
        self.data_source_stops = 0
        self.credit_messages = 0

        # Sink state.
        self.counted_s = np.full(self.n, np.nan)
        self.created_s = self.arrival_s.copy()
        self.sums = np.zeros((self.n_branches, self.n_branches), dtype=np.int64)
        self.counts = np.zeros((self.n_branches, self.n_branches), dtype=np.int64)
        self.maxima = np.zeros((self.n_branches, self.n_branches), dtype=np.int64)
        self.off_home: set[tuple[int, int, int]] = set()
        self.n_counted = 0
        self.done = self.env.event()
        self.events = 0

    # -- signals ---------------------------------------------------------------------
    def after(self, delay_s: float, action: Callable[[], None]) -> None:
        self.env.timeout(delay_s).callbacks.append(lambda _event: action())

    def signal(self, channel: _Channel, *, stop: bool, counted: bool) -> None:
        """Stop/resume to the channel's sender, arriving after the link delay."""
        if stop:
            if counted:
                self.stop_signals += 1
            else:
                self.data_source_stops += 1

        def apply() -> None:
            if stop and not channel.stopped:
                channel.stopped_since_s = self.env.now
            elif not stop and channel.stopped:
                channel.stopped_total_s += self.env.now - channel.stopped_since_s
            channel.stopped = stop
            channel.sender_wake.notify()

        self.after(channel.delay_s, apply)

    # -- processes -------------------------------------------------------------------
    def service_time_s(self, node: _Node) -> Callable[[tuple[int, int]], float]:
        rate = node.service_rate_mb_per_s
        if self.params["service_time_distribution"] == "exponential":
            return lambda item: float(self.rng.exponential(self.size_mb[item[0]] / rate))
        return lambda item: self.size_mb[item[0]] / rate

    def data_source(self) -> Generator[simpy.Event, Any, None]:
        """Emit the packets at their arrival times; a stop pauses the emission. With
        ``data_source_pause = "shift"`` the rest of the schedule moves by every pause (the
        generation resumes where it stopped); with ``"catch_up"`` it keeps its times."""
        channel = self.source.inputs[0]
        shift = self.params["data_source_pause"] == "shift"
        for i in range(self.n):
            while True:
                if channel.stopped:
                    yield self.data_source_wake.event
                    continue
                due = self.arrival_s[i] + (channel.stopped_total_s if shift else 0.0)
                if due <= self.env.now:
                    break
                yield self.env.timeout(due - self.env.now)
            self.created_s[i] = due
            yield from self.source.queue.put((i, 0))

    def send(
        self, node: _Node, packet: int, choose: Callable[[], tuple[_Node, int]]
    ) -> Generator[simpy.Event, Any, tuple[_Node, int]]:
        """Wait until flow control lets the packet go to ``choose()`` (re-asked after every
        change: routes may move), then serialise it and deliver it after the delay."""
        blocked_since = None
        while True:
            receiver, c = choose()
            channel = receiver.inputs[c]
            if channel.can_send():
                break
            if blocked_since is None:
                blocked_since = self.env.now
            yield node.wake.event
        if blocked_since is not None:
            node.blocked_s += self.env.now - blocked_since
        if channel.mode == CREDIT:
            channel.credit -= 1
        size = self.size_mb[packet]
        node.sent_mb += size
        yield self.env.timeout(size / channel.bandwidth_mb_per_s)
        self.env.process(self.deliver(receiver, c, packet))
        return receiver, c

    def deliver(self, receiver: _Node, c: int, packet: int) -> Generator[simpy.Event, Any, None]:
        channel = receiver.inputs[c]
        yield self.env.timeout(channel.delay_s)
        if channel.mode == CREDIT:
            channel.outstanding -= 1
            channel.queued += 1
        yield from receiver.queue.put((packet, c))

    def source_forward(self, item: tuple[int, int]) -> Generator[simpy.Event, Any, None]:
        packet = item[0]
        tag = int(self.tag[packet])

        def choose() -> tuple[_Node, int]:
            return self.branches[self.routes[tag]], 0

        receiver, _ = yield from self.send(self.source, packet, choose)
        branch = self.branches.index(receiver)
        if branch != tag:
            record_segment(self.segments, tag, int(self.offset[packet]), branch)
            self.migrated_packets += 1
            self.migrated_mb += self.size_mb[packet]

    def branch_forward(self, b: int) -> Callable[[tuple[int, int]], Generator]:
        def forward(item: tuple[int, int]) -> Generator[simpy.Event, Any, None]:
            yield from self.send(self.branches[b], item[0], lambda: (self.sink, b))

        return forward

    def sink_count(self, item: tuple[int, int]) -> None:
        packet = item[0]
        tag, branch, value = int(self.tag[packet]), item[1], int(self.value[packet])
        self.counted_s[packet] = self.env.now
        self.sums[tag, branch] += value
        self.counts[tag, branch] += 1
        self.maxima[tag, branch] = max(self.maxima[tag, branch], value)
        if branch != tag:
            self.off_home.add((tag, int(self.offset[packet]), branch))
        self.n_counted += 1
        if self.n_counted == self.n:
            self.done.succeed()

    def credit_loop(self, node: _Node) -> Generator[simpy.Event, Any, None]:
        """Every interval, grant each input channel its free, not yet granted slots."""
        while True:
            started = plan_clock()
            for channel in node.inputs:
                grant = credit_grant(channel.exclusive, channel.queued, channel.outstanding)
                if grant > 0:
                    channel.outstanding += grant
                    self.credit_messages += 1
                    self.after(channel.delay_s, self._credit_arrives(channel, grant))
            if self.strategy.timed_credit_rounds:
                self.decision_times_s.append(plan_clock() - started)
            yield self.env.timeout(self.params["credit_interval_s"])

    @staticmethod
    def _credit_arrives(channel: _Channel, grant: int) -> Callable[[], None]:
        def apply() -> None:
            channel.credit += grant
            channel.sender_wake.notify()

        return apply

    # -- run -------------------------------------------------------------------------
    def run(self) -> None:
        env = self.env
        env.process(self.data_source())
        env.process(
            consumer_process(
                env, self.source.queue, self.service_time_s(self.source), self.source_forward
            )
        )
        for b, node in enumerate(self.branches):
            env.process(
                consumer_process(env, node.queue, self.service_time_s(node), self.branch_forward(b))
            )
        env.process(
            consumer_process(env, self.sink.queue, self.service_time_s(self.sink), self.sink_count)
        )
        if self.network_mode == CREDIT:
            for node in (*self.branches, self.sink):
                env.process(self.credit_loop(node))
        self.strategy.start(self)
        limit_s = self.params["max_simulated_s"]
        while not self.done.triggered:
            if env.now > limit_s:
                raise RuntimeError(
                    f"backpressure: {self.n - self.n_counted} of {self.n} packets not counted "
                    f"after {limit_s} simulated s (raise max_simulated_s?)"
                )
            try:
                env.step()
            except simpy.core.EmptySchedule as exc:  # cannot happen: consumers always wait
                raise RuntimeError("backpressure: simulation stalled with packets left") from exc
            self.events += 1
