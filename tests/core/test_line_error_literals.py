"""No line error code is spelled as a raw string outside app/core/line_errors.py: a refused,
never-run or timed-out line names its code by the enum member, so the same failure has the same
code wherever it is written (validation, finalize, retry, Message Batch results, limits, engines)."""

from __future__ import annotations

from app.core.line_errors import LineErrorCode
from tests.support.literal_scan import APP, matching_literals

LINE_ERRORS_MODULE = APP / "core" / "line_errors.py"


def test_the_scan_finds_a_line_error_code():
    source = 'ENDINGS = {"cancelled": ("batch_cancelled", "The batch was cancelled.")}\n'
    assert matching_literals(source, {code.value for code in LineErrorCode}) == [("batch_cancelled", 1)]


def test_no_line_error_code_literal_outside_its_module():
    codes = {code.value for code in LineErrorCode}
    assert {"batch_expired", "request_timeout", "token_limit_exceeded"} <= codes
    found = [
        f"  {path.relative_to(APP.parent)}:{line}: {literal}"
        for path in sorted(APP.rglob("*.py"))
        if path != LINE_ERRORS_MODULE
        for literal, line in matching_literals(path.read_text(), codes)
    ]
    listing = "\n".join(found)
    assert not found, f"raw line error codes (use LineErrorCode in app/core/line_errors.py):\n{listing}"
