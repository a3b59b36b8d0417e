"""The application layer of the project server: plain functions over `ProjectService` returning typed models.

The REST routes, the MCP tools (`aqven.server.tools`) and the Studio chat call these and nothing below them, so
a rule (which held-out case may be shown, what a series answer holds) is written once. Modules by concept:
`project` (the project, `aqven check`, flows, datasets, agents), `research` (experiments, launch plans,
findings), `series` and `runs`; `models` holds one model per thing they answer.
"""
