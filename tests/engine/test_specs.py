"""--model strings, the model config file and the built-in model list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.engine import (
    MINILM_NAME,
    TINY_CHAT_NAME,
    ModelConfigError,
    ModelSpec,
    builtin_model_specs,
    load_model_config,
    parse_model_arg,
    resolve_model_specs,
)


def test_parse_model_arg(tmp_path):
    local = tmp_path / "my-model"
    local.mkdir()

    assert parse_model_arg("chat=/models/qwen") == ("chat", "/models/qwen")
    assert parse_model_arg("Qwen/Qwen2.5-0.5B-Instruct") == (
        "Qwen/Qwen2.5-0.5B-Instruct",
        "Qwen/Qwen2.5-0.5B-Instruct",
    )
    assert parse_model_arg(str(local)) == ("my-model", str(local))
    # A '=' inside a path is not a served-name separator.
    assert parse_model_arg("/models/a=b") == ("/models/a=b", "/models/a=b")
    with pytest.raises(ModelConfigError):
        parse_model_arg("  ")


def test_builtin_specs(tmp_path):
    tiny, minilm = builtin_model_specs(tmp_path)

    assert (tiny.name, tiny.runner) == (TINY_CHAT_NAME, "generate")
    assert Path(tiny.path) == tmp_path / "models" / TINY_CHAT_NAME
    assert tiny.builder is not None
    assert (minilm.name, minilm.runner) == (MINILM_NAME, "pooling")
    assert (Path(minilm.path) / "config.json").is_file()


def test_config_file_yaml_and_json(tmp_path):
    yaml_file = tmp_path / "models.yaml"
    yaml_file.write_text(
        "models:\n"
        "  chat:\n"
        "    path: /models/qwen\n"
        "    dtype: bfloat16\n"
        "    max_model_len: 4096\n"
        "    kv_cache_gib: 2\n"
        "    max_num_seqs: 32\n"
        "    engine_args: {enforce-eager: true}\n"
    )
    json_file = tmp_path / "models.json"
    json_file.write_text(json.dumps({"models": {"emb": {"runner": "pooling"}}}))

    assert load_model_config(yaml_file) == {
        "chat": {
            "path": "/models/qwen",
            "dtype": "bfloat16",
            "max_model_len": 4096,
            "kv_cache_gib": 2.0,
            "max_num_seqs": 32,
            "engine_args": {"enforce_eager": True},
        }
    }
    assert load_model_config(json_file) == {"emb": {"runner": "pooling"}}


@pytest.mark.parametrize(
    "config",
    [
        {"models": {"chat": {"max_len": 10}}},
        {"models": {"chat": {"max_model_len": "long"}}},
        {"models": {"chat": {"engine_args": [1]}}},
        {"model": {}},
        {"models": ["chat"]},
    ],
)
def test_config_errors(config):
    with pytest.raises(ModelConfigError):
        load_model_config(config)


def test_resolve_defaults_to_builtins(tmp_path):
    names = [spec.name for spec in resolve_model_specs(data_dir=tmp_path)]
    assert names == [TINY_CHAT_NAME, MINILM_NAME]


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


def test_memory_options_replace_each_other(tmp_path):
    tiny = builtin_model_specs(tmp_path)[0]
    assert tiny.kv_cache_gib is not None

    share = tiny.with_options({"gpu_memory_utilization": 0.2})
    assert (share.kv_cache_gib, share.gpu_memory_utilization) == (None, 0.2)
    with pytest.raises(ModelConfigError):
        ModelSpec(name="x", path="x", kv_cache_gib=1, gpu_memory_utilization=0.2)


def test_resolve_rejects_duplicates_and_bad_runner(tmp_path):
    with pytest.raises(ModelConfigError):
        resolve_model_specs(["a=/x", "a=/y"], data_dir=tmp_path)
    with pytest.raises(ModelConfigError):
        resolve_model_specs(config={"models": {"a": {"runner": "train"}}}, data_dir=tmp_path)
