"""Screenshots: check an uploaded picture, and find when it was taken.

An engineer drops screenshots of nvtop or utilisation graphs into the dashboard; tealeaves places
each on the timeline at its capture time.  This module reads the picture safely and finds that
time; ``data.store.SampleStore`` keeps the pictures (``put_screenshot``).

**Safety** (``inspect_image``): at most ``MAX_BYTES`` bytes; only PNG and JPEG, identified from
the content by Pillow (never from the name); the pixel count is checked from the header, before
anything is decoded (a 30,000 x 30,000 PNG is a few hundred KB but 900 M pixels); the whole
image is then decoded once, so a truncated or corrupt file is refused too.  File names are only
parsed for a time, never used as paths: pictures are stored by content hash.

**Capture time**, in this order (``capture_time``):

1. image metadata: EXIF ``DateTimeOriginal`` (with ``OffsetTimeOriginal`` when present: then the
   instant is exact), EXIF ``DateTime``; PNG text chunks (tEXt/iTXt) ``Creation Time``, which
   GNOME Shell writes in the locale's format (``Tue 31 May 2026 06:31:15 PM CEST``);
2. the file name of a known screenshot tool (``NAME_PATTERNS``): scrot's default
   ``%Y-%m-%d-%H%M%S_<w>x<h>_scrot.png`` with its ``_000`` collision suffixes,
   gnome-screenshot / GNOME Shell ``Screenshot from 2026-05-31 18-31-15.png``, Spectacle
   ``Screenshot_20260531_183115.png``, flameshot ``2026-05-31_18-31.png`` (minute resolution),
   macOS ``Screenshot 2026-05-31 at 18.31.15.png`` and ``Screen Shot 2026-05-31 at 6.31.15 PM.png``,
   Windows Snipping Tool ``Screenshot 2026-05-31 183115.png``;
3. the browser's last-modified time of the file (an instant; the caller passes it);
4. nothing: the user sets it.

Times from metadata (without an offset) and names are local wall-clock times without a zone: they
become instants in the time zone the user gives (the dashboard defaults to the browser's).
"""

from __future__ import annotations

import hashlib
import io
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from tealeaves.data.wallclock import iana_name

#: Largest upload accepted, bytes (20 MB).
MAX_BYTES = 20 * 2**20
#: Largest picture accepted, pixels (checked before decoding): three 4K monitors side by side
#: are 25 M pixels.
MAX_PIXELS = 64_000_000
#: Formats Pillow may decode here.
FORMATS = ("PNG", "JPEG")


#: Capture times outside these years are not believed (a camera clock at 0000-00-00, a
#: corrupt tag); the next source is tried.
YEARS = (1971, 2200)
#: Largest UTC offset accepted from metadata, seconds (real zones span -12 h .. +14 h).
MAX_OFFSET_S = 18 * 3600


def plausible(t: datetime | float | None) -> bool:
    """True for a wall-clock time or epoch seconds within ``YEARS``."""
    if t is None:
        return False
    if isinstance(t, datetime):
        return YEARS[0] <= t.year < YEARS[1]
    try:
        return math.isfinite(t) and datetime(YEARS[0], 1, 1).timestamp() <= t < \
            datetime(YEARS[1], 1, 1).timestamp()
    except (TypeError, ValueError, OverflowError):
        return False


class ScreenshotError(ValueError):
    """An upload that is not a screenshot tealeaves accepts; the message says why."""


@dataclass(frozen=True)
class NamePattern:
    """A screenshot tool's default file name.

    Attributes:
        tool: the tool, as shown to the user ("scrot").
        regex: matches the whole base name; named groups ``Y m d H M`` and optionally ``S``
            and ``p`` (AM/PM).
        resolution_s: how precise the name's time is, seconds.
    """

    tool: str
    regex: re.Pattern
    resolution_s: float = 1.0


