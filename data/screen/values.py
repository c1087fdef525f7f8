"""What a screenshot reader gives per GPU, and the number reading every tool's parser shares.

``GpuReading`` holds one GPU's printed values (``FIELDS``, with units) and their confidences;
``_n`` reads a number OCR may have garbled in known ways (``_DIGIT_FIX``) and
``_fields_conf`` gives each value the lowest confidence of its characters.  Kept apart from
``read`` so each tool's parser module (``tools``, ``nvtop``) imports it without a circle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: The values read per GPU, with their units.
FIELDS: dict[str, str] = {"util_pct": "%", "power_w": "W", "power_limit_w": "W",
                          "mem_used_mib": "MiB", "mem_total_mib": "MiB", "temp_c": "°C",
                          # nvtop's header prints these too
                          "sm_clock_mhz": "MHz", "mem_clock_mhz": "MHz", "fan_pct": "%",
                          "pcie_gen": "", "pcie_width": "x", "pcie_rx_bytes_per_s": "B/s",
                          "pcie_tx_bytes_per_s": "B/s", "enc_pct": "%", "dec_pct": "%"}
_DIGIT_FIX = str.maketrans({"O": "0", "o": "0", "@": "0", "©": "0", "D": "0", "Q": "0",
                            "l": "1", "I": "1", "|": "1", "i": "1", "S": "5", "s": "5",
                            "B": "8", "Z": "2", "z": "2", "g": "9", "G": "6"})
_NUM = r"[0-9OoQD@©lI|iSsBZzgG]"


def _n(tok: str) -> float:
    """A number OCR may have garbled in known ways (``_DIGIT_FIX``)."""
    return float(tok.translate(_DIGIT_FIX).replace(",", ""))


@dataclass
class GpuReading:
    """One GPU's values as printed (``FIELDS``), their confidences (0-1) and where in the
    picture they were read."""

    gpu: int
    values: dict[str, float] = field(default_factory=dict)
    confidence: dict[str, float] = field(default_factory=dict)
    #: Where its values line is: (x0, y0, x1, y1), fractions of the picture (y down); None
    #: for text not read from a picture.
    box: tuple[float, float, float, float] | None = None
    #: The device name as printed (nvtop's ``[NVIDIA H200]``), when the tool prints one.
    name: str | None = None
    #: Values the tool printed blank (``N/A``, ``ERR!``, gpustat's ``??``, dmon's ``-``):
    #: no reading (NaN where a number is needed), never 0 and never another row's value.
    blank: tuple[str, ...] = ()


def _fields_conf(m: re.Match, keys: dict[str, int], scores, conf: float,
                 offset: int = 0) -> dict[str, float]:
    """Each value's confidence: the lowest of its characters' (``scores``, the grid
    reader's; group ``keys[k]`` of ``m``, searched ``offset`` characters into the line),
    else the line's ``conf``."""
    out = {}
    for k, grp in keys.items():
        if m.group(grp) is None:
            continue
        if scores is None:
            out[k] = conf
            continue
        a, b = m.span(grp)
        cell = [scores[i] for i in range(a + offset, min(b + offset, len(scores)))]
        out[k] = min(cell) if cell else conf
    return out
