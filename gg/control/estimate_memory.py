"""What this replica remembers of start estimates between reads (gg.control.estimates).

Memory only, one per :class:`gg.control.core.Core`: losing it (a restart, another replica)
costs at most one write or one run of the queue, never a wrong estimate, because what a
person was shown is kept in the store (``shown_estimates``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from gg.control.forecaster import Forecaster
from gg.domain.durations import Summary


@dataclass
class EstimateMemory:
    # flight id -> (at, low, high): the start estimate this replica last wrote as shown for a
    # waiting flight, so that showing it again writes nothing
    written: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    # runner id -> when it last handed a flight back, and the summary of the time it then took
    # to start the next waiting one
    lease_ended: dict[str, float] = field(default_factory=dict)
    turnaround: Summary = field(default_factory=Summary)
    # (newest event seq, when, forecast): the last forecast of the whole queue, reused for
    # ESTIMATE_REUSE seconds while no event was recorded
    last_forecast: tuple | None = None
    # the process that plays big queues away from the server's lock (gg.control.forecaster),
    # made at its first use
    forecaster: Forecaster | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
