"""One migrated database per backend for the tests of single background passes (each test
empties it first)."""

from __future__ import annotations

import pytest

from tests.support.database import migrated_database


@pytest.fixture(scope="session")
def db_url(database_factory, tmp_path_factory) -> str:
    return migrated_database(database_factory, tmp_path_factory.mktemp("background-db"))
