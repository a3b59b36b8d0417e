"""What the server reads from an ended workflow whose announcement it missed: the reason a worker's attempt failed
reaches the attempt's row (a PostgreSQL crash reads as a lost connection, not as "ended error")."""

from __future__ import annotations

import pytest

pytest.importorskip("dbos")

from aqven.research.cluster import queue
from aqven.research.cluster.dispatch import _state_of


def test_an_output_is_the_state() -> None:
    assert _state_of("SUCCESS", "done", None) == "done"
    said = f"{queue.ERROR} OperationalError: server closed the connection unexpectedly"
    assert _state_of("SUCCESS", said, None) == said


def test_a_raised_workflow_says_what_it_raised() -> None:
    state = _state_of("ERROR", None, ConnectionError("terminating connection due to administrator command"))
    assert state.startswith(f"{queue.ERROR} ConnectionError: terminating connection")


def test_nothing_to_say_names_the_status() -> None:
    assert _state_of("CANCELLED", None, None) == f"{queue.ERROR} the attempt's workflow ended CANCELLED"
