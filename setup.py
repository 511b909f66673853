"""Packages only (the rest is pyproject.toml): pyproject's `packages.find` cannot add a package
from a folder of another name, and the top-level migrations/ folder (the source of the schema)
ships in the wheel as the `batchd_migrations` package (app/db/migrate.py finds it there)."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["app", "app.*"]), "batchd_migrations", "batchd_migrations.versions"],
    package_dir={"batchd_migrations": "migrations"},
)
