"""Pasted telemetry (issue 22): quote prefixes and ``\\#`` from a markdown quote, code fences,
shell prompts, ANSI colours, UTF-16 with or without a byte-order mark (PowerShell's ``>``),
CR-only line ends.  Each paste is the real published case file (``shared/cases/public``: an
``nvidia-smi dmon`` of a 4-GPU SGLang node and a ``--query-gpu`` CSV) turned into that paste
form here, following how each tool writes it (no published paste of every form was found);
the import must give the very samples of the plain file and say what it undid."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from cases import case_path

from tealeaves.app.cli import main
from tealeaves.data import pasted
from tealeaves.data.importers import detect_format, import_file

DMON = "dmon_4gpu_sglang_tp_blackwell_pucm_01.txt"
QUERY = "query_gpu_csv_lms_timestamp_1gpu_prompt_01.txt"
START = 1_796_000_000.0


def _quoted(text: str) -> str:
    """A markdown quote of ``text`` as GitHub users write it: '> ' on every line, '#' escaped
    (or it would be a heading), inside a code fence."""
    lines = ["```"] + [("\\" + ln if ln.startswith("#") else ln) for ln in text.splitlines()]
    return "\n".join("> " + ln for ln in [*lines, "```"]) + "\n"


def _coloured(text: str) -> str:
    """The text as a colour terminal shows it: a prompt line, a bold header, green numbers."""
    out = ["\x1b]0;user@h200: ~\x07user@h200:~$ nvidia-smi dmon -c 1 -s pucm"]
    for ln in text.splitlines():
        out.append(f"\x1b[1m{ln}\x1b[0m" if ln.startswith("#") else f"\x1b[32m{ln}\x1b[0m")
    return "\n".join(out) + "\n"


FORMS = {
    "markdown quote": lambda t: _quoted(t).encode(),
    "ANSI colours and a prompt": lambda t: _coloured(t).encode(),
    "UTF-16 LE with BOM, CRLF (PowerShell >)": lambda t: b"\xff\xfe" + t.replace(
        "\n", "\r\n").encode("utf-16-le"),
    "UTF-16 LE, no BOM": lambda t: t.encode("utf-16-le"),
    "UTF-16 BE with BOM": lambda t: b"\xfe\xff" + t.encode("utf-16-be"),
    "UTF-8 BOM, CR line ends": lambda t: b"\xef\xbb\xbf" + t.replace("\n", "\r").encode(),
}

NOTES = {
    "markdown quote": ["quote prefix ('> ') removed from", "2 code fence lines dropped"],
    "ANSI colours and a prompt": ["ANSI escape codes removed", "shell prompt line"],
    "UTF-16 LE with BOM, CRLF (PowerShell >)": ["read as UTF-16 LE (byte-order mark)"],
    "UTF-16 LE, no BOM": ["read as UTF-16 LE (no byte-order mark)"],
    "UTF-16 BE with BOM": ["read as UTF-16 BE (byte-order mark)"],
    "UTF-8 BOM, CR line ends": ["UTF-8 byte-order mark dropped", "CR line ends read as line"],
}


def _values(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["monotonic"], errors="ignore").reset_index(drop=True)


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("name", [DMON, QUERY])
def test_a_pasted_file_gives_the_plain_files_samples_and_says_what_was_undone(
        tmp_path, name, form):
    plain_path = case_path(name)
    text = plain_path.read_text()
    ref = import_file(plain_path, start_time=START)
    assert len(ref.samples) > 0
    p = tmp_path / f"pasted_{form.split()[0]}.txt"
    p.write_bytes(FORMS[form](text))
    assert detect_format(p) == ref.format
    got = import_file(p, start_time=START)
    pd.testing.assert_frame_equal(_values(got.samples), _values(ref.samples))
    assert got.skipped == ref.skipped and got.gpus == ref.gpus
    joined = " | ".join(got.normalised)
    want = list(NOTES[form])
    if form == "markdown quote" and any(ln.startswith("#") for ln in text.splitlines()):
        want.append("escaped '\\#' read as '#'")  # dmon's header lines
    for phrase in want:
        assert phrase in joined, (form, got.normalised)


def test_plain_text_is_left_alone():
    """Nothing a real file carries is taken for a paste: dmon's '# gpu' header is no prompt,
    Prometheus' '# HELP' lines stay, CRLF is ordinary (no note), a lone '>' in a value stays."""
    for text in ("# gpu    sm\n# Idx     %\n    0    98\n",
                 ("# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
                  "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 98\n"),
                 "timestamp, name\r\n2024/01/16 14:44:16.977, a>b\r\n"):
        out = pasted.normalise(text)
        assert out.notes == [] and out.text == text.replace("\r\n", "\n")
    assert pasted.decode(b"# gpu sm\n 0 98\n") == (None, [])


