"""Status columns: a VARCHAR holding an enum member's value, read back as the member, and the
CHECK constraint that keeps any other string out of it."""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy import CheckConstraint, Enum

STATUS_LENGTH = 16


def status_type(enum: type[StrEnum]) -> Enum:
    # Not a native (Postgres) enum: adding a value stays a plain migration of the CHECK.
    return Enum(
        enum,
        native_enum=False,
        create_constraint=False,
        length=STATUS_LENGTH,
        values_callable=lambda members: [m.value for m in members],
    )


def status_check(enum: type[StrEnum], column: str = "status") -> CheckConstraint:
    """`column IN (every value)`, named ck_<table>_<column> by the naming convention."""
    values = ", ".join(f"'{m.value}'" for m in enum)
    return CheckConstraint(f"{column} IN ({values})", name=column)
