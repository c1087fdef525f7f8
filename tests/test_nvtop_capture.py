"""kernels_bench/nvtop_capture: a program's terminal bytes, stamped, in a pty of the size
asked (issue 37's recordings of nvtop are made with it on the GPU machine)."""

from __future__ import annotations

import json

from tealeaves.kernels_bench.nvtop_capture import record


def test_a_program_is_recorded_in_a_terminal_of_the_size_asked(tmp_path):
    out = tmp_path / "r.nvtop.jsonl"
    n = record(["sh", "-c", "stty size; printf '\\033[1mGPU 45%%\\033[0m\\n'"], 132, 43, 10.0,
               out)
    head, *chunks = [json.loads(x) for x in out.read_text().splitlines()]
    assert (head["cols"], head["rows"]) == (132, 43) and n == len(chunks) >= 1
    text = "".join(c["data"] for c in chunks)
    assert "43 132" in text and "\x1b[1mGPU 45%" in text  # escapes kept as bytes
    assert all(c["t"] >= head["t0"] for c in chunks)
