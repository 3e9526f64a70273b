"""Configuration: defaults from the seeds, YAML loading, strictness."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratamem import Config, ConfigError


def test_defaults_are_the_seeds_numbers() -> None:
    c = Config()
    assert (c.pyramid.micro_chunk_size, c.pyramid.mini_chunk_size, c.pyramid.macro_chunk_size) == (10, 25, 100)
    assert (c.context.current_share, c.context.history_share, c.context.bulk_share) == (0.5, 0.3, 0.2)
    assert (c.pruning.soft_trim_chars, c.pruning.soft_trim_head, c.pruning.soft_trim_tail) == (4000, 1500, 1500)
    assert (c.pruning.hard_clear_after, c.pruning.keep_last_tool_results) == (6, 2)
    assert (c.compaction.threshold, c.compaction.keep_recent_tokens) == (100_000, 20_000)
    assert (
        c.items.hot_token_limit,
        c.items.warm_access_threshold,
        c.items.promote_threshold,
        c.items.max_cold_items,
    ) == (4000, 3, 0.85, 1000)
    assert (c.state.min_tokens, c.state.max_tokens) == (250, 750)
    assert c.pyramid.silence_minutes == 30 and c.pyramid.topic_token_threshold == 0.6
    assert c.tokenizer == "o200k_base"


def test_yaml_file_overrides_defaults(tmp_path: Path) -> None:
    path = tmp_path / "stratamem.yaml"
    path.write_text("tokenizer: cl100k_base\npyramid:\n  micro_chunk_size: 5\n  boundary_phrases: [next]\n")
    c = Config.from_yaml(path)
    assert c.tokenizer == "cl100k_base"
    assert c.pyramid.micro_chunk_size == 5
    assert c.pyramid.boundary_phrases == ("next",)
    assert c.pyramid.mini_chunk_size == 25


@pytest.mark.parametrize(
    "data, message",
    [
        ({"tokenizr": "x"}, "unknown config key(s): tokenizr"),
        ({"pyramid": {"micro_chunk": 3}}, "unknown config key(s): pyramid.micro_chunk"),
        ({"pyramid": {"micro_chunk_size": "ten"}}, "pyramid.micro_chunk_size: expected an integer"),
        ({"pyramid": {"micro_chunk_size": True}}, "pyramid.micro_chunk_size: expected an integer"),
        ({"pyramid": {"summarizer": "magic"}}, "pyramid.summarizer: 'magic' is not one of"),
        ({"context": {"current_share": 0.9}}, "must be 1.0"),
        ({"items": {"hot_token_limit": -1}}, "items.hot_token_limit: must not be negative"),
        ({"tokenizer": "p50k"}, "tokenizer: 'p50k' is not"),
    ],
)
def test_bad_config_is_refused_with_the_key_path(data: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Config.from_dict(data)
    assert message in str(info.value)


def test_bad_yaml_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("pyramid: [unclosed\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        Config.from_yaml(path)
    with pytest.raises(ConfigError, match="cannot read config file"):
        Config.from_yaml(tmp_path / "missing.yaml")


def test_replace_and_to_dict_round_trip() -> None:
    c = Config().replace(pyramid={"micro_chunk_size": 7}, tokenizer="cl100k_base")
    assert c.pyramid.micro_chunk_size == 7 and c.tokenizer == "cl100k_base"
    assert Config.from_dict(c.to_dict()) == c
