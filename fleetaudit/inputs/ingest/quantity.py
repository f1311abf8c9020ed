"""Kubernetes resource quantities (``500m``, ``16Gi``, ``1e3``) as exact decimals.

The grammar of k8s.io/apimachinery ``resource.Quantity``::

    <quantity> ::= <signedNumber><suffix>
    <number>   ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>   ::= Ki | Mi | Gi | Ti | Pi | Ei            (powers of 1024)
                 | m | "" | k | M | G | T | P | E          (powers of 1000)
                 | e<signedNumber> | E<signedNumber>       (decimal exponent)

Like the API server, a value is rounded *up* to three decimal places
(``0.1m`` is ``1m``). Suffixes Kubernetes rejects (``K``, ``ki``, ``n``,
``u``) are errors here too.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

_BINARY = {"Ki": 1, "Mi": 2, "Ti": 4, "Gi": 3, "Pi": 5, "Ei": 6}
_DECIMAL = {"m": -1, "": 0, "k": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?)$"
)
_MILLI = Decimal("0.001")
_MAX = Decimal(2**63 - 1)


class QuantityError(ValueError):
    """A text that is not a Kubernetes quantity."""


def parse_quantity(text: object) -> Decimal:
    """The value of a Kubernetes quantity, exact, rounded up to 1/1000.

    Raises:
        QuantityError: the text is not a quantity.

    >>> parse_quantity("95500m")
    Decimal('95.500')
    >>> parse_quantity("16Gi")
    Decimal('17179869184')
    >>> parse_quantity("1E") == 10**18
    True
    """
    if isinstance(text, bool) or text is None:
        raise QuantityError(f"{text!r} is not a quantity")
    if isinstance(text, int):
        text = str(text)
    if not isinstance(text, str):
        raise QuantityError(f"{text!r} is not a quantity")
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise QuantityError(f"{text!r} is not a quantity")
    try:
        value = Decimal(match["number"])
        if match["exp"] is not None:
            value = value.scaleb(int(match["exp"][1:]))
        else:
            suffix = match["suffix"] or ""
            if suffix in _BINARY:
                value = value * (Decimal(1024) ** _BINARY[suffix])
            else:
                value = value.scaleb(3 * _DECIMAL[suffix])
    except (InvalidOperation, ValueError, OverflowError) as exc:
        raise QuantityError(f"{text!r} is not a quantity") from exc
    if abs(value) > _MAX:
        raise QuantityError(f"{text!r} is above 2^63-1")
    if value != value.to_integral_value():
        value = value.quantize(_MILLI, rounding=ROUND_CEILING)
    return value


def try_quantity(text: object) -> Decimal | None:
    """The quantity's value, or ``None`` when ``text`` is not one."""
    try:
        return parse_quantity(text)
    except QuantityError:
        return None
