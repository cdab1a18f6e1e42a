"""Comparisons done chunk by chunk agree with whole-tensor arithmetic (6 GB outputs must not
need float64 copies of themselves), and fingerprints tell changed tensors apart."""

from __future__ import annotations

import pytest
import torch

from kernelgraph.tools.harness import compare as cmp


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(cmp, "CHUNK", 7)  # many chunks, a ragged last one


def test_chunked_mismatch_counts_and_errors_match_the_whole_tensor(small_chunks):
    torch.manual_seed(0)
    ref = torch.randn(5, 13)
    got = ref.clone()
    got[1, 4] += 0.5
    got[3, 12] -= 2.0
    m = cmp.compare(got, ref, 1e-4, 1e-4)
    assert m is not None and m.mismatches == 2
    assert m.max_abs_err == pytest.approx(2.0, rel=1e-6)
    expected_rel = float(((got - ref).abs() / ref.abs()).max())
    assert m.max_rel_err == pytest.approx(expected_rel, rel=1e-6)
    assert "first at index [1, 4]" in m.message


def test_chunked_nan_positions_and_exact_integers(small_chunks):
    ref = torch.arange(30, dtype=torch.float32).reshape(3, 10)
    got = ref.clone()
    got[2, 9] = float("nan")
    assert "NaN positions differ" in cmp.compare(got, ref, 1e-4, 1e-4).message
    ints = torch.arange(30).reshape(3, 10)
    wrong = ints.clone()
    wrong[0, 0] = 99
    assert cmp.compare(wrong, ints, 0, 0).mismatches == 1
    assert cmp.compare(ints.clone(), ints, 0, 0) is None


def test_chunked_constant_and_tracking_checks(small_chunks):
    assert cmp.is_constant(torch.full((4, 9), 3.0))
    varying = torch.linspace(-1, 1, 36)
    assert not cmp.is_constant(varying)
    assert cmp.tracks_reference(varying * 1.01, varying)
    assert not cmp.tracks_reference(varying.flip(0), varying)
    assert cmp.within_tolerance_only(torch.full((40,), 1e-6), 1e-4)
    assert not cmp.within_tolerance_only(varying, 1e-4)


def test_fingerprints_are_equal_for_equal_contents_and_differ_after_a_change(small_chunks):
    x = torch.randn(6, 11)
    assert cmp.fingerprint(x) == cmp.fingerprint(x.clone())
    y = x.clone()
    y[5, 10] = y[5, 10] + 1
    assert cmp.fingerprint(y) != cmp.fingerprint(x)
    swapped = x.clone()
    swapped[0, 0], swapped[0, 1] = x[0, 1], x[0, 0]
    assert cmp.fingerprint(swapped) != cmp.fingerprint(x)  # same bytes, other places
