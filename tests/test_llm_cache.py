"""The SQLite response cache: never pay twice for the same answer."""
import asyncio
import multiprocessing

from envforge.pipeline.llm import Message, Response
from envforge.pipeline.llm.cache import ResponseCache
from envforge.pipeline.testing.llm_server import Reply


def ask_each(client, prompts, **kw):
    async def go():
        async with client:
            return [await client.complete([Message.user(p)], theme="maze", stage="design", **kw) for p in prompts]
    return asyncio.run(go())


def test_rerunning_a_finished_stage_costs_nothing(llm_server, make_llm_client):
    llm_server.rule = lambda n: Reply(f"answer {n}", input_tokens=1000, output_tokens=100)
    first = make_llm_client()
    ask_each(first, ["design a maze", "design a ferry"])
    again = make_llm_client()  # a new process would see the same file
    answers = ask_each(again, ["design a maze", "design a ferry"])
    assert [a.text for a in answers] == ["answer 1", "answer 2"]
    assert [a.source for a in answers] == ["cache", "cache"]
    assert llm_server.count() == 2
    assert first.ledger.run.cost_usd > 0 and again.ledger.run.cost_usd == 0
    assert again.ledger.run.from_cache == 2


def test_the_key_covers_model_tools_and_sampling_parameters(llm_server, make_llm_client):
    ask_each(make_llm_client(), ["p"])
    ask_each(make_llm_client(), ["p"], temperature=0.7)
    ask_each(make_llm_client(), ["p"], sample=1)
    ask_each(make_llm_client(model="openai/gpt-4o-mini"), ["p"])
    ask_each(make_llm_client(), ["p"], max_tokens=10)
    assert llm_server.count() == 5
    ask_each(make_llm_client(), ["p"], temperature=0.7)
    assert llm_server.count() == 5


def test_no_cache_bypasses_reading_and_writing(llm_server, make_llm_client, llm_env):
    ask_each(make_llm_client(no_cache=True), ["p"])
    ask_each(make_llm_client(no_cache=True), ["p"])
    assert llm_server.count() == 2
    assert not (llm_env / "cache.sqlite").exists()


def test_failed_calls_are_not_cached(llm_server, make_llm_client):
    from envforge.pipeline.testing.llm_server import Fault
    llm_server.script = [Fault(status=401)]
    try:
        ask_each(make_llm_client(), ["p"])
    except Exception:
        pass
    assert ask_each(make_llm_client(), ["p"])[0].source == "provider"


def _writer(path: str, worker: int) -> None:
    cache = ResponseCache(path)
    for i in range(40):
        cache.put_sync(f"key-{i}", "openai", Response(text=f"from worker {worker}", model="openai/m"))
        cache.put_sync(f"own-{worker}-{i}", "openai", Response(text=f"{worker}/{i}"))


def test_many_processes_can_write_one_cache_at_once(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    workers = [multiprocessing.get_context("spawn").Process(target=_writer, args=(path, w)) for w in range(4)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(30)
    assert [p.exitcode for p in workers] == [0, 0, 0, 0]
    cache = ResponseCache(path)
    assert len(cache) == 40 + 4 * 40
    assert cache.get_sync("own-3-39").text == "3/39"
    assert cache.get_sync("key-0").text.startswith("from worker ")
