"""What the two SDK providers (anthropic_provider.py, openai_provider.py) do alike: send a
request's optional sampling fields under the API's names, and make the call so that every SDK
failure comes out as one of our typed errors (http_errors.translate)."""
from __future__ import annotations

from typing import Any, Awaitable, Callable

from pipeline.llm.http_errors import translate
from pipeline.llm.messages import Request


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
