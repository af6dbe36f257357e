"""fleet: a local OpenRouter-compatible provider fleet with scripted serving
defects, for the demo and the tests (a stand-in for OpenRouter; imports
nothing of ours but `ground` and `wire`).

Modules: `app` (ASGI factory `create_app(scenario, *, key)`), `state` (the
running scenario and the request log, on `app.state.fleet`), `scenario`
(pydantic schema + `load_scenario(name_or_path)`), `selection` (the
`provider` object), `behaviour` (per-endpoint seeded plan: faults, defects),
`responses` (SSE / JSON on the wire), `bank` + `replies/*.json` (17 reply
banks), `language` (prompt language), `tools` (when a call is due, arguments,
broken calls, tool results), `defects`, `schema_gen`, `listing`, `wire`, `cli`
(`canary fleet serve`). Built-in scenarios: `scenarios/*.yaml` (seed-incidents,
defect-zoo, contracts-zoo).
"""
