"""The session's history, kept once per dashboard process: binned lanes, labelled windows and
server cells of everything the store holds, caught up incrementally.

Every page (and every zoom) reads from this one copy instead of re-reading and re-classifying
the store: a live tick slices the newest bins out of it, a zoom downsamples a range of it
(``app.figures.series.downsample``).  One hour of eight GPUs is about 36,000 bins x 48 lane
columns (14 MB) and 7,200 windows (2 MB), whatever the number of pages open.

How it is built (``History.update``): samples newer than the store's row-id cursor are read in
chunks (``SampleStore.read_since``), kept in a short ``pending`` tail, and turned into

- **bins** (``figures.bin_lanes``): the mean of every lane column per ``bin_s`` bin and GPU, for
  the bins every recently reporting GPU has completed (a bin is complete once each GPU that
  reported in the last second has a sample at or after its end);
- **windows** (``classifier.classify_samples``): the complete ``window_s`` windows, labelled
  with ``CONTEXT_WINDOWS`` earlier windows of context (the phase model's receptive field;
  ``classifier.incremental`` holds the range-at-a-time labelling and the settling of slots),
  each with where its phase shares came from and what its verdict stood on;
- **segments** (``classifier.classify_with_segments``, in the same feature pass as the
  windows): the 0.1-s phase segments of the slots whose every covering window is complete,
  so one window behind the windows (a slot is scored by the windows covering it, read
  ``segments.DEFAULT_LAG_S`` later).  Stored in the pieces each update settles; readers
  merge a run of one phase cut at update edges (``merge_runs``);
- **cells** (``figures.server_cells``): the server lane on the window grid, once the store holds
  server events or ``/metrics`` scrapes, ``server_lag_s`` behind the windows.

Rows are appended and never changed, so a page holding bin ``k`` never needs it again.  Bins
without any reading are not kept (a pause in collection costs nothing); readers reindex.
"""

from __future__ import annotations

import itertools
import math
import threading
import time

import numpy as np
import pandas as pd

from tealeaves.app.figures import (
    LANE_COLUMNS,
    SERVER_HOLD_S,
    bin_index,
    bin_lanes,
    server_cells,
)
from tealeaves.classifier import classify_with_segments
from tealeaves.classifier.incremental import (
    CONTEXT_WINDOWS,
    context_samples,
    merge_runs,
    segment_slots,
    settle_end,
    settle_slots,
    windows_by_index,
)
from tealeaves.classifier.segments import SEGMENT_COLUMNS, hop_for
from tealeaves.classifier.windows import DEFAULT_WINDOW_S
from tealeaves.data.schema import entity_key, gpus_in
from tealeaves.data.store import SampleStore

#: A GPU that has not reported for this many seconds no longer holds back completion.
STALE_S = 1.0
#: Rows read from the store per step of a catch-up (bounds the memory of the first load).
READ_CHUNK = 120_000
#: A pause in the samples longer than this (s) ends a session: the grids jump over it.
SESSION_GAP_S = 60.0
#: Rows that land among what the history holds make it read the store again, at most this
#: often (s): a host clock stepped back would otherwise rebuild it on every tick.
REBUILD_MIN_S = 30.0
#: Seconds of ``/metrics`` scrapes read before the first new cell (their values stand ~1.5 s).
METRICS_BACK_S = 5.0


