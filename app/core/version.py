"""batchd's version, read once from the installed package's metadata (pyproject.toml's
`version` is its one source): `batchd --version`, /openapi.json and the User-Agent of calls
to upstream engines all show it."""

from importlib import metadata

VERSION = metadata.version("batchd")
USER_AGENT = f"batchd/{VERSION}"
