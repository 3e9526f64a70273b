"""TOON projection: chosen only when it round-trips and is smaller, else compact JSON with a reason."""

from __future__ import annotations

import json

import pytest
import toon_format
from hypothesis import given, settings
from strategies import json_values

from stratamem.errors import ValidationError
from stratamem.formats.toon import compact_json, project
from stratamem.tokens import get_tokenizer

TOK = get_tokenizer("o200k_base")


def test_uniform_rows_project_to_toon():
    rows = {"tasks": [{"id": f"T-{i}", "title": f"write part {i}", "status": "open"} for i in range(8)]}
    p = project(rows, TOK)
    assert p.format == "toon" and p.reason is None
    assert p.text == toon_format.dumps(rows)
    assert p.tokens == TOK.count(p.text) < p.json_tokens == TOK.count(compact_json(rows))
    assert toon_format.loads(p.text) == rows


def test_a_value_where_toon_is_not_smaller_falls_back_to_json_with_the_reason():
    p = project([1], TOK)
    assert p.format == "json" and p.text == "[1]"
    assert p.reason == f"TOON is not smaller ({p.toon_tokens} tokens vs {p.json_tokens} for compact JSON)"


def test_numbers_that_toon_would_change_fall_back_to_json():
    # TOON writes numbers canonically (1e+20 becomes 100000000000000000000), which
    # reads back as an int: the round trip is not exact, so JSON is used.
    value = {"big": 1e20, "neg_zero": -0.0}
    back = toon_format.loads(toon_format.dumps(value))
    assert compact_json(back) != compact_json(value)
    p = project(value, TOK)
    assert p.format == "json" and p.reason == "TOON does not round-trip: the decoded value differs"


def test_non_json_values_are_refused():
    with pytest.raises(ValidationError, match="not a JSON value"):
        project({"when": object()}, TOK)
    with pytest.raises(ValidationError, match="not a JSON value"):
        project(float("nan"), TOK)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_every_projection_decodes_back_to_the_source(value):
    p = project(value, TOK)
    back = toon_format.loads(p.text) if p.format == "toon" else json.loads(p.text)
    assert compact_json(back) == compact_json(value)
    assert p.tokens == TOK.count(p.text)
    assert (p.reason is None) == (p.format == "toon")