_EXT = r"\.(?:png|jpe?g)"
_I = re.IGNORECASE
_SP = r"[ \u202f\u00a0]"  # macOS 13+ puts a narrow no-break space before AM/PM
NAME_PATTERNS: tuple[NamePattern, ...] = (
    NamePattern("scrot", re.compile(
        r"(?P<Y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})-(?P<H>\d{2})(?P<M>\d{2})(?P<S>\d{2})"
        r"_\d+x\d+_scrot(?:_\d{3})?" + _EXT, _I)),
    NamePattern("gnome-screenshot / GNOME Shell", re.compile(
        r"Screenshot from (?P<Y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2}) (?P<H>\d{2})-(?P<M>\d{2})-"
        r"(?P<S>\d{2})(?:-\d+)?" + _EXT, _I)),
    NamePattern("Spectacle", re.compile(
        r"Screenshot_(?P<Y>\d{4})(?P<m>\d{2})(?P<d>\d{2})_(?P<H>\d{2})(?P<M>\d{2})(?P<S>\d{2})"
        r"(?:_\d+)?" + _EXT, _I)),
    NamePattern("macOS", re.compile(
        r"Screen ?[Ss]hot (?P<Y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2}) at (?P<H>\d{1,2})\.(?P<M>\d{2})"
        r"\.(?P<S>\d{2})(?:" + _SP + r"?(?P<p>[AP]M))?(?: \(\d+\)| \d+)?" + _EXT, _I)),
    NamePattern("Windows Snipping Tool", re.compile(
        r"Screenshot (?P<Y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2}) (?P<H>\d{2})(?P<M>\d{2})(?P<S>\d{2})"
        r"(?: \(\d+\))?" + _EXT, _I)),
    NamePattern("flameshot", re.compile(
        r"(?P<Y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})_(?P<H>\d{2})-(?P<M>\d{2})(?:_\d+)?" + _EXT,
        _I), resolution_s=60.0),
)


@dataclass(frozen=True)
class CaptureTime:
    """When a screenshot was taken, and how tealeaves knows.

    Attributes:
        local: the wall-clock time read (naive), or None.
        offset_s: UTC offset the source gave with it (EXIF ``OffsetTimeOriginal``), or None.
        instant: epoch seconds when the source gives an instant (browser last-modified, or a
            local time with an offset), else None: ``resolve`` needs a time zone.
        source: where it came from ("PNG Creation Time", "file name (scrot)", ...), or "none".
        resolution_s: its precision, seconds.
    """

    local: datetime | None
    offset_s: float | None
    instant: float | None
    source: str
    resolution_s: float = 1.0

    def resolve(self, tz: str) -> float | None:
        """Epoch seconds of this capture time, reading a zone-less local time in ``tz``.

        Raises:
            ScreenshotError: ``tz`` is not an IANA time zone name.
        """
        if self.instant is not None:
            return self.instant
        if self.local is None:
            return None
        return to_epoch(self.local, tz)


#: Longest time zone name accepted (the longest IANA name has 32 characters).


def zone_name(tz: str | None) -> str:
    """The IANA time zone name ``tz`` as the zone database spells it (``europe/berlin`` ->
    ``Europe/Berlin``; surrounding blanks dropped): ``data.wallclock.iana_name``.

    Raises:
        ScreenshotError: empty, too long or not a zone of the system's zone database.
    """
    try:
        return iana_name(tz)
    except ValueError as exc:
        raise ScreenshotError(str(exc)) from None


def to_epoch(local: datetime, tz: str, strict: bool = False) -> float:
    """Epoch seconds of naive wall-clock time ``local`` in IANA zone ``tz``.

    A time the clocks skipped (the spring-forward gap) is read with the offset before the
    change (``fold=0``, PEP 495) unless ``strict``; a repeated autumn hour is read as its
    first pass.

    Raises:
        ScreenshotError: unknown zone (an IANA name as ``zone_name`` reads it, or a fixed
            offset such as ``+02:00``); with ``strict``, a local time that
            does not exist in the zone.
    """
    zone = _zone(tz)
    ts = local.replace(tzinfo=zone).timestamp()
    if strict and datetime.fromtimestamp(ts, tz=zone).replace(tzinfo=None) != local:
        raise ScreenshotError(f"{local:%Y-%m-%d %H:%M:%S} does not exist in {zone.key} (the "
                              f"clocks skipped it that night)")
    return ts


