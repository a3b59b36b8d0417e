"""The pipe between the server and its workers: frames of pickled messages, read as their bytes arrive."""

from __future__ import annotations

import asyncio
import os

from aqven.research.series.workers import Frames, Outbox, _read_in_thread, frame, read_pipe


def test_frames_give_each_message_once_however_the_bytes_are_split() -> None:
    messages = [("run", 1, "ser_x", {"idx": 3}, "run_a"), ("cancel", 1), ("done", 2, "x" * 70_000)]
    stream = frame(messages[:2]) + frame(messages[2:])
    for cut in (1, 3, 4, 5, 50, len(stream) - 1):
        frames = Frames()
        got = frames.feed(stream[:cut]) + frames.feed(stream[cut:])
        assert got == messages, cut
    one_by_one = Frames()
    assert [m for i in range(len(stream)) for m in one_by_one.feed(stream[i : i + 1])] == messages


def test_a_torn_last_frame_delivers_nothing_of_it() -> None:
    frames = Frames()
    stream = frame([("done", 1, "ok")]) + frame([("done", 2, "torn")])
    assert frames.feed(stream[:-3]) == [("done", 1, "ok")]  # the writer was killed mid-write: the rest never comes


def test_messages_put_in_one_turn_go_in_one_write_and_arrive_in_order() -> None:
    async def go() -> tuple[list[object], int, bool]:
        loop = asyncio.get_running_loop()
        r, w = os.pipe()
        got: list[object] = []
        ended = asyncio.Event()
        with os.fdopen(r, "rb") as inp, os.fdopen(w, "wb") as out:
            read_pipe(loop, inp, got.append, ended.set)
            box = Outbox(loop, out)
            writes = 0
            real_flush = out.flush

            def counted() -> None:
                nonlocal writes
                writes += 1
                real_flush()

            out.flush = counted  # type: ignore[method-assign]
            for i in range(5):
                box.put(("done", i))
            await asyncio.sleep(0.05)
            box.close()
            out.flush = real_flush  # type: ignore[method-assign]
            out.close()
            await asyncio.wait_for(ended.wait(), 5)  # the writer's end closes the pipe: the reader says so
        return got, writes, ended.is_set()

    got, writes, ended = asyncio.run(go())
    assert got == [("done", i) for i in range(5)]
    assert writes == 1 and ended


def test_the_thread_reader_where_a_loop_cannot_watch_a_pipe_gives_the_same_messages_and_end() -> None:
    async def go() -> tuple[list[object], bool]:
        loop = asyncio.get_running_loop()
        r, w = os.pipe()
        got: list[object] = []
        ended = asyncio.Event()
        with os.fdopen(r, "rb") as inp:
            reader = asyncio.ensure_future(asyncio.to_thread(_read_in_thread, loop, inp, got.append, ended.set))
            with os.fdopen(w, "wb") as out:
                stream = frame([("done", 1, "a"), ("done", 2, "b")]) + frame([("ready", 7)])
                out.write(stream[:5])
                out.flush()
                await asyncio.sleep(0.02)
                out.write(stream[5:])
            await asyncio.wait_for(ended.wait(), 5)
            await reader
        return got, ended.is_set()

    got, ended = asyncio.run(go())
    assert got == [("done", 1, "a"), ("done", 2, "b"), ("ready", 7)] and ended