class _Rows:
    """Frames appended in pieces and read as one (concatenated lazily, at most once per read
    after appends).  Safe across threads: the dashboard's update thread appends while pages'
    requests read (without the lock a read's concatenation could replace the parts list
    after an append it did not include, losing that piece)."""

    def __init__(self, by: str | None = None) -> None:
        self._parts: list[pd.DataFrame] = []
        self._whole: pd.DataFrame | None = None
        self._by = by  # the column the rows are ordered by (None: the index)
        self._lock = threading.Lock()

    def append(self, frame: pd.DataFrame) -> None:
        if len(frame):
            with self._lock:
                self._parts.append(frame)
                self._whole = None

    def frame(self) -> pd.DataFrame | None:
        with self._lock:
            if self._whole is None and self._parts:
                whole = self._parts[0] if len(self._parts) == 1 else pd.concat(self._parts)
                # an older session read late (a file imported after newer ones) goes in
                # its place
                key = whole.index if self._by is None else whole[self._by]
                if not key.is_monotonic_increasing:
                    whole = (whole.sort_index(kind="stable") if self._by is None
                             else whole.sort_values(self._by, kind="stable",
                                                    ignore_index=True))
                self._parts = [whole]
                self._whole = whole
            return self._whole

    def __len__(self) -> int:
        f = self.frame()
        return 0 if f is None else len(f)


