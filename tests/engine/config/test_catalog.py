"""The built-in model list and how --model values, the config file and the built-ins combine."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.config.catalog import MINILM_NAME, builtin_model_specs, resolve_model_specs
from app.engine.config.specs import ModelSpec
from app.engine.config.tiny_chat import TINY_CHAT_NAME
from app.engine.config.tiny_whisper import TINY_WHISPER_NAME
from app.engine.errors import ModelConfigError


def test_builtin_specs(tmp_path):
    tiny, minilm = builtin_model_specs(tmp_path)

    assert (tiny.name, tiny.runner) == (TINY_CHAT_NAME, "generate")
    assert Path(tiny.path) == tmp_path / "models" / TINY_CHAT_NAME
    assert tiny.builder is not None
    assert (minilm.name, minilm.runner) == (MINILM_NAME, "pooling")
    assert (Path(minilm.path) / "config.json").is_file()


def test_resolve_defaults_to_builtins(tmp_path):
    names = [spec.name for spec in resolve_model_specs(data_dir=tmp_path)]
    assert names == [TINY_CHAT_NAME, MINILM_NAME]


def test_tiny_whisper_is_served_only_when_named(tmp_path):
    assert TINY_WHISPER_NAME not in [spec.name for spec in resolve_model_specs(data_dir=tmp_path)]
    (speech,) = resolve_model_specs([f"asr={TINY_WHISPER_NAME}"], data_dir=tmp_path)
    assert (speech.name, speech.runner) == ("asr", "generate")
    assert Path(speech.path) == tmp_path / "models" / TINY_WHISPER_NAME and speech.builder is not None


def test_resolve_model_args_and_config(tmp_path):
    specs = resolve_model_specs(
        ["chat=/models/qwen", TINY_CHAT_NAME],
        {
            "models": {
                "chat": {"max_model_len": 1024, "gpu_memory_utilization": 0.3},
                TINY_CHAT_NAME: {"max_num_seqs": 8},
                "emb": {"path": "/models/bge", "runner": "pooling"},
            }
        },
        data_dir=tmp_path,
    )
    by_name = {spec.name: spec for spec in specs}

    assert list(by_name) == ["chat", TINY_CHAT_NAME, "emb"]
    assert by_name["chat"] == ModelSpec(
        name="chat", path="/models/qwen", max_model_len=1024, gpu_memory_utilization=0.3
    )
    assert by_name[TINY_CHAT_NAME].engine_args == {"max_num_seqs": 8}
    assert by_name[TINY_CHAT_NAME].builder is not None
    assert (by_name["emb"].path, by_name["emb"].runner) == ("/models/bge", "pooling")


def test_builtin_under_another_name(tmp_path):
    (spec,) = resolve_model_specs(["chat=batchd-tiny-chat"], data_dir=tmp_path)

    assert spec.name == "chat"
    assert Path(spec.path) == tmp_path / "models" / TINY_CHAT_NAME
    assert spec.builder is not None


def test_resolve_rejects_duplicates_and_bad_runner(tmp_path):
    with pytest.raises(ModelConfigError):
        resolve_model_specs(["a=/x", "a=/y"], data_dir=tmp_path)
    with pytest.raises(ModelConfigError):
        resolve_model_specs(config={"models": {"a": {"runner": "train"}}}, data_dir=tmp_path)
