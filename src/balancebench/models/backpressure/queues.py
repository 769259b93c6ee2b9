"""A fixed-length queue + single consumer (SimPy), shared by the network model and the
M/M/1 check (``simulate_mm1``)."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy


class NodeQueue:
    """A fixed-length FIFO (``simpy.Store``) with hooks after every put and get.

    ``put``/``get`` are generators (``yield from``): a put into a full queue waits.
    ``input_mb`` accumulates the volume put (``size_of`` maps an item to MB).
    """

    def __init__(
        self,
        env: simpy.Environment,
        capacity: int,
        size_of: Callable[[Any], float] = lambda _item: 1.0,
    ) -> None:
        self.env = env
        self.capacity = capacity
        self.store = simpy.Store(env, capacity=capacity)
        self.size_of = size_of
        self.input_mb = 0.0
        self.peak_use_share = 0.0
        self.after_put: list[Callable[[Any], None]] = []
        self.after_get: list[Callable[[Any], None]] = []

    def __len__(self) -> int:
        return len(self.store.items)

    @property
    def use_share(self) -> float:
        return len(self.store.items) / self.capacity

    def put(self, item: Any) -> Generator[simpy.Event, Any, None]:
        yield self.store.put(item)
        self.input_mb += self.size_of(item)
        self.peak_use_share = max(self.peak_use_share, self.use_share)
        for hook in self.after_put:
            hook(item)

    def get(self) -> Generator[simpy.Event, Any, Any]:
        item = yield self.store.get()
        for hook in self.after_get:
            hook(item)
        return item


def consumer_process(
    env: simpy.Environment,
    queue: NodeQueue,
    service_time_s: Callable[[Any], float],
    forward: Callable[[Any], Generator[simpy.Event, Any, Any] | None],
) -> Generator[simpy.Event, Any, None]:
    """A node's single consumer: take the head item, serve it, hand it on (``forward``
    may block, e.g. on flow control; None = nothing to do)."""
    while True:
        item = yield from queue.get()
        yield env.timeout(service_time_s(item))
        step = forward(item)
        if step is not None:
            yield from step


def simulate_mm1(
    arrival_rate: float, service_rate: float, customers: int, seed: int
) -> dict[str, float]:
    """One ``NodeQueue`` + ``consumer_process`` with Poisson arrivals and exponential
    service, run for ``customers`` customers: mean sojourn (arrival -> service end) vs the
    M/M/1 value ``1 / (mu - lambda)``."""
    if not 0 < arrival_rate < service_rate:
        raise ValueError(
            f"arrival_rate: {arrival_rate} with service_rate {service_rate}; allowed: "
            f"0 < arrival_rate < service_rate (a stable queue)"
        )
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / arrival_rate, customers)
    services = rng.exponential(1.0 / service_rate, customers)
    env = simpy.Environment()
    queue = NodeQueue(env, capacity=customers)
    arrived = np.empty(customers)
    sojourn = np.empty(customers)

    def arrivals() -> Generator[simpy.Event, Any, None]:
        for i in range(customers):
            yield env.timeout(gaps[i])
            arrived[i] = env.now
            yield from queue.put(i)

    def leave(i: int) -> None:
        sojourn[i] = env.now - arrived[i]

    env.process(arrivals())
    env.process(consumer_process(env, queue, lambda i: services[i], leave))
    env.run()
    expected = 1.0 / (service_rate - arrival_rate)
    mean = float(sojourn.mean())
    return {
        "mean_sojourn_s": mean,
        "expected_sojourn_s": expected,
        "relative_error": abs(mean - expected) / expected,
    }
