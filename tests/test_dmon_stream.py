"""A dmon import read a chunk at a time (issue 38: memory bounded by a chunk): the samples,
lines skipped, blanks and placement are the same whatever the chunk of lines or bytes, read
from a file or from a text; ``tealeaves import`` stores a dmon file chunk by chunk in one
transaction; a file that changes between the survey and the store is refused whole."""

from __future__ import annotations

import math
import os

import pandas as pd
import pytest

from tealeaves.data import dmon_passes, import_common, importers

START = 1_700_000_000.0

MIXED = (  # MIG rows (read row by row), then a header without MIG columns, blanks
    "# gpu   gi   ci    sm   mem    fb\n# Idx   Id   Id     %     %    MB\n"
    + "".join(f"  {g}  {gi}  {ci}  {t % 100}  {t % 30}  {1000 + t}\n"
              for t in range(40) for g, gi, ci in ((0, 1, 0), (0, 2, 0), (1, "-", "-")))
    + "# gpu    sm   pwr\n# Idx     %     W\n"
    + "".join(f"  {g}  {t}  {'-' if t % 3 == 0 else 100 + t}\n" for t in range(30)
              for g in range(3)))


def _dated(day: str, hours: range, gpus: int = 2, step_s: int = 600) -> str:
    rows = []
    for h in hours:
        for s in range(0, 3600, step_s):
            for g in range(gpus):
                rows.append(f"{day} {h:02d}:{s // 60:02d}:{s % 60:02d}  {g}  {100 + g}  "
                            f"{(h + s) % 100}  {'-' if (s + g) % 7 == 0 else 10}\n")
    return "".join(rows)


DT_HEAD = "#Date    Time      gpu   pwr    sm   mem\n#YYYYMMDD HH:MM:SS Idx     W     %     %\n"
TEXTS = {
    "mixed MIG and blanks": MIXED,
    # Berlin's fall-back night: 02:00-02:59 twice, read in file order
    "DST fall-back": DT_HEAD + _dated("20241027", range(2)) + _dated("20241027", range(2, 3))
    + _dated("20241027", range(2, 5)),
    # spring forward: 02:xx does not exist in Berlin
    "DST spring gap": DT_HEAD + _dated("20240331", range(1, 4)),
    # -o T past midnight: dates from the start time, rolling over
    "time only, past midnight": "#Time      gpu   pwr    sm\n#HH:MM:SS  Idx     W     %\n"
    + "".join(f"{h:02d}:{m:02d}:00  {g}  {100 + g}  {m % 100}\n"
              for h in (22, 23, 0, 1) for m in range(0, 60, 5) for g in range(2)),
    # strays a week away and rows refused, bad values, a comment, a short line
    "strays and bad lines": DT_HEAD + "20240110 10:00:00  0  100  5  5\n"
    + _dated("20240117", range(8, 12)) + "# Setting the GPU core clock\n"
    + "20240117 12:00:00  0  100  500  5\n20240117 12:00:00  0  100\n"
    + "20240117 12:00:00  7  1e400  5  5\n20240117 12:00:00  0  -4  5  5\n"
    + "20240125 10:00:00  1  100  5  5\n",
    "no times": "# gpu   pwr    sm\n# Idx     W     %\n"
    + "".join(f"  {g}  {100 + t}  {t % 100}\n" for t in range(50) for g in range(3)),
    "untimed among timed": DT_HEAD + _dated("20240117", range(8, 9))
    + "# gpu   pwr    sm\n# Idx     W     %\n" + "  0  100  5\n  1  100  5\n",
    "CRLF": (DT_HEAD + _dated("20240117", range(8, 10))).replace("\n", "\r\n"),
}


def _same(a, b) -> None:
    pd.testing.assert_frame_equal(a.samples, b.samples)
    for k in ("rows_read", "skipped", "gpus", "blanks", "placed", "dated", "zone", "notes",
              "interval", "interval_assumed", "normalised", "format"):
        assert getattr(a, k) == getattr(b, k), k
    assert all(x == y or (math.isnan(x) and math.isnan(y))
               for x, y in zip(a.time_span, b.time_span, strict=True))
    if a.placed or a.dated:
        assert a.placed_at == b.placed_at