def test_line_numbers_survive_so_a_refused_row_is_named_by_its_line(tmp_path):
    """A dropped prompt or fence becomes an empty line: a bad row keeps its line number."""
    text = case_path(DMON).read_text().splitlines()
    text[3] = "    1    999999     68      -     99     55      0      0      0      0  13365" \
              "   2017  90536      4      0"  # line 4: a power no GPU draws
    plain = tmp_path / "plain.txt"
    plain.write_text("\n".join(text) + "\n")
    quoted = tmp_path / "quoted.txt"
    quoted.write_bytes(_quoted("\n".join(text)).encode())
    a = import_file(plain, start_time=START)
    b = import_file(quoted, start_time=START)
    assert [n for n, _ in a.skipped] == [4]
    assert [n for n, _ in b.skipped] == [5]  # one line lower: the opening fence above it


def test_the_import_command_names_what_it_undid(tmp_path, capsys):
    p = tmp_path / "ps.txt"
    p.write_bytes(FORMS["UTF-16 LE with BOM, CRLF (PowerShell >)"](case_path(DMON).read_text()))
    start = ["--start-time", str(START)]
    assert main(["import", str(p), "--store", str(tmp_path / "s.db"), *start]) == 0
    out = capsys.readouterr().out
    assert "pasted text: read as UTF-16 LE (byte-order mark)" in out, out
    assert main(["import", str(p), "--store", str(tmp_path / "t.db"), "--json", *start]) == 0
    assert json.loads(capsys.readouterr().out)["files"][0]["normalised"] == [
        "read as UTF-16 LE (byte-order mark)"]


def test_binary_data_is_not_taken_for_utf16(tmp_path):
    """Many zero bytes at odd offsets is UTF-16 text only if it decodes to printable ASCII:
    an int16 array stays 'binary data' (a first version read it as UTF-16 text)."""
    import numpy as np

    from tealeaves.data.importers import ImportFormatError

    p = tmp_path / "arr.bin"
    p.write_bytes(np.arange(3000, dtype="<i2").tobytes())
    with pytest.raises(ImportFormatError, match="binary data"):
        detect_format(p)
    assert pasted.decode(b"\xff\xfe\x00\x00" + "# gpu\n".encode("utf-32-le"))[1] == [
        "read as UTF-32 LE (byte-order mark)"]


def test_a_saved_metrics_page_given_to_classify_says_where_it_goes(tmp_path, capsys):
    p = tmp_path / "m.txt"
    p.write_text("# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 3.0\n")
    assert main(["classify", str(p)]) == 2
    err = capsys.readouterr().err
    assert "saved /metrics page" in err and "tealeaves import" in err and "m.txt" in err


@pytest.mark.parametrize("prompt", ["[root@host00001 user1]# dcgmi dmon -e 1001",
                                    "[user@gpu01 ~]$ nvidia-smi dmon -c 1 -s pucm",
                                    "user@mac ~ % nvidia-smi dmon", "PS C:\\> nvidia-smi dmon",
                                    "(base) root@h200:/# sudo nvidia-smi dmon"])
def test_the_prompts_people_paste_are_dropped(prompt):
    out = pasted.normalise(prompt + "\n# gpu    sm\n    0    98\n")
    assert out.notes == ["1 shell prompt line dropped"]
    assert out.text.split("\n")[0] == "" and out.text.split("\n")[1] == "# gpu    sm"
