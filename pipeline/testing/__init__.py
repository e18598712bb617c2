"""Offline stand-ins for what envforge talks to, for the tests, the benchmarks and the demo recorder
(scripts/record_learn_demo.py); no command of the product imports them (tests/test_import_graph.py).

- llm_server: a loopback HTTP server speaking the Anthropic and OpenAI wire formats, scripted reply
  by reply, with faults and misbehaviour on demand (`python scripts/llm_server.py` runs it by hand).
- tiny_env: a small corridor environment folder written from code (`write_env`).
- replay_kit: replay recordings of a scripted model generating that corridor, stage by stage.
"""
