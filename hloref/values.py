"""Runtime values of the evaluator: numpy arrays, tuples of values, and tokens."""

from __future__ import annotations

__all__ = ["Token", "TOKEN_VALUE"]


class Token:
    """The value of ``token[]`` shapes (after-all, infeed, send...). Carries no data."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "token"

    def __eq__(self, other) -> bool:
        return isinstance(other, Token)

    def __hash__(self) -> int:
        return hash("token")


TOKEN_VALUE = Token()
