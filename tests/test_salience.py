"""Statements and their salience: greetings and vocatives are cleaned away, the features read what they say,
and the fitted constants are exactly what ``benchmarks/items_fit.py`` fits (their only source)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from stratamem.summarize import salience as sal
from stratamem.summarize.slots import slot, updates
from stratamem.summarize.statements import FEATURES, clean, statements

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["Caroline", "Melanie", "Mel", "Dave"]


@pytest.mark.parametrize(
    ("sentence", "cleaned"),
    [
        ("Wow, Dave, that looks cool!", "That looks cool!"),
        ("Hey Mel! Good to see you!", "Good to see you!"),
        ("Thanks, Mel! I spent a lot of time cleaning.", "I spent a lot of time cleaning."),
        ("It was so inspiring, Mel!", "It was so inspiring!"),
        ("Side note: since I live in Portland, it rains.", "Since I live in Portland, it rains."),
        ("Unrelated, but these days I train at a yoga studio.", "These days I train at a yoga studio."),
        ("Congrats Dave!", ""),
        ("Hey Dave, thanks for checking in!", "Thanks for checking in!"),
    ],
)
def test_cleaning_drops_greetings_openers_and_vocatives(sentence: str, cleaned: str) -> None:
    assert clean(sentence, NAMES) == cleaned


def test_a_turn_reads_as_statements_with_features_and_no_photo_caption() -> None:
    got = statements(
        "Hey Mel! I went to a LGBTQ support group yesterday and it was so powerful. How are you? "
        "[shares a photo of a dog walking past a wall]",
        NAMES,
        answers=True,
    )
    assert [s.text for s in got] == [
        "I went to a LGBTQ support group yesterday and it was so powerful.",
        "How are you?",
    ]
    first, second = got
    assert set(first.features) == set(FEATURES)
    assert {k: first.features[k] for k in ("first_person", "fp_verb", "date", "question", "photo", "answers")} == {
        "first_person": 1.0,
        "fp_verb": 1.0,
        "date": 1.0,
        "question": 0.0,
        "photo": 1.0,
        "answers": 1.0,
    }
    assert second.question and sal.choice(first.features) > sal.choice(second.features)


def test_attribute_values_and_updates() -> None:
    assert slot("We moved to Denver last spring, so the kids started at a new school.", "Mel") is not None
    assert slot("Since I live in Portland, it rains a lot.", "Mel").value == "portland"  # type: ignore[union-attr]
    assert slot("My sister moved to Leeds in March.", "Mel").subject == "Mel's sister"  # type: ignore[union-attr]
    assert slot("Where do you live now?", "Mel") is None
    assert updates("I live in Denver.", "We finally moved to Austin.", "Ana")
    assert not updates("I live in Denver.", "I went hiking in Austin.", "Ana")  # nothing says it changed
    assert not updates("I splurged 64 dollars on a lamp for the living room.", "Now we've moved to Austin.", "Ana")
    assert not updates("I joined a travel club.", "I just joined a new book club!", "Ana")  # clubs add up
    assert updates(
        "I have a membership at a boxing club.",
        "I cancelled my old membership and joined a yoga studio instead.",
        "Ana",
    )


def test_the_fitted_constants_are_what_the_fit_script_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("items_fit", ROOT / "benchmarks" / "items_fit.py")
    assert spec is not None and spec.loader is not None
    monkeypatch.syspath_prepend(str(ROOT))
    fit = importlib.util.module_from_spec(spec)
    sys.modules["items_fit"] = fit
    spec.loader.exec_module(fit)
    rows, n_turns, _, _ = fit.load()
    x = fit.matrix(rows)
    for name, weights, bias in (
        ("cited", sal.SALIENCE_WEIGHTS, sal.SALIENCE_BIAS),
        ("on_topic", sal.CHOICE_WEIGHTS, sal.CHOICE_BIAS),
    ):
        w, b = fit.fit(x, fit.label(rows, name), 1e-3)
        assert np.allclose(w, [weights[f] for f in FEATURES], atol=1e-4) and abs(b - bias) < 1e-4
    chosen = fit.choose(
        rows,
        fit.predict(*fit.fit(x, fit.label(rows, "cited"), 1e-3), x),
        fit.predict(*fit.fit(x, fit.label(rows, "on_topic"), 1e-3), x),
    )
    assert abs(fit.threshold(chosen, n_turns, 150) - sal.THRESHOLDS[150]) < 1e-4
