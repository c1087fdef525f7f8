"""One computation per request key (``SingleFlight``): a page's retry of a request that is
still being answered waits for that answer instead of starting the same work again.

Why: dash-renderer keeps only the newest request of a callback and drops the answer of one
fired again before it returned (plotly/dash#1613), while the server goes on computing the
dropped one.  A request that takes longer than the page waits before asking again (the live
tick's ``STUCK_MS``, the balance panel's refresh) would otherwise never be answered in time:
every retry starts from scratch, and the abandoned ones load the server further.  With one
computation per key, a retry is answered the moment the first computation ends.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any


class SingleFlight:
    """Runs ``fn`` once per key at a time; callers with a key already running wait for it.

    The results of the last ``keep`` keys are kept, so a retry that arrives just after the
    first computation ended (its answer dropped by the page) is answered at once.  A key is
    meant to name one request exactly (a user action's stamp and the page state it acts on):
    the same key is only ever asked again as a retry.

    Thread-safe (the dashboard's WSGI server answers requests on several threads).
    """

    def __init__(self, keep: int = 4) -> None:
        if keep < 0:
            raise ValueError(f"keep must be >= 0, got {keep}")
        self.keep = keep
        self._lock = threading.Lock()
        self._running: dict[Hashable, Future] = {}
        self._done: OrderedDict[Hashable, Any] = OrderedDict()
        #: how many calls were answered by another call's computation (for tests, benches)
        self.joined = 0

    def run(self, key: Hashable, fn: Callable[[], Any]) -> Any:
        """``fn()``, or the result of the computation already running (or just done) for
        ``key``.

        Raises:
            Whatever ``fn`` raises, to every caller that waited on that computation (a failed
            computation is not kept: the next call with the key tries again).
        """
        with self._lock:
            if key in self._done:
                self._done.move_to_end(key)
                self.joined += 1
                return self._done[key]
            fut = self._running.get(key)
            owner = fut is None
            if owner:
                fut = Future()
                self._running[key] = fut
            else:
                self.joined += 1
        if not owner:
            return fut.result()
        try:
            result = fn()
        except BaseException as exc:
            with self._lock:
                self._running.pop(key, None)
            fut.set_exception(exc)
            raise
        with self._lock:
            self._running.pop(key, None)
            if self.keep:
                self._done[key] = result
                while len(self._done) > self.keep:
                    self._done.popitem(last=False)
        fut.set_result(result)
        return result
