"""Several simulated devices on one USB hub: what they lose waiting for each other.

Each simulated device has a virtual clock of its own; devices running at once in one test do
not see each other's time. To predict a station with N devices on one hub, one device's run is
recorded (:attr:`~piflash.sim.probes.usb.timing.VirtualClock.timeline`: every interval it held
the bus or the host's CPU) and N copies of it are replayed against shared resources
(:func:`replay`):

* ``"bus"`` -- the full-speed bus. Behind a **single-TT** hub every full-speed device shares
  the one Transaction Translator, which runs one full-speed transaction at a time (USB 2.0 spec
  11.14.1.3, 11.17-11.18): a capacity of 1 for all N devices. Behind a multi-TT hub each port has
  its own TT and the devices do not share it (leave ``"bus"`` out of ``capacity``). The
  480 Mbit/s upstream link carries the split transactions of four full-speed devices with room
  to spare, so it is not modelled. Transfers are cut into 64-byte packets' worth of wire time
  (:data:`PACKET_S`), so the TT alternates between devices packet by packet as a host
  controller's schedule does, rather than giving one device a whole 64 KiB write.
* ``"host"`` -- the host's CPU per transfer: capacity 1 when the devices are served by threads
  of one process (one interpreter lock), the host's cores when each has a process.

The replay is a discrete-event simulation. A device's intervals keep their recorded order and
spacing; when one must wait for a resource another device holds, everything after it in that
device's run moves later by the wait (a delay carries forward: PICOBOOT and SWD work in
request-response steps, so a late transfer delays the rest). A device never waits for itself
(its own overlapping intervals were already in its recorded time). Intervals go to a resource
first come, first served. Pessimistic where a device's later work did not depend on the
delayed transfer; exact for a strict request-response protocol.
"""

from __future__ import annotations

import heapq
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from piflash.sim.probes.usb.timing import FULL_SPEED_BPS, PACKET_OVERHEAD_BYTES

__all__ = ["PACKET_S", "replay", "station_rates"]

#: Wire time of one full 64-byte full-speed bulk packet with its token, handshake and CRC,
#: seconds (USB 2.0 spec 5.8.4, 8.4: 64 + 13 bytes at 12 Mbit/s): the unit the bus is shared in.
PACKET_S = (64 + PACKET_OVERHEAD_BYTES) * 8 / FULL_SPEED_BPS

Interval = Tuple[str, float, float]


def _pieces(timeline: Iterable[Interval], shared: Iterable[str]) -> List[Interval]:
    """The recorded intervals of shared resources in time order, bus intervals cut into
    packet-sized pieces."""
    shared = set(shared)
    out: List[Interval] = []
    for resource, start, seconds in sorted(timeline, key=lambda iv: iv[1]):
        if resource not in shared:
            continue
        if resource == "bus" and seconds > PACKET_S * 1.5:
            n = int(round(seconds / PACKET_S))
            piece = seconds / n
            out.extend((resource, start + i * piece, piece) for i in range(n))
        else:
            out.append((resource, start, seconds))
    return out


class _Resource:
    """``capacity`` servers, each remembering until when and for which device it is held."""

    def __init__(self, capacity: int) -> None:
        self.servers = [[0.0, -1] for _ in range(capacity)]  # [free at (s), device]

    def take(self, device: int, earliest: float, seconds: float) -> float:
        """Hold a server from the earliest time one is free for ``device`` (no earlier than
        ``earliest``); returns the start (seconds)."""
        best, start = None, None
        for server in self.servers:
            t = earliest if server[1] == device else max(earliest, server[0])
            if start is None or t < start:
                best, start = server, t
        best[0] = max(best[0], start + seconds)
        best[1] = device
        return start


def replay(
    timeline: Sequence[Interval],
    board_s: float,
    devices: int,
    boards: int,
    capacity: Dict[str, int],
    gap_s: float = 0.0,
    stagger: bool = False,
) -> dict:
    """Replay one recorded board ``boards`` times on each of ``devices`` devices at once.

    :param timeline: One board's recorded intervals, ``(resource, start s, seconds)``
        (:attr:`VirtualClock.timeline`), times from the board's start.
    :param board_s: That board's time alone, seconds (the clock at its end).
    :param devices: Devices (slots, probes) working at once.
    :param boards: Boards each device flashes back to back.
    :param capacity: The shared resources and how many can hold each at once, e.g.
        ``{"bus": 1}`` (single-TT hub, worker processes), ``{"bus": 1, "host": 1}`` (and worker
        threads); resources not named are each device's own.
    :param gap_s: Seconds between a device's boards (detection of the next board), its own.
    :param stagger: Start device ``i`` at ``i * board_s / devices`` (boards seated one after
        the other) instead of all at 0 (a fixture closing on all of them at once).
    :returns: ``{"devices", "boards", "seconds"`` (the last board's end), ``"boards_per_hour"``
        (the sum of each device's rate over its own run, from its first start to the end of
        its last board's gap, so a staggered start costs nothing), ``"board_s"`` (mean time of a board, waits
        included), ``"wait_s"`` (mean waits per board), ``"waits_s"`` (the same by resource:
        ``{"bus": s, ...}``)``}``.
    :raises ValueError: ``devices`` or ``boards`` below 1.
    """
    if devices < 1 or boards < 1:
        raise ValueError("replay needs at least one device and one board")
    pieces = _pieces(timeline, capacity)
    resources = {name: _Resource(n) for name, n in capacity.items()}
    period = board_s + gap_s
    offsets = [(i * board_s / devices if stagger else 0.0) for i in range(devices)]
    delay = [0.0] * devices
    waits = {name: 0.0 for name in capacity}
    heap: List[Tuple[float, int, int]] = []  # (earliest start, device, piece number)
    total = len(pieces) * boards
    for d in range(devices):
        if total:
            heapq.heappush(heap, (offsets[d] + pieces[0][1], d, 0))
    while heap:
        earliest, d, k = heapq.heappop(heap)
        resource, _, seconds = pieces[k % len(pieces)]
        start = resources[resource].take(d, earliest, seconds)
        delay[d] += start - earliest
        waits[resource] += start - earliest
        k += 1
        if k < total:
            board, i = divmod(k, len(pieces))
            heapq.heappush(heap, (offsets[d] + board * period + pieces[i][1] + delay[d], d, k))
    busy = [boards * period + delay[d] for d in range(devices)]
    return {
        "devices": devices,
        "boards": boards,
        "seconds": max(o + b - gap_s for o, b in zip(offsets, busy)),
        "boards_per_hour": sum(3600.0 * boards / b for b in busy),
        "board_s": board_s + sum(delay) / (devices * boards),
        "wait_s": sum(delay) / (devices * boards),
        "waits_s": {name: w / (devices * boards) for name, w in waits.items()},
    }


def station_rates(
    timeline: Sequence[Interval],
    board_s: float,
    counts: Sequence[int] = (1, 2, 4),
    capacity: Optional[Dict[str, int]] = None,
    gap_s: float = 0.0,
    boards: int = 6,
    stagger: bool = False,
) -> List[dict]:
    """:func:`replay` for each device count in ``counts``; each row gains ``vs_one`` (its
    boards/hour over the first count's)."""
    rows = [
        replay(
            timeline, board_s, n, boards, capacity if capacity is not None else {"bus": 1}, gap_s=gap_s, stagger=stagger
        )
        for n in counts
    ]
    for row in rows:
        row["vs_one"] = row["boards_per_hour"] / rows[0]["boards_per_hour"]
    return rows
