"""CSV cells safe to open in a spreadsheet: a text cell that a spreadsheet would run as a formula
(CSV injection: ``=HYPERLINK("http://evil","x")`` as a GPU or host name) is written with a
leading ``'``, as OWASP's "CSV Injection" page advises
(https://owasp.org/www-community/attacks/CSV_Injection): cells starting with ``=``, ``+``,
``-``, ``@``, tab (0x09) or carriage return (0x0D).  A number (``-0.5``, ``+3``) is left as
it is, so the columns stay numbers.  (The ``defusedcsv`` package does the same as a ``csv``
wrapper; this is the one rule, without a new dependency.)
"""

from __future__ import annotations

#: First characters that make a spreadsheet read a cell as a formula (OWASP).
FORMULA_STARTS: tuple[str, ...] = ("=", "+", "-", "@", "\t", "\r")


def _is_number(text: str) -> bool:
    """Whether ``text`` reads as a float (``-0.5``, ``+3``, ``-1e-05``)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def safe_cell(value):
    """``value`` as a CSV cell a spreadsheet shows as text: a ``str`` starting with one of
    ``FORMULA_STARTS`` (and not a plain number) gets a leading ``'``; anything else is
    returned unchanged."""
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
        return value
    if value[0] in "+-" and _is_number(value):
        return value
    return "'" + value
    return value


def safe_row(row: dict) -> dict:
    """A ``csv.DictWriter`` row with every cell through ``safe_cell``."""
    return {k: safe_cell(v) for k, v in row.items()}
