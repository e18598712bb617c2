"""What the two SDK providers (anthropic_provider.py, openai_provider.py) do alike: send a
request's optional sampling fields under the API's names, make the call so that every SDK
failure comes out as one of our typed errors (http_errors.translate), and read a field of a
reply as the server sent it (the SDKs build reply objects without checking types)."""
from __future__ import annotations

from typing import Any, Awaitable, Callable

from pipeline.llm.http_errors import translate
from pipeline.llm.messages import Request
from pipeline.llm.trust import ABSENT


def sampling_fields(request: Request, stop_field: str) -> dict[str, Any]:
    """temperature and the stop sequences, where the request sets them (`stop_field` is the API's name)."""
    fields: dict[str, Any] = {}
    if request.temperature is not None:
        fields["temperature"] = request.temperature
    if request.stop:
        fields[stop_field] = list(request.stop)
    return fields


async def call(create: Callable[..., Awaitable[Any]], kwargs: dict[str, Any], sdk: Any, provider: str) -> Any:
    """`await create(**kwargs)`; an exception of any kind is translated, none escapes raw."""
    try:
        return await create(**kwargs)
    except Exception as exc:  # noqa: BLE001 - every SDK failure is translated, none escapes raw
        raise translate(exc, sdk, provider) from exc


def field(obj: Any, name: str) -> Any:
    """`obj`'s field `name` as the reply carried it, or `ABSENT`: an attribute of an SDK object, a
    key of a dict (a nested object the SDK left as one), or an extra field the SDK kept aside."""
    if isinstance(obj, dict):
        return obj.get(name, ABSENT)
    extra = getattr(obj, "model_extra", None) or {}
    fields_set = getattr(obj, "model_fields_set", None)
    if fields_set is not None and name not in fields_set and name not in extra:
        return ABSENT  # a declared field the reply did not send (the SDK fills in a default)
    return extra.get(name, getattr(obj, name, ABSENT))
