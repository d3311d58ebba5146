"""The exceptions salience raises.

Every error salience raises on bad input or a bad parameter derives from one base, so
``except SalienceError`` catches them all; the builtin named in brackets is a second base,
so that ``except ValueError`` (or ``TypeError``, ...) keeps working too::

    SalienceError
    ├── ParameterError            [ValueError] a parameter or argument out of range
    │   ├── ParameterTypeError    [TypeError]  ... or of the wrong type
    │   └── ParameterKeyError     [KeyError]   ... or naming no such entry, curve or result
    ├── TranscriptError           [ValueError] bad input data: names the transcript, entry, field
    │   ├── FormatError                        a file or message list in no layout the loaders know
    │   └── LimitError                         input deeper, larger or longer than salience.limits allows
    ├── ScorerError                            a scorer that cannot be fitted, loaded or used
    │   └── NotFittedError        [AttributeError] ``score`` called before ``fit``
    ├── BudgetError               [ValueError] the pinned entries alone exceed the token budget
    ├── InfeasibleError           [ValueError] no assignment fits the budget: raised by the
    │                                          solver, :mod:`salience.selector.knapsack` (it lives there)
    └── TrackingError                          the MLflow store could not be reached or used

A bare ``ValueError`` or ``TypeError`` from salience is a bug (an internal invariant that
broke), never a verdict on the input: the command line reports it as an internal error.

>>> from salience.errors import ParameterError, ParameterTypeError
>>> issubclass(ParameterTypeError, ParameterError) and issubclass(ParameterTypeError, TypeError)
True
>>> issubclass(ParameterError, ValueError)
True
"""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "FormatError",
    "LimitError",
    "NotFittedError",
    "ParameterError",
    "ParameterKeyError",
    "ParameterTypeError",
    "SalienceError",
    "ScorerError",
    "TrackingError",
    "TranscriptError",
    "describe",
]


class SalienceError(Exception):
    """Base class of every error salience raises."""


class ParameterError(SalienceError, ValueError):
    """A parameter or argument is out of range, or not one of the allowed values.

    The message names the parameter, what was expected and what came.
    """


class ParameterTypeError(ParameterError, TypeError):
    """A parameter or argument is of the wrong type (also a ``TypeError``)."""


class ParameterKeyError(ParameterError, KeyError):
    """A key, id or name that names nothing there (also a ``KeyError``).

    Its ``str`` is the message itself, not the quoted ``repr`` a ``KeyError`` shows.

    >>> str(ParameterKeyError("no entry 'm9'"))
    "no entry 'm9'"
    """

    def __str__(self) -> str:
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class TranscriptError(SalienceError, ValueError):
    """A transcript, entry or message is malformed.

    The message names where (transcript id, entry index and id, field), what was
    expected and what came.
    """


class FormatError(TranscriptError):
    """Input in a layout that no loader recognises, or unreadable input."""


class LimitError(TranscriptError):
    """Input nested deeper, larger or with more entries than the limits allow
    (:mod:`salience.limits`).

    The message names where (the file, line, transcript or message), the limit, its
    value and what came; ``limit`` (``"max_depth"``, ``"max_bytes"`` or
    ``"max_entries"``), ``maximum`` and ``value`` hold the same.
    """

    def __init__(self, message: str, *, limit: str = "", maximum: int = 0, value: int = 0) -> None:
        super().__init__(message)
        self.limit = limit
        self.maximum = maximum
        self.value = value


class ScorerError(SalienceError):
    """A scorer could not be fitted, saved, loaded or applied."""


class NotFittedError(ScorerError, AttributeError):
    """A scorer was used before ``fit``."""


class BudgetError(SalienceError, ValueError):
    """The entries that must stay (pins) do not fit the budget."""

    def __init__(self, message: str, *, budget: int = 0, required: int = 0) -> None:
        super().__init__(message)
        self.budget = budget
        self.required = required


class TrackingError(SalienceError):
    """The experiment-tracking store could not be used."""


def describe(value: object, *, typed: bool = True, none_typed: bool = True) -> str:
    """``repr(value)`` cut to 60 characters, for saying in an error what came.

    With ``typed``, the type follows unless the value is a str (or None, when
    ``none_typed`` is False), as attrs' validators do:

    >>> describe("abc"), describe(3), describe(None), describe(None, none_typed=False)
    ("'abc'", '3 that is a int', 'None that is a NoneType', 'None')
    >>> describe("x" * 100, typed=False)
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..."
    """
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    if not typed or isinstance(value, str) or (value is None and not none_typed):
        return text
    return f"{text} that is a {type(value).__name__}"
