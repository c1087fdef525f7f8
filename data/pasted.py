"""Text as people paste it, made plain before a format is detected.

Telemetry reaches tealeaves copied from wherever it was shown: a GitHub issue's markdown quote
(``> `` on every line, ``\\#`` for ``#``, inside a code fence), a terminal with colours (ANSI
escape codes) and shell prompts, PowerShell's ``>`` redirection (UTF-16 with a byte-order
mark), an old Mac editor (CR-only line ends, which read as one line).  ``normalise`` undoes
each of these and says what it did, so the import summary can name it.

Line numbers are kept: a removed line (a prompt, a code fence) becomes an empty line, so a
skipped row is still named by its line in the file the user has.

No format knowledge lives here; ``data.importers`` calls this before detecting the format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: ECMA-48 escape sequences: CSI (``ESC [ ... final``, colours and cursor moves), OSC
#: (``ESC ] ... BEL`` or ``ESC ] ... ESC \\``, window titles, links) and two-byte escapes.
_RE_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
#: A markdown quote prefix, nested quotes included (``> > ``).
_RE_QUOTE = re.compile(r"^[ \t]{0,3}(?:>[ \t]?)+")
#: A markdown code fence line (```` ``` ````, ```` ```text ````, ``~~~``).
_RE_FENCE = re.compile(r"^\s*(?:```|~~~)[\w+-]*\s*$")
#: A shell prompt followed by a command: ``$ cmd``, ``user@host:~/dir$ cmd``, ``root@h:/# cmd``
#: (a ``#`` prompt only after ``user@host``: a bare ``# gpu`` is nvidia-smi dmon's header),
#: RHEL's ``[user@host ~]$ cmd`` / ``[root@host dir]# cmd``, ``(venv) user@host:~$ cmd``,
#: PowerShell's ``PS C:\\> cmd``, zsh's ``%`` and ``user@mac ~ % cmd``.
_RE_PROMPT = re.compile(
    r"^\s*(?:\([^)]*\)\s*)?(?:[\w.-]+@[\w.-]+(?::[^\s$#]*)?\s?[$#%]|\[[\w.-]+@[\w.-]+[^\]]*\][$#]"
    r"|[\w.-]+@[\w.-]+ [^\s]+ %|\$|%|PS [^>]*>)\s*"
    r"(?:sudo\s+)?(?:nvidia-smi|dcgmi|watch|gpustat|nvitop|curl|cat|tee|head|tail|less|more|"
    r"python3?|tealeaves|docker|kubectl|ssh|\S+\.sh)\b.*$")
#: The prefix Ray puts on a worker's output lines: ``(task, pid=7059) ``, ``(SGLangEngine
#: pid=4242) ``, ``(raylet, ip=10.0.0.2) ``, ``(pid=123, ip=...)``.
_RE_RAY = re.compile(r"^\([A-Za-z_][\w.-]*(?:,? [\w.-]+)*?,? ?(?:pid=\d+|ip=[\d.]+)"
                     r"(?:, ?ip=[\d.]+)?\) ?|^\(pid=\d+(?:, ?ip=[\d.]+)?\) ?", re.ASCII)
#: Share of non-blank lines that must carry a quote prefix before prefixes are removed.
QUOTED_SHARE = 0.6


@dataclass
class Normalised:
    """Plain text and what was done to get it.

    Attributes:
        text: the text, LF line ends, no escape codes, no quote prefixes.
        notes: one phrase per change made, in order ("CR line ends read as line breaks",
            "3 ANSI escape codes removed", "1 shell prompt line dropped", ...); empty when
            the text was plain.
    """

    text: str
    notes: list[str] = field(default_factory=list)


def decode(data: bytes) -> tuple[str | None, list[str]]:
    """Text of ``data`` when it is UTF-16 (with or without a byte-order mark), UTF-32 with
    one, or UTF-8 with one: ``(text, notes)``; ``(None, [])`` for anything else (the caller
    decodes it as UTF-8 and judges whether it is binary), a wide decode that does not give
    mostly printable ASCII (``PLAIN_SHARE``) included.

    UTF-16 without a mark is recognised by its zero bytes: at least 30 % of the first 4 KB
    zero, nearly all at odd offsets (little-endian) or at even ones (big-endian), which text
    in any 8-bit encoding never has.
    """
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", errors="replace"), ["UTF-8 byte-order mark dropped"]
    candidates = []
    for bom, codec, name in ((b"\xff\xfe\x00\x00", "utf-32-le", "UTF-32 LE"),
                             (b"\x00\x00\xfe\xff", "utf-32-be", "UTF-32 BE"),
                             (b"\xff\xfe", "utf-16-le", "UTF-16 LE"),
                             (b"\xfe\xff", "utf-16-be", "UTF-16 BE")):
        if data.startswith(bom):
            candidates.append((data[len(bom):], codec, f"read as {name} (byte-order mark)"))
            break
    head = data[:4096]
    if not candidates and len(head) >= 8 and head.count(0) >= 0.3 * len(head):
        zeros = head.count(0)
        if head[1::2].count(0) >= 0.9 * zeros:
            candidates.append((data, "utf-16-le", "read as UTF-16 LE (no byte-order mark)"))
        elif head[0::2].count(0) >= 0.9 * zeros:
            candidates.append((data, "utf-16-be", "read as UTF-16 BE (no byte-order mark)"))
    for payload, codec, note in candidates:
        text = payload.decode(codec, errors="replace")
        if _plain_share(text) >= PLAIN_SHARE:
            return text, [note]
    return None, []


#: Share of printable ASCII (and tabs, line ends) a wide-encoding decode must give to be
#: taken for text: telemetry is ASCII, while binary data decoded as UTF-16 (an int16 array,
#: an executable) gives scattered CJK and control characters.
PLAIN_SHARE = 0.9


def _plain_share(text: str) -> float:
    head = text[:4096]
    if not head:
        return 1.0
    ok = sum(1 for c in head if (" " <= c <= "~") or c in "\t\r\n")
    return ok / len(head)


def normalise(text: str) -> Normalised:
    """Undo what pasting does to a telemetry text (see the module docstring).

    Args:
        text: decoded text (``decode`` or UTF-8).

    Returns:
        A ``Normalised``: the plain text, same number of lines, and the notes.
    """
    notes: list[str] = []
    if "\r" in text:  # CRLF (Windows) is ordinary, not worth a note; a lone CR is not
        text = text.replace("\r\n", "\n")
        lone = text.count("\r")
        if lone:
            text = text.replace("\r", "\n")
            notes.append(f"{lone} CR line end{'s' if lone != 1 else ''} read as line breaks")
    text, n_ansi = _RE_ANSI.subn("", text)
    if n_ansi:
        notes.append(f"{n_ansi} ANSI escape code{'s' if n_ansi != 1 else ''} removed")
    lines = text.split("\n")
    filled = [ln for ln in lines if ln.strip()]
    quoted = sum(1 for ln in filled if _RE_QUOTE.match(ln))
    if filled and quoted >= QUOTED_SHARE * len(filled):
        lines = [_RE_QUOTE.sub("", ln) for ln in lines]
        notes.append(f"quote prefix ('> ') removed from {quoted} "
                     f"line{'s' if quoted != 1 else ''}")
    elif quoted and _RE_QUOTE.match(filled[0]):
        # a quote begun on the first lines only (the header quoted, the rows pasted under
        # it): the leading run of quoted lines loses its prefix, else the header is lost
        lead = 0
        for i, ln in enumerate(lines):
            if not ln.strip():
                continue
            if not _RE_QUOTE.match(ln):
                break
            lines[i] = _RE_QUOTE.sub("", ln)
            lead += 1
        notes.append(f"quote prefix ('> ') removed from the first {lead} "
                     f"line{'s' if lead != 1 else ''} (the rest were not quoted)")
    ray = 0
    for i, ln in enumerate(lines):
        m = _RE_RAY.match(ln)
        if m:
            lines[i] = ln[m.end():]
            ray += 1
    if ray:
        notes.append(f"Ray's '(task pid=...)' prefix removed from {ray} "
                     f"line{'s' if ray != 1 else ''}")
    escaped = 0
    for i, ln in enumerate(lines):
        if ln.lstrip().startswith("\\#"):
            lines[i] = ln.replace("\\#", "#", 1)
            escaped += 1
    if escaped:
        notes.append(f"escaped '\\#' read as '#' on {escaped} "
                     f"line{'s' if escaped != 1 else ''}")
    dropped = {"code fence": 0, "shell prompt": 0}
    for i, ln in enumerate(lines):
        if _RE_FENCE.match(ln):
            lines[i] = ""
            dropped["code fence"] += 1
        elif _RE_PROMPT.match(ln):
            lines[i] = ""
            dropped["shell prompt"] += 1
    for what, n in dropped.items():
        if n:
            notes.append(f"{n} {what} line{'s' if n != 1 else ''} dropped")
    return Normalised("\n".join(lines), notes)
