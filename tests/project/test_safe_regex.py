"""User regexes run on RE2: linear time on patterns that make Python's `re` backtrack for ever, the syntax that
checks use, and a clear error (with the hint) for what RE2 lacks. The server's lock is a portable filelock."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from aqven.errors import AqvenError
from aqven.project.safe_regex import UNSUPPORTED_HINT, RegexError, compile_pattern, search
from aqven.server import lifecycle


def test_a_catastrophic_pattern_on_a_long_output_takes_no_time() -> None:
    # Under Python's re, ^(a+)+$ on "aaa…ab" backtracks 2^n ways: it would never return on 100,000 characters.
    text = "a" * 100_000 + "b"
    found: list[str | None] = []
    worker = threading.Thread(target=lambda: found.append(search(r"^(a+)+$", text)), daemon=True)
    t0 = time.perf_counter()
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "the pattern backtracked"
    assert found == [None] and time.perf_counter() - t0 < 5
    assert search(r"(\w+)+!", "word " * 20_000 + "!") is None  # no word touches the "!": still linear


def test_the_syntax_checks_use_works() -> None:
    assert search(r"\brefund\b", "your refund is on its way") == "refund"
    assert search(r"^hi", "Hi there", ignore_case=True) == "Hi"
    assert search(r"^hi", "Hi there") is None
    assert search(r"\d{2}-\d{2}", "call 12-34") == "12-34"
    assert search("café+", "un caféé") == "caféé"


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?=a)b", "(?<!x)y", "(unclosed"])
def test_what_re2_cannot_compile_is_a_clear_error(pattern: str) -> None:
    with pytest.raises(RegexError) as info:
        compile_pattern(pattern)
    assert str(info.value) and "b'" not in str(info.value)  # text, not bytes
    assert "backreferences" in UNSUPPORTED_HINT and "lookarounds" in UNSUPPORTED_HINT


def test_the_server_lock_is_exclusive_and_portable(tmp_path: Path) -> None:
    assert "fcntl" not in Path(lifecycle.__file__).read_text()
    root = tmp_path / "p"
    (root / ".aqven").mkdir(parents=True)
    held = lifecycle._lock_or_refuse(root)
    try:
        assert not lifecycle._lock_free(root)
        with pytest.raises(AqvenError) as info:
            lifecycle._lock_or_refuse(root)
        assert info.value.code == "SERVER_ALREADY_RUNNING"
    finally:
        held.release()
    assert lifecycle._lock_free(root)
    assert (root / ".aqven" / "server.lock").stat().st_mode & 0o077 == 0  # readable by its owner only
