"""Attempts on several machines (issue 31): `aqven worker` processes take a series' attempts from a DBOS queue in the
shared PostgreSQL store, while `aqven serve` stays the one server that decides what runs.

    queue.py      what both sides share: the queue, the workflow, its ids, the announcement of an attempt's end
    dispatch.py   the server's side: each attempt the runner starts is enqueued once under its id, its end heard;
                  a worker whose heartbeat stops is declared lost and its workflows handed to the others
    node.py       a worker (`aqven worker`): registers, beats, runs what DBOS hands it through `run_owned`, refuses
                  files that are not the series' inputs
"""
