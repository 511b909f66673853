"""The dashboard's page and assets over plain HTTP: public, offline (nothing fetched from
another host), shipped as package data, and kept inert by a strict Content-Security-Policy."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import httpx

import app.ui

STATIC = Path(app.ui.__file__).parent / "static"
ROOT = Path(__file__).parents[2]
# Where an asset names another resource: HTML src/href, JS imports, CSS url().
REFERENCE = re.compile(r"""(?:src|href)="([^"]+)"|(?:import|from)\s*["']([^"']+)["']|url\(([^)]+)\)""")
ANY_URL = re.compile(r"""(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}[^\s"'`)]*""")
# createElementNS needs the SVG namespace name; it is an identifier, never fetched.
NOT_FETCHED = {"http://www.w3.org/2000/svg"}


def _ui(server) -> str:
    return server.base_url.removesuffix("/v1")


def _crawl(server) -> dict[str, httpx.Response]:
    """Every resource reachable from /ui through its references, fetched without a key."""
    seen: dict[str, httpx.Response] = {}
    todo = ["/ui"]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        response = server.http.get(_ui(server) + path)
        seen[path] = response
        for match in REFERENCE.finditer(response.text):
            ref = next(group for group in match.groups() if group).strip("'\"")
            if ref.startswith(("#", "data:")):
                continue
            if ref.startswith("./"):
                ref = path.rsplit("/", 1)[0] + ref[1:]
            todo.append(ref)
    return seen


def test_ui_and_its_assets_are_served_without_a_key(server):
    resources = _crawl(server)
    assert {"/ui", "/ui/static/app.css", "/ui/static/js/main.js", "/ui/static/js/api.js"} <= set(resources)
    for path, response in resources.items():
        assert response.status_code == 200, path
        assert path.startswith("/ui"), f"{path} is not the dashboard's own"
    types = {path: r.headers["content-type"].split(";")[0] for path, r in resources.items()}
    assert types["/ui"] == "text/html" and types["/ui/static/app.css"] == "text/css"
    assert all(t == "text/javascript" for p, t in types.items() if p.endswith(".js"))
    # Every shipped file is in use (a stale asset would be dead weight in the wheel).
    shipped = {"/ui/static/" + p.relative_to(STATIC).as_posix() for p in STATIC.rglob("*") if p.is_file()}
    assert shipped - {"/ui/static/index.html"} <= set(resources)


def test_pages_reference_no_external_url(server):
    for path, response in _crawl(server).items():
        urls = set(ANY_URL.findall(response.text)) - NOT_FETCHED
        assert not urls, f"{path} names {urls}"


def test_page_forbids_other_origins_and_inline_code(server):
    response = server.http.get(_ui(server) + "/ui")
    csp = response.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert "<script>" not in response.text and " style=" not in response.text
    assert server.http.get(_ui(server) + "/ui/", follow_redirects=True).url.path == "/ui"


def test_the_api_still_needs_a_key(server):
    response = server.http.get(server.base_url + "/batches")
    assert response.status_code == 401 and response.json()["error"]["type"] == "invalid_request_error"


def test_unknown_asset_is_404(server):
    """A name that is not an asset is a 404 beside one that is served, and so is a path that
    climbs out of the asset directory (the package's own modules stay unreadable)."""
    known = server.http.get(_ui(server) + "/ui/static/js/main.js")
    assert known.status_code == 200 and known.text == (STATIC / "js" / "main.js").read_text()
    for path in (
        "/ui/static/nope.js",
        "/ui/static/js/nope.js",
        "/ui/static/../routes.py",
        "/ui/static/%2e%2e/routes.py",
    ):
        response = server.http.get(_ui(server) + path)
        assert response.status_code == 404, (path, response.status_code, response.text[:80])


def test_every_static_file_is_package_data():
    """setuptools ships only files matching these globs; a new kind of asset needs a new glob."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["app.ui"]
    for path in STATIC.rglob("*"):
        if path.is_file():
            relative = path.relative_to(STATIC.parent).as_posix()
            assert any(fnmatch(relative, g) and relative.count("/") == g.count("/") for g in globs), relative
