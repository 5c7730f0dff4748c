"""The inline engine gives the bits recorded before the runtime's redesign (tests/inline_record.py)."""

from __future__ import annotations

import json

import pytest

from tests.inline_record import DEEP_CASES, RECORD, run_deep, run_tabular

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _record() -> dict:
    return json.loads(RECORD.read_text())


@pytest.mark.parametrize("name", sorted(DEEP_CASES))
def test_deep_run_matches_the_record(name):
    assert run_deep(DEEP_CASES[name]) == _record()[name]


def test_tabular_run_matches_the_record():
    assert run_tabular() == _record()["tabular-qlearning"]
