"""labeler.parallel's loading block: no collection while loading, what it made frozen."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from labeler.parallel import loading


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """The test process's objects collectable again after the test."""
    yield
    gc.unfreeze()


@pytest.mark.usefixtures("unfrozen")
def test_loading_pauses_the_collector_and_freezes_what_it_made() -> None:
    thresholds = gc.get_threshold()
    collections = gc.get_stats()[0]["collections"]
    with loading():
        assert gc.get_threshold()[0] == 0
        gc.enable()  # as loading a spaCy model does (srsly's msgpack reader)
        made = [[i] for i in range(3 * thresholds[0] + 1000)]  # several thresholds' worth
        assert gc.get_stats()[0]["collections"] == collections
    assert gc.get_threshold() == thresholds
    assert gc.get_freeze_count() >= len(made)


@pytest.mark.usefixtures("unfrozen")
def test_loading_gives_the_thresholds_back_after_an_error() -> None:
    thresholds = gc.get_threshold()
    with pytest.raises(ValueError, match="bad pattern file"), loading():
        raise ValueError("bad pattern file")
    assert gc.get_threshold() == thresholds