class History:
    """The binned, labelled history of one store; shared by every page of a dashboard.

    Args:
        store: the sample store (read from any thread; ``update`` serialises itself).
        bin_s: lane bin width, seconds.
        window_s: classifier window, seconds (a whole multiple of ``bin_s``).
        hold_s: an empty bin holds the previous value for at most this long (GPM gaps).
        server_lag_s: server cells are made this many seconds after the windows (a followed
            log line may be written a second after its whole-second stamp; 0 for a replay).
        min_update_s: ``update`` calls closer together than this return at once (several
            pages ticking do not re-read the store each).

    Attributes (read them through the methods; they change under ``update``):
        gpus: GPU indices seen (store device rows and samples), sorted.
        k_next: next bin index not yet in the history (None before any sample).
        j_next: next window index not yet labelled.
        m_next: next ``hop_s`` slot not yet in the segments (None before the first, and
            always when ``window_s`` is not a whole number of hops: no segments).
        s_next: next server cell index (None while the store holds no server signal).
        samples_per_s: samples per second per GPU, over the history (for the raw-data zoom).
    """

    def __init__(self, store: SampleStore, *, bin_s: float = 0.1,
                 window_s: float = DEFAULT_WINDOW_S, hold_s: float = 0.35,
                 server_lag_s: float = 1.5, min_update_s: float = 0.1) -> None:
        self.store = store
        self.bin_s = bin_s
        self.window_s = window_s
        self.hold_s = hold_s
        self.server_lag_s = server_lag_s
        self.min_update_s = min_update_s
        self._lock = threading.Lock()
        self._rebuilt_at = -math.inf
        #: called as ``on_progress(rows_read, rows_stored)`` after each chunk of the first
        #: catch-up (the whole store read, binned and labelled: ``app.dashboard.server.serve``
        #: shows it as a progress bar); None: not called
        self.on_progress = None
        self._reset()

    def _reset(self) -> None:
        self.cursor = 0
        self.gpus: list[int] = []
        self.k_next: int | None = None
        self.j_next: int | None = None
        self.m_next: int | None = None
        self.s_next: int | None = None
        self.t_first: float | None = None
        self.t_newest: float | None = None
        self.mono_newest: float | None = None
        self.n_samples = 0
        self._pending = pd.DataFrame()
        self._bins = _Rows()
        self._windows = _Rows()
        self._segments = _Rows(by="start")
        self._cells = _Rows()
        self._last_update = -math.inf
        self.generation = getattr(self, "generation", -1) + 1
        self.labeller = ""
        #: ``[first, last]`` sample time (epoch s) of each session: runs of samples without a
        #: pause longer than ``SESSION_GAP_S``, oldest first
        self.sessions: list[list[float]] = []
        self._rebuild = False

    # -- catching up ---------------------------------------------------------------------
    def update(self, force: bool = False, wait: bool = True) -> bool:
        """Read what the store gained since the last call and extend the history.

        Args:
            force: update even if the last update is less than ``min_update_s`` old.
            wait: False returns at once (False) while another thread is updating.

        Returns:
            True when bins, windows or cells were added.
        """
        if not force and time.monotonic() - self._last_update < self.min_update_s:
            return False
        if not self._lock.acquire(blocking=wait):
            return False
        try:
            if not force and time.monotonic() - self._last_update < self.min_update_s:
                return False
            grew = self._catch_up()
            if self._rebuild and time.monotonic() - self._rebuilt_at >= REBUILD_MIN_S:
                self._reset()  # a new generation: every page redraws from the new history
                self._rebuilt_at = time.monotonic()
                grew = self._catch_up() or True
            self._last_update = time.monotonic()
            return grew
        finally:
            self._lock.release()

    def _catch_up(self) -> bool:
        grew = False
        if self.cursor == 0 and self.k_next is None:
            # the first catch-up reads in time order (keyset pages): a store whose files
            # were imported newest first is read as it happened, not as it was written
            top = self.store.cursor()
            done = 0
            for frame in self.store.iter_range(rows=READ_CHUNK, max_id=top):
                grew |= self._ingest(frame)
                done += len(frame)
                if self.on_progress is not None:
                    self.on_progress(done, top)
            self.cursor = max(self.cursor, top)
        while True:
            frame, cursor = self.store.read_since(self.cursor, limit=READ_CHUNK)
            if frame.empty:
                self.cursor = cursor
                break
            self.cursor = cursor
            grew |= self._ingest(frame)
            if len(frame) < READ_CHUNK:
                break
        return grew

    def _ingest(self, frame: pd.DataFrame) -> bool:
        frame = frame[pd.notna(frame["timestamp"])]
        if frame.empty:
            return False
        newest = float(frame["timestamp"].max())
        gap = self._gap_s(frame)
        if self.k_next is not None and self.t_first is not None:
            oldest = float(frame["timestamp"].min())
            if newest < self.t_first - gap:
                # a session older than everything held (a file imported late): its own
                # piece, put in its place; the live edge stays where it is
                return self._ingest_older(frame)
            if oldest < self.k_next * self.bin_s - gap:
                # rows among or across what is held (a file of another time imported into a
                # watched store, a clock stepped back): read the whole store again in time
                # order on the next update (at most every REBUILD_MIN_S); nothing is lost
                self._rebuild = True
                return False
        gpus = sorted(set(self.gpus) | set(gpus_in(frame)) | self._device_gpus(), key=entity_key)
        if self.gpus and gpus != self.gpus:
            # a GPU appeared: the bins' columns change; keep what is known, widen the columns
            self._widen(gpus)
        self.gpus = gpus
        pend = frame if self._pending.empty else pd.concat([self._pending, frame],
                                                           ignore_index=True)
        pend = pend.sort_values(["timestamp", "gpu"], kind="stable", ignore_index=True)
        self.n_samples += len(frame)
        if self.t_first is None:
            self.t_first = float(pend["timestamp"].min())
        self.t_newest = max(newest, self.t_newest or -math.inf)
        if "monotonic" in frame:
            mono = frame["monotonic"].max()
            self.mono_newest = float(mono) if pd.notna(mono) else self.mono_newest
        # A pause longer than SESSION_GAP_S ends a session: what came before it is finished
        # with the samples it has, and the grids jump over the pause (cost follows samples,
        # never the span of a gap).
        ts = pend["timestamp"].to_numpy(dtype=np.float64)
        cuts = [0, *(np.flatnonzero(np.diff(ts) > gap) + 1).tolist(), len(pend)]
        grew = False
        for a, b in itertools.pairwise(cuts):
            piece = pend.iloc[a:b]
            last = b == len(pend)
            t0 = float(ts[a])
            if self.k_next is None or a > 0:  # a cut is a pause: a new session
                self._start_session(t0)
            if last:
                t_done = _complete_until(piece)
            else:  # the session ends here: its last bin and window are all there will be
                t_done = (bin_index(float(ts[b - 1]), self.bin_s) + 1) * self.bin_s
            grew |= self._advance(piece, t_done, final=not last)
            self.sessions[-1][1] = max(self.sessions[-1][1], float(ts[b - 1]))
        # keep the tail the next bins (hold) and windows (context) need
        keep = min(self.k_next * self.bin_s - self.hold_s,
                   (self.j_next - CONTEXT_WINDOWS) * self.window_s) - 1e-6
        self._pending = pend[pend["timestamp"] >= keep].reset_index(drop=True)
        return grew

    def _gap_s(self, frame: pd.DataFrame) -> float:
        """The pause that ends a session: ``SESSION_GAP_S``, or 20 sampling intervals of a
        slow source (``--query-gpu -l 60`` writes a row a minute: one session, not one per
        row; the cost per session is then paid once)."""
        gpu = frame["gpu"].to_numpy()
        vals, counts = np.unique(gpu, return_counts=True)
        if len(vals) and counts.max() > 2:  # one GPU's own sampling interval
            ts = np.sort(frame["timestamp"].to_numpy(dtype=np.float64)[gpu == vals[counts.argmax()]])
            step = float(np.median(np.diff(ts)))
            self._step = step if not math.isfinite(getattr(self, "_step", math.nan)) \
                else 0.9 * self._step + 0.1 * step
        step = getattr(self, "_step", math.nan)
        return max(SESSION_GAP_S, 20.0 * step) if math.isfinite(step) else SESSION_GAP_S

    def _ingest_older(self, frame: pd.DataFrame) -> bool:
        """Bins, windows and segments of ``frame``, all older than the history, made on
        their own grids and put before it (``_Rows`` keeps the order); the cursors stay."""
        saved = (self.k_next, self.j_next, self.m_next, self.s_next, self.sessions,
                 self._pending, self.mono_newest)
        self.k_next = self.j_next = None
        self.m_next, self.s_next, self.sessions = None, None, []
        self._pending = pd.DataFrame()
        self.n_samples -= len(frame)  # counted again below
        t_first = self.t_first
        self.t_first = None
        try:
            grew = self._ingest(frame)
            pend = self._pending
            if len(pend):  # finish the piece: nothing later will complete it
                ts = pend["timestamp"].to_numpy(dtype=np.float64)
                t_done = (bin_index(float(ts.max()), self.bin_s) + 1) * self.bin_s
                grew |= self._advance(pend, t_done, final=True)
            older = self.sessions
        finally:
            (self.k_next, self.j_next, self.m_next, self.s_next, self.sessions,
             self._pending, self.mono_newest) = saved
        self.sessions = sorted([*older, *self.sessions])
        self.t_first = min(t_first, self.t_first) if self.t_first is not None else t_first
        return grew

    def _start_session(self, t0: float) -> None:
        """Move the grids to a session starting at ``t0`` (the first, or one after a pause)."""
        self.k_next = bin_index(t0, self.bin_s)
        self.j_next = math.ceil(t0 / self.window_s - 1e-9)
        self.sessions.append([t0, t0])
        if self.m_next is not None and self.hop_s:
            self.m_next = max(self.m_next, bin_index(t0, self.hop_s))
        if self.s_next is not None:
            self.s_next = max(self.s_next, bin_index(t0, self.window_s))

    def _advance(self, pend: pd.DataFrame, t_done: float, final: bool) -> bool:
        """Bins, windows, segments and server cells of ``pend`` up to ``t_done``."""
        k0, j0 = self.k_next, self.j_next
        k1 = max(k0, bin_index(t_done, self.bin_s))
        j1 = max(j0, bin_index(t_done, self.window_s))
        grew = False
        if k1 > k0:
            bins = bin_lanes(pend, self.gpus, k0, k1, self.bin_s, self.hold_s)
            self._bins.append(bins)
            self.k_next = k1
            grew = True
        if j1 > j0:
            windows = self._classify(pend, j0, j1, final)
            self._windows.append(windows)
            self.j_next = j1
            grew |= len(windows) > 0
        grew |= self._server(t_done)
        return grew

    def _device_gpus(self) -> set[int]:
        devs = self.store.devices()
        return {int(g) for g in devs["gpu"].dropna()} if not devs.empty else set()

    def _widen(self, gpus: list[int]) -> None:
        b = self._bins.frame()
        if b is not None:
            cols = pd.MultiIndex.from_product([LANE_COLUMNS, gpus], names=["column", "gpu"])
            self._bins = _Rows()
            self._bins.append(b.reindex(columns=cols))

    @property
    def hop_s(self) -> float | None:
        """Slot length of the segments (s); None when ``window_s`` is not a whole number
        of ``segments.DEFAULT_HOP_S`` hops (no segments are made)."""
        return hop_for(self.window_s)

    def _classify(self, frame: pd.DataFrame, j0: int, j1: int, final: bool = False
                  ) -> pd.DataFrame:
        w = self.window_s
        part = context_samples(frame, j0, j1, w)
        if part.empty:
            return pd.DataFrame()
        windows, segs = classify_with_segments(part, self.store.devices(), window_s=w,
                                               complete_until=j1 * w)
        self.labeller = windows.attrs.get("labeller", self.labeller)
        self._settle(segs, settle_end(j1, final, w))
        return windows_by_index(windows, j0, j1, w)

    def _settle(self, segs: pd.DataFrame, j1: int) -> None:
        """Keep the slots of ``segs`` from ``m_next`` up to the last one every covering
        window of which ends by window ``j1``'s start (``classifier.incremental``)."""
        piece, self.m_next = settle_slots(segs, j1, self.m_next, self.window_s)
        if piece is not None:
            self._segments.append(piece)

    def _server(self, t_done: float) -> bool:
        w = self.window_s
        if self.s_next is None:
            if self.j_next is None or self.t_first is None:
                return False
            since = self.t_first - SERVER_HOLD_S[1]
            if self.store.server_events(since).empty and self.store.server_metrics(since).empty:
                return False
            self.s_next = bin_index(self.t_first, w)
        s0 = self.s_next
        s1 = max(s0, bin_index(t_done - self.server_lag_s, w))
        if s1 <= s0:
            return False
        ev = self.store.server_events(s0 * w - SERVER_HOLD_S[1], s1 * w)
        m = self.store.server_metrics(s0 * w - METRICS_BACK_S)
        m = m[m["timestamp"] < s1 * w] if len(m) else m
        self._cells.append(server_cells(ev, m, s0, s1, w))
        self.s_next = s1
        return True

    # -- reading -------------------------------------------------------------------------
    @property
    def has_server(self) -> bool:
        """True once the store held server events or scrapes (the figure gets a server lane)."""
        return self.s_next is not None

    @property
    def samples_per_s(self) -> float:
        """Mean samples per second per GPU over the history (NaN before two seconds)."""
        if self.t_first is None or self.t_newest is None or not self.gpus:
            return math.nan
        span = self.t_newest - self.t_first
        return self.n_samples / len(self.gpus) / span if span >= 2.0 else math.nan

    def span(self) -> tuple[float, float] | None:
        """(first sample, end of the newest complete bin), epoch seconds; None when empty."""
        if self.t_first is None or self.k_next is None:
            return None
        return self.t_first, self.k_next * self.bin_s

    def bins(self, k0: int, k1: int, dense: bool = False) -> pd.DataFrame:
        """Bins ``k0 <= k < k1`` (``figures.bin_lanes`` layout).

        Args:
            dense: reindex to every bin of the range (NaN rows where nothing was read);
                otherwise only bins holding a reading.
        """
        b = self._bins.frame()
        cols = pd.MultiIndex.from_product([[], []], names=["column", "gpu"])
        if b is None:
            out = pd.DataFrame(columns=cols, dtype=float)
        else:
            idx = b.index.to_numpy()
            lo, hi = np.searchsorted(idx, [k0, k1])
            out = b.iloc[lo:hi]
        if dense:
            out = out.reindex(pd.RangeIndex(k0, max(k0, k1), name="k"))
        return out

    def windows(self, j0: int | None = None, j1: int | None = None) -> pd.DataFrame:
        """Labelled windows ``j0 <= j < j1`` (``classify_samples`` columns, index ``j``, and
        per window ``classifier.incremental.SHARES_SOURCE_COLUMN`` (``"calibrated"`` or ``"rules'
        scores"``) and ``incremental.INPUTS_COLUMN`` (what its verdict stood on, in words))."""
        w = self._windows.frame()
        if w is None:
            return pd.DataFrame()
        idx = w.index.to_numpy()
        lo = 0 if j0 is None else np.searchsorted(idx, j0)
        hi = len(idx) if j1 is None else np.searchsorted(idx, j1)
        return w.iloc[lo:hi]

    def segments(self, t0: float | None = None, t1: float | None = None,
                 merge: bool = True) -> pd.DataFrame:
        """The 0.1-s segments overlapping ``[t0, t1)`` (epoch s; None: unbounded), not clipped;
        with ``merge``, runs of one phase cut where two updates met are one row
        (``merge_runs``).  Columns ``segments.SEGMENT_COLUMNS``."""
        f = self._segments.frame()
        if f is None:
            return pd.DataFrame(columns=list(SEGMENT_COLUMNS))
        lo = 0 if t0 is None else int(np.searchsorted(f["end"].to_numpy(), t0, side="right"))
        hi = len(f) if t1 is None else int(np.searchsorted(f["start"].to_numpy(), t1))
        out = f.iloc[lo:max(lo, hi)]
        return merge_runs(out) if merge else out

    def slots(self, m0: int, m1: int) -> tuple[np.ndarray, np.ndarray]:
        """The segments' slots ``m0 <= m < m1`` (``hop_s`` slots, ``floor(t / hop_s)``):
        ``(slot indices, phases)``, only slots a segment covers."""
        h = self.hop_s
        if h is None or m1 <= m0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object)
        return segment_slots(self.segments(m0 * h, m1 * h, merge=False), h, m0, m1)

    def segment_at(self, t: float, reach_s: float = 60.0) -> dict | None:
        """The segment holding epoch time ``t`` as a dict (its run of one phase merged
        within ``reach_s`` either side), or None."""
        run = self.segments(t - reach_s, t + reach_s)
        run = run[(run["start"] <= t) & (run["end"] > t)] if len(run) else run
        return None if run.empty else run.iloc[0].to_dict()

    def cells(self, s0: int, s1: int) -> pd.DataFrame | None:
        """Server cells ``s0 <= s < s1``; None while the history has no server lane."""
        if self.s_next is None:
            return None
        c = self._cells.frame()
        if c is None:
            return server_cells(None, None, 0, 0, self.window_s)
        idx = c.index.to_numpy()
        lo, hi = np.searchsorted(idx, [s0, s1])
        return c.iloc[lo:hi]

    def memory_bytes(self) -> int:
        """Bytes held by the bins, windows, cells and pending tail (pandas' deep count)."""
        total = int(self._pending.memory_usage(deep=True).sum()) if len(self._pending) else 0
        for rows in (self._bins, self._windows, self._segments, self._cells):
            f = rows.frame()
            if f is not None:
                total += int(f.memory_usage(deep=True).sum())
        return total


def _complete_until(frame: pd.DataFrame) -> float:
    """Epoch time up to which every recently reporting GPU has delivered its samples."""
    last = frame.groupby("gpu")["timestamp"].max()
    newest = float(last.max())
    active = last[last >= newest - STALE_S]
    return float(active.min())