def _zone(tz: str):
    """The zone ``tz`` names: an IANA name (``zone_name``), else a fixed offset such as
    ``+02:00`` as ``--tz`` takes it (``data.wallclock.parse_zone``; no clock changes)."""
    try:
        return ZoneInfo(zone_name(tz))
    except ScreenshotError:
        from tealeaves.data.wallclock import parse_zone

        if isinstance(tz, str) and tz.strip() and tz.strip()[0] in "+-UuGg":
            try:
                return parse_zone(tz)
            except ValueError:
                pass
        raise


def time_from_name(name: str) -> CaptureTime | None:
    """The capture time in a screenshot tool's default file name, or None.

    Only the base name is read (any folder part a browser might send is dropped).
    """
    base = re.split(r"[\\/]", name or "")[-1].strip()
    for pat in NAME_PATTERNS:
        m = pat.regex.fullmatch(base)
        if not m:
            continue
        g = m.groupdict()
        hour = int(g["H"])
        if g.get("p"):
            hour = hour % 12 + (12 if g["p"].upper() == "PM" else 0)
        try:
            t = datetime(int(g["Y"]), int(g["m"]), int(g["d"]), hour, int(g["M"]),
                         int(g.get("S") or 0))
        except ValueError:  # 2026-13-45: looks like the pattern, is not a date
            continue
        if not plausible(t):
            continue
        return CaptureTime(t, None, None, f"file name ({pat.tool})", pat.resolution_s)
    return None


_CREATION_FORMATS = (
    "%a %d %b %Y %I:%M:%S %p", "%a %d %b %Y %H:%M:%S", "%a %b %d %H:%M:%S %Y",
    "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y:%m:%d %H:%M:%S", "%d.%m.%Y %H:%M:%S",
    "%m/%d/%Y %I:%M:%S %p", "%m/%d/%Y %H:%M:%S", "%a, %d %b %Y %H:%M:%S",
)


def parse_creation_time(text: str) -> tuple[datetime, float | None] | None:
    """A PNG ``Creation Time`` string as (naive local time, UTC offset seconds or None).

    The PNG spec suggests RFC 1123 dates; GNOME Shell writes the locale's format with a zone
    abbreviation (``Tue 31 May 2026 06:31:15 PM CEST``).  A trailing numeric offset
    (``+0200``, ``+02:00``, ``Z``) is kept; a zone abbreviation is dropped (they are
    ambiguous: the user's time zone decides).
    """
    s = " ".join((text or "").split())
    if not s:
        return None
    offset = None
    m = re.search(r"(?:\s|(?<=\d))(Z|[+-]\d{2}:?\d{2}|UTC|GMT)$", s)
    if m:
        tok = m.group(1)
        if tok in ("Z", "UTC", "GMT"):
            offset = 0.0
        else:
            sign = -1 if tok[0] == "-" else 1
            digits = tok[1:].replace(":", "")
            offset = sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
            if abs(offset) > MAX_OFFSET_S or int(digits[2:]) >= 60:
                offset = None  # not a real UTC offset: read the time in the user's zone
        s = s[: m.start()].strip()
    else:
        s = re.sub(r"\s+[A-Z]{2,5}$", "", s)  # CEST, PDT ...
    s = re.sub(r"\.\d+$", "", s)  # fractional seconds
    for fmt in _CREATION_FORMATS:
        try:
            return datetime.strptime(s, fmt), offset
        except ValueError:
            continue
    return None


def time_from_metadata(img) -> CaptureTime | None:
    """The capture time in a Pillow image's metadata (EXIF first, then PNG text), or None."""
    try:
        exif = img.getexif()
    except Exception:  # noqa: BLE001 - a broken EXIF block is no time, not a refusal
        exif = None
    if exif:
        sub = exif.get_ifd(0x8769)  # the Exif IFD: DateTimeOriginal lives there
        for tag, off_tag, where in ((36867, 36881, sub), (306, 36880, exif)):
            raw = where.get(tag) or (exif.get(tag) if where is sub else None)
            if not raw:
                continue
            try:
                t = datetime.strptime(str(raw).strip().rstrip("\x00")[:19], "%Y:%m:%d %H:%M:%S")
            except ValueError:
                continue
            if not plausible(t):
                continue
            off = sub.get(off_tag) or exif.get(off_tag)
            offset = _offset_s(off)
            name = "EXIF DateTimeOriginal" if tag == 36867 else "EXIF DateTime"
            return CaptureTime(t, offset, _instant(t, offset), name)
    text = getattr(img, "text", None) or img.info or {}
    for key, val in text.items():
        if str(key).strip().lower() != "creation time":
            continue
        parsed = parse_creation_time(str(val))
        if parsed is None:
            continue
        t, offset = parsed
        if not plausible(t):
            continue
        return CaptureTime(t, offset, _instant(t, offset), "PNG Creation Time")
    return None