@pytest.mark.parametrize("name", list(TEXTS))
@pytest.mark.parametrize("start", [None, START])
def test_the_same_import_whatever_the_chunk(tmp_path, monkeypatch, name, start):
    """One chunk of every line against chunks of 1, 3 and 7 lines and reads of 61 bytes:
    headers, MIG compute instances, clocks, instants and midnights carry across chunks."""
    path = tmp_path / "dmon.txt"
    path.write_bytes(TEXTS[name].encode())
    os.utime(path, (START + 7200, START + 7200))
    kw = {"start_time": start, "tz": "Europe/Berlin"}
    whole = importers.import_text(TEXTS[name], "dmon", end_time=START + 7200, **kw)
    assert whole.rows_read > 0
    streamed = importers.stream_file(path, **kw)
    if name == "CRLF":  # CRLF is plain text: read a chunk at a time too
        assert streamed is not None
    assert streamed is not None or name == "mixed MIG and blanks"
    for lines, chunk in ((3, 61), (7, 4096)):
        monkeypatch.setattr(dmon_passes, "LINES_A_CHUNK", lines)
        monkeypatch.setattr(import_common, "_CHUNK", chunk)
        _same(whole, importers.import_text(TEXTS[name], "dmon", end_time=START + 7200, **kw))
        _same(whole, importers.import_file(path, **kw))


def test_the_fall_back_night_reads_both_passes_across_chunks(monkeypatch):
    """The repeated hour, cut into chunks of 1 line: the second pass is still told by the
    times stepping back (the one clock goes through every chunk)."""
    monkeypatch.setattr(dmon_passes, "LINES_A_CHUNK", 1)
    r = importers.import_text(TEXTS["DST fall-back"], "dmon", tz="Europe/Berlin")
    ts = r.samples["timestamp"]
    assert ts.is_unique is False  # two GPUs an instant
    assert r.samples.groupby("gpu")["timestamp"].apply(lambda s: s.is_unique).all()
    assert any("repeats when clocks go back" in n and "6 read as its second pass" in n
               for n in r.notes), r.notes


def test_strays_are_found_by_the_survey_as_row_by_row(monkeypatch):
    monkeypatch.setattr(dmon_passes, "LINES_A_CHUNK", 2)
    r = importers.import_text(TEXTS["strays and bad lines"], "dmon")
    why = dict(r.skipped)
    stray = [n for n, w in r.skipped if "a day before the file's other rows" in w]
    late = [n for n, w in r.skipped if "a day after the file's other rows" in w]
    assert len(stray) == 1 and len(late) == 1
    assert sum("bad value" in w for w in why.values()) == 3  # sm 500, 1e400, -4
    assert sum("expected 6 fields, got 4" in w for w in why.values()) == 1
    assert r.samples["timestamp"].min() > 1_705_000_000


def test_a_pasted_or_wide_file_is_read_whole(tmp_path):
    """A quote prefix to undo, or UTF-16: no chunked reading (a paste is decided over the
    whole text), the import as before."""
    quoted = tmp_path / "q.txt"
    quoted.write_text("".join("> " + ln + "\n" for ln in TEXTS["no times"].splitlines()))
    wide = tmp_path / "w.txt"
    wide.write_bytes(TEXTS["no times"].encode("utf-16"))
    for p in (quoted, wide):
        assert importers.stream_file(p, start_time=START) is None
        r = importers.import_file(p, start_time=START)
        assert r.rows_read == 150 and r.normalised


def test_the_store_gets_a_dmon_file_chunk_by_chunk(tmp_path, monkeypatch, capsys):
    """``tealeaves import`` hands the store one chunk of samples at a time, in one
    transaction: the rows stored are the file's, the summary the same as a whole read."""
    from tealeaves.app.cli import main
    from tealeaves.data.store import SampleStore

    path = tmp_path / "dmon.txt"
    path.write_text(TEXTS["strays and bad lines"])
    whole = importers.import_file(path)
    monkeypatch.setattr(dmon_passes, "LINES_A_CHUNK", 5)
    sizes: list[int] = []
    frames = dmon_passes.DmonImport.frames

    def watched(self):
        for f in frames(self):
            sizes.append(len(f))
            yield f
    monkeypatch.setattr(dmon_passes.DmonImport, "frames", watched)
    db = tmp_path / "s.db"
    assert main(["import", str(path), "--store", str(db), "--json"]) == 0
    out = capsys.readouterr().out
    assert len(sizes) > 5 and max(sizes) <= 10 and sum(sizes) == len(whole.samples)
    with SampleStore(db, readonly=True) as st:
        got = st.read_range()
    assert len(got) == len(whole.samples)
    assert f'"samples": {len(whole.samples)}' in out
    assert f'"rows_read": {whole.rows_read}' in out


