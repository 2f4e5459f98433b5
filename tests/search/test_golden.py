"""Today's search reproduces its stored golden outputs (`golden.py`): every selector, reuse on
and off, two games, a full tree. Integers (moves, visit counts, depths, full events) must be
equal; floats equal to 1e-6 (bit-identical on the machine that wrote them; other CPUs may round
transcendental functions differently in the last place)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.search.golden import CASES, FIELDS, PATH, case_name, run_case


@pytest.fixture(scope="module")
def golden():
    with np.load(PATH) as data:
        return dict(data)


@pytest.mark.parametrize("case", CASES, ids=[case_name(*c) for c in CASES])
def test_the_search_reproduces_its_golden_outputs(golden, case):
    out = run_case(*case)
    for field in FIELDS:
        want = golden[f"{case_name(*case)}/{field}"]
        got = out[field]
        assert got.shape == want.shape and got.dtype == want.dtype, field
        if np.issubdtype(want.dtype, np.floating):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=field)
        else:
            np.testing.assert_array_equal(got, want, err_msg=field)


def test_the_golden_cases_exercise_what_they_claim(golden):
    full = golden[f"{case_name('connect_four', 'puct', True, 10)}/full_events"]
    assert full.sum() > 0  # the small tree filled
    reused = golden[f"{case_name('connect_four', 'puct', True, 17)}/visit_counts"]
    fresh = golden[f"{case_name('connect_four', 'puct', False, 17)}/visit_counts"]
    assert not np.array_equal(reused[1:], fresh[1:])  # reuse carries visits over
    assert (golden[f"{case_name('tic_tac_toe', 'gumbel', False, 17)}/action"] >= 0).all()
