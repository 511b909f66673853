"""Serves the dashboard: `/ui` (the page) and `/ui/static/*` (its JS and CSS, package data).

The page itself is public; everything it shows comes from `/v1` with the user's API key, so a
project sees only its own objects. The Content-Security-Policy keeps it offline and inert:
scripts, styles and requests may only go to this server."""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

STATIC_DIR = files("app.ui") / "static"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)
# A new batchd version ships new assets under the same names: always revalidate.
HEADERS = {"Content-Security-Policy": CSP, "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}


class _Assets(StaticFiles):
    """StaticFiles with the dashboard's headers on every asset."""

    async def get_response(self, path, scope):
        response = await super().get_response(path, scope)
        response.headers.update(HEADERS)
        return response


def install_ui(app: FastAPI) -> None:
    """Add the dashboard routes to `app` (unauthenticated, left out of the OpenAPI document)."""

    @app.get("/ui", include_in_schema=False)
    async def dashboard() -> FileResponse:
        return FileResponse(str(STATIC_DIR / "index.html"), media_type="text/html", headers=HEADERS)

    @app.get("/ui/", include_in_schema=False)
    async def dashboard_slash() -> RedirectResponse:
        return RedirectResponse("/ui", status_code=308)

    app.mount("/ui/static", _Assets(directory=str(STATIC_DIR)), name="ui-static")