def test_a_file_changed_between_survey_and_store_is_refused_whole(tmp_path, monkeypatch,
                                                                  capsys):
    from tealeaves.app.cli import main

    path = tmp_path / "dmon.txt"
    path.write_text(TEXTS["DST spring gap"])
    monkeypatch.setattr(dmon_passes, "LINES_A_CHUNK", 3)
    survey = dmon_passes.DmonImport.survey

    def then_changed(self):
        got = survey(self)
        text = path.read_text()
        path.write_text(text.replace(" 100 ", " 101 ", 1))
        return got
    monkeypatch.setattr(dmon_passes.DmonImport, "survey", then_changed)
    db = tmp_path / "s.db"
    assert main(["import", str(path), "--store", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: changed while it was imported" in err and "Traceback" not in err
    monkeypatch.undo()
    assert not db.exists() or _count(db) == 0


def _count(db) -> int:
    from tealeaves.data.store import SampleStore

    with SampleStore(db, readonly=True) as st:
        return st.count()


def test_a_big_dmon_file_is_never_read_whole(tmp_path, monkeypatch, capsys):
    """Detection reads the first chunk, the import reads a chunk at a time: the whole-file
    reader is never called for a plain dmon file larger than a read, by `import` or by
    `classify` (a 600 MB log cost the file's size several times over in memory)."""
    from tealeaves.app.cli import main

    path = tmp_path / "dmon.txt"
    path.write_text(DT_HEAD + "".join(
        f"20240117 {h:02d}:{m:02d}:{s:02d}  {g}  100  {s}  5\n"
        for h in range(5) for m in range(60) for s in range(0, 60, 5) for g in range(2)))
    assert path.stat().st_size > 200_000  # 7,200 rows of ~33 bytes
    monkeypatch.setattr(import_common, "_CHUNK", 150_000)  # a read holds the 4,000 lines
    # detection looks at, not the file

    def whole(*a, **k):
        raise AssertionError("the whole file was read")
    from tealeaves.data import detect

    for module in (importers, import_common, detect):
        monkeypatch.setattr(module, "_read_bytes", whole, raising=False)
    assert importers.detect_format(path) == "nvidia_smi_dmon"
    db = tmp_path / "s.db"
    assert main(["import", str(path), "--store", str(db)]) == 0
    assert "stored 7200 samples" in capsys.readouterr().out
    assert main(["classify", str(path)]) == 0


def test_a_file_of_bad_lines_lists_the_first_and_counts_the_rest(tmp_path, monkeypatch,
                                                                 capsys):
    """Every skipped line costs memory: a streamed import lists the first ``SKIPPED_LISTED``
    and counts the rest, and the summary says them all."""
    from tealeaves.app.cli import main

    monkeypatch.setattr(dmon_passes, "SKIPPED_LISTED", 4)
    monkeypatch.setattr(dmon_passes, "LINES_A_CHUNK", 3)
    path = tmp_path / "dmon.txt"
    path.write_text(DT_HEAD + "".join(f"20240117 10:00:{s:02d}  0  100  5  5\n"
                                      f"20240117 10:00:{s:02d}  1  100\n" for s in range(30)))
    r = importers.import_file(path)
    assert [n for n, _ in r.skipped] == [4, 6, 8, 10]
    assert r.skipped_more == 26 and r.skipped_count == 30 and r.rows_read == 30
    assert main(["import", str(path), "--store", str(tmp_path / "s.db")]) == 0
    out = capsys.readouterr().out
    assert "30 lines skipped" in out and "  ... 26 more" in out


def test_a_file_that_grows_while_imported_is_read_to_the_surveyed_size_and_says_so(
        tmp_path, monkeypatch, capsys):
    """A live log grows between the survey and the store: the rows surveyed are stored, the
    summary says how many bytes were not read (before: the added rows went unsaid)."""
    from tealeaves.app.cli import main

    path = tmp_path / "dmon.txt"
    path.write_text(TEXTS["DST spring gap"])
    survey = dmon_passes.DmonImport.survey

    def then_grown(self):
        got = survey(self)
        with path.open("a") as f:
            f.write("20240331 03:59:59  0  100  5  5\n")
        return got
    monkeypatch.setattr(dmon_passes.DmonImport, "survey", then_grown)
    db = tmp_path / "s.db"
    assert main(["import", str(path), "--store", str(db)]) == 0
    out = capsys.readouterr().out
    assert "the file grew by 64 bytes while it was imported" in out, out  # 32 bytes, twice
    assert "import it again to add them" in out
    monkeypatch.undo()
    assert main(["import", str(path), "--store", str(db)]) == 0  # the added row now
    assert "stored 1 sample (" in capsys.readouterr().out
