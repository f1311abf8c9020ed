"""Kubernetes resource quantities (``500m``, ``16Gi``, ``1e3``, ``100500u``) as exact decimals.

The grammar of k8s.io/apimachinery ``resource.Quantity``::

    <quantity> ::= <signedNumber><suffix>
    <number>   ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>   ::= Ki | Mi | Gi | Ti | Pi | Ei            (powers of 1024)
                 | n | u | m | "" | k | M | G | T | P | E  (powers of 1000)
                 | e<signedNumber> | E<signedNumber>       (decimal exponent)

Read as the API server reads a quantity of a JSON document (``Quantity.UnmarshalJSON``):

- digits are ASCII ``0-9`` only (``１２Gi`` is no quantity);
- white space around a quoted value is trimmed (Go's ``unicode.IsSpace``); inside it,
  it is an error;
- a sign or a point without digits is zero (``-``, ``.``), as upstream parses them;
- a value is kept down to the nano and a finer non-zero one is rounded away from zero
  (``0.1n`` is ``1n``, ``3.001n`` is ``4n``), exactly, whatever the number of digits.

One documented difference: a magnitude above 2^63-1 is refused here. Upstream caps a
binary one at 2^63-1 silently (``9Ei``) and keeps a decimal one exact (``12E``); no
resource of a node or pod holds such a value, and refusing it keeps every figure an
exact 64-bit count (``tests/data/quantity/apimachinery.csv`` lists the vectors where
this differs).
"""

from __future__ import annotations

import re
from decimal import Decimal

from fleetaudit.core.sanitize import quoted

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<num>[0-9]*)(?:\.(?P<denom>[0-9]*))?"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE](?P<exp>[+-]?[0-9]+))?",
    re.ASCII,
)
# Go's unicode.IsSpace, which strings.TrimSpace trims (Python's str.strip also trims \x1c-\x1f)
_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"  # noqa: E501
MAX = 2**63 - 1
_MAX_NANOS = MAX * 10**9
_KEPT_DIGITS = 60  # digits beyond these change a nano value only by rounding it up


class QuantityError(ValueError):
    """A text that is not a Kubernetes quantity."""


class QuantityTooLarge(QuantityError):
    """A well-formed quantity whose magnitude is above 2^63-1."""


def parse_quantity(text: object) -> Decimal:
    """The value of a Kubernetes quantity, exact to the nano (finer values rounded away
    from zero, as the API server rounds them).

    A JSON number (``int`` or the ``Decimal`` a JSON reader keeps) is read from its text,
    as the API server reads an unquoted number.

    Raises:
        QuantityError: the text is not a quantity (:class:`QuantityTooLarge`: its
            magnitude is above 2^63-1).

    >>> parse_quantity("95500m")
    Decimal('95.5')
    >>> parse_quantity("16Gi")
    Decimal('17179869184')
    >>> parse_quantity("100500u"), parse_quantity("3.001n")
    (Decimal('0.1005'), Decimal('4E-9'))
    >>> parse_quantity("1E") == 10**18
    True
    """
    if isinstance(text, bool) or text is None:
        raise QuantityError(f"{quoted(text)} is not a quantity")
    if isinstance(text, (int, Decimal)):
        text = str(text)
    if not isinstance(text, str):
        raise QuantityError(f"{quoted(text)} is not a quantity")
    match = _QUANTITY.fullmatch(text.strip(_SPACE))
    if match is None or not text.strip(_SPACE):
        raise QuantityError(f"{quoted(text)} is not a quantity")
    num = match["num"].lstrip("0")
    denom = (match["denom"] or "").rstrip("0")
    digits = (num + denom).lstrip("0")
    if not digits:
        return Decimal(0)
    suffix = match["suffix"]
    if match["exp"] is not None:
        if len(match["exp"].lstrip("+-")) > 18:  # upstream reads it as an int64, or refuses it
            raise QuantityError(f"{quoted(text)} is not a quantity")
        power10, power2 = int(match["exp"]), 0
    elif suffix in _BINARY:
        power10, power2 = 0, _BINARY[suffix]
    else:
        power10, power2 = _DECIMAL[suffix or ""], 0
    # value = digits * 2^power2 * 10^scale; in nanos, 10^(scale + 9)
    scale = power10 - len(denom) + 9
    # the magnitude's order, to refuse a huge value before building it (1e1000000)
    order = len(digits) + scale + (power2 * 3) // 10  # >= log10(nanos) - 1
    if order > len(str(_MAX_NANOS)) + 1:
        raise QuantityTooLarge(f"{quoted(text)} is above 2^63-1")
    inexact = False
    if len(digits) > _KEPT_DIGITS:  # a long mantissa: its tail only rounds the nanos up
        inexact = digits[_KEPT_DIGITS:].strip("0") != ""
        scale += len(digits) - _KEPT_DIGITS
        digits = digits[:_KEPT_DIGITS]
    mantissa = int(digits) << power2
    if scale >= 0:
        nanos = mantissa * 10**scale + (1 if inexact else 0)
    elif -scale > len(str(mantissa)):
        nanos = 1  # below one nano: rounded up to it
    else:
        whole, rest = divmod(mantissa, 10**-scale)  # rounded away from zero, as upstream
        nanos = whole + (1 if rest or inexact else 0)
    if nanos > _MAX_NANOS:
        raise QuantityTooLarge(f"{quoted(text)} is above 2^63-1")
    value = Decimal(nanos).scaleb(-9).normalize()
    if value == value.to_integral_value():
        value = value.quantize(Decimal(1))  # 16Gi reads 17179869184, not 1.7E+10
    return -value if match["sign"] == "-" else value


def is_whole(value: Decimal) -> bool:
    """Whether a quantity's value is a whole number (extended resources must be).

    >>> is_whole(parse_quantity("2")), is_whole(parse_quantity("1500m"))
    (True, False)
    """
    return value == value.to_integral_value()
