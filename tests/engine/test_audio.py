"""Audio lines' `file_url` without a network or an engine: what validation refuses, and the
size limit and decoding of `data:` URLs (downloads are covered in tests/e2e/test_audio_lines.py)."""

from __future__ import annotations

import asyncio
import base64

import pytest

from app.engine.audio import MAX_BYTES_SETTING, AudioFetchError, fetch_audio, file_url_problem


@pytest.mark.parametrize(
    ("body", "param", "says"),
    [
        ({"model": "m"}, "body.file_url", "Missing required parameter"),
        ({"model": "m", "file_url": "ftp://host/a.wav"}, "body.file_url", "'ftp'"),
        ({"model": "m", "file_url": "data:audio/wav,plain"}, "body.file_url", "base64"),
        ({"model": "m", "file": "a.wav", "file_url": "http://h/a.wav"}, "body.file", "Use 'file_url'"),
    ],
)
def test_file_url_problems(body, param, says):
    found = file_url_problem(body)
    assert found is not None and found[0] == param and says in found[1]


def test_good_file_urls_pass():
    for url in ("http://h/a.wav", "https://h/a.wav?sig=1", "data:audio/wav;base64,AAAA"):
        assert file_url_problem({"model": "m", "file_url": url}) is None


def test_data_url_decodes_within_the_limit_and_is_refused_above_it(monkeypatch):
    audio = bytes(range(256)) * 8
    url = "data:audio/wav;base64," + base64.b64encode(audio).decode()
    monkeypatch.setenv(MAX_BYTES_SETTING, str(len(audio)))
    assert asyncio.run(fetch_audio(url)) == audio
    monkeypatch.setenv(MAX_BYTES_SETTING, str(len(audio) - 1))
    with pytest.raises(AudioFetchError, match="too large"):
        asyncio.run(fetch_audio(url))


def test_invalid_base64_is_an_error():
    with pytest.raises(AudioFetchError, match="not valid base64"):
        asyncio.run(fetch_audio("data:audio/wav;base64,@@@@"))
