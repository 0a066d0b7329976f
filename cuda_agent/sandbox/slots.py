"""The queue in front of a pool's exclusive workers (one per GPU, or per CPU timing slot / CPU actor).

Each worker takes the oldest item that is pinned to its slot or to none, so a job can ask for one
GPU (`JudgeJob.gpu`) without a queue per GPU. Pinning decides only which worker takes a job: every
worker still runs one job at a time, so a timed job keeps its slot to itself.
"""

from __future__ import annotations

import threading
from typing import Any


class SlotQueue:
    """A FIFO shared by slot workers; `get(slot)` returns an item for that slot, or None once stopped."""

    def __init__(self) -> None:
        self._items: list[tuple[int | None, Any]] = []
        self._cond = threading.Condition()
        self._stopped = False

    def put(self, item: Any, slot: int | None = None) -> None:
        """Queue `item` (never None) for worker `slot`, or for any worker when `slot` is None."""
        with self._cond:
            self._items.append((slot, item))
            self._cond.notify_all()

    def get(self, slot: int) -> Any:
        """Block until an item for `slot` (or for any slot) is queued and return the oldest such item.

        Returns None once `stop()` was called and nothing is left for this slot: items queued before
        the stop are still handed out, so a pool that cancelled them first answers each of them.
        """
        with self._cond:
            while True:
                for i, (wanted, item) in enumerate(self._items):
                    if wanted is None or wanted == slot:
                        del self._items[i]
                        return item
                if self._stopped:
                    return None
                self._cond.wait()

    def stop(self) -> None:
        """Let every `get` return None once its slot's items are gone."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)