def _instant(t: datetime, offset: float | None) -> float | None:
    """Epoch seconds of wall-clock ``t`` at UTC offset ``offset`` (None: no instant)."""
    if offset is None or abs(offset) > MAX_OFFSET_S:
        return None
    return t.replace(tzinfo=timezone(timedelta(seconds=offset))).timestamp()


def _offset_s(raw) -> float | None:
    m = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", str(raw or "").strip().rstrip("\x00"))
    if not m:
        return None
    return (-1 if m.group(1) == "-" else 1) * (int(m.group(2)) * 3600 + int(m.group(3)) * 60)


def capture_time(meta: CaptureTime | None, name: str,
                 last_modified_s: float | None) -> CaptureTime:
    """The capture time by the order in the module docstring: metadata, file name, the
    browser's last-modified time, else none (``source`` "none").  Times outside ``YEARS``
    were already passed over by the readers."""
    if meta is not None:
        return meta
    by_name = time_from_name(name)
    if by_name is not None:
        return by_name
    if last_modified_s is not None and plausible(float(last_modified_s)):
        return CaptureTime(None, None, float(last_modified_s), "browser last-modified")
    return CaptureTime(None, None, None, "none")


@dataclass(frozen=True)
class ImageInfo:
    """A checked upload.

    Attributes:
        sha256: hex digest of the bytes (the picture's key).
        nbytes: size in bytes.
        width, height: pixels.
        format: "PNG" or "JPEG".
        meta_time: the capture time in the metadata, or None.
    """

    sha256: str
    nbytes: int
    width: int
    height: int
    format: str
    meta_time: CaptureTime | None


def inspect_image(data: bytes, name: str = "", max_bytes: int = MAX_BYTES,
                  max_pixels: int = MAX_PIXELS) -> ImageInfo:
    """Check an upload and read what tealeaves keeps of it.

    Args:
        data: the file's bytes.
        name: its file name (only for messages and never as a path).
        max_bytes, max_pixels: limits (pixels read from the header, before decoding).

    Raises:
        ScreenshotError: too large, not PNG/JPEG, too many pixels, truncated or corrupt; the
            message names the file and the reason.
    """
    from PIL import Image, UnidentifiedImageError

    label = re.split(r"[\\/]", name or "")[-1] or "upload"
    if len(data) > max_bytes:
        raise ScreenshotError(f"{label}: {len(data) / 2**20:.1f} MB is over the "
                              f"{max_bytes / 2**20:.0f} MB limit")
    if not data:
        raise ScreenshotError(f"{label}: the file is empty")
    try:
        img = Image.open(io.BytesIO(data), formats=list(FORMATS))
    except UnidentifiedImageError:
        raise ScreenshotError(f"{label}: not a PNG or JPEG image") from None
    except Image.DecompressionBombError as exc:  # Pillow's own (higher) limit, from the header
        raise ScreenshotError(f"{label}: too many pixels ({exc}); the limit here is "
                              f"{max_pixels / 1e6:.0f} M") from None
    except Exception as exc:  # noqa: BLE001 - Pillow raises many kinds on broken headers
        raise ScreenshotError(f"{label}: not a readable PNG or JPEG image ({exc})") from None
    w, h = img.size
    if w * h > max_pixels:
        raise ScreenshotError(f"{label}: {w} x {h} pixels ({w * h / 1e6:.0f} M) is over the "
                              f"{max_pixels / 1e6:.0f} M-pixel limit")
    try:
        img.load()  # decode it all once (PNG text chunks after the pixels are read here too)
    except Exception as exc:  # noqa: BLE001 - truncated data, bad CRC, decoder errors
        raise ScreenshotError(f"{label}: the image is truncated or corrupt ({exc})") from None
    meta = time_from_metadata(img)
    return ImageInfo(hashlib.sha256(data).hexdigest(), len(data), w, h, img.format, meta)
