"""Settings every test shares."""

from __future__ import annotations

import pytest

from tvm_eqsat import tune

# MetaSchedule's evolutionary search samples and evolves its whole population before the
# first candidate of a task is measured, whatever the trial count: at its default of 512 a
# two-trial tuning of one kernel took 27 s on a 2-core Zen 3 busy with another tuning. The
# tests tune with a few trials to check what happens to the records, not how good the
# schedules are.
TEST_POPULATION = 16


@pytest.fixture(autouse=True)
def small_tuning_population(monkeypatch):
    """In-process tuning searches with ``TEST_POPULATION`` (scripts run as subprocesses keep theirs)."""
    contexts = tune._tune_contexts

    def capped(tasks, num_threads, seed, population=512, database=None):
        return contexts(tasks, num_threads, seed, min(population, TEST_POPULATION), database)

    monkeypatch.setattr(tune, "_tune_contexts", capped)
