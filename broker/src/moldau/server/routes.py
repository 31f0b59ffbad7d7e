"""The request layer's routes: every handler the composition builds (handlers/), served
at the versions its class declares, with the quota and authentication stage settings of
its API table entry (api_table.py). A handler without an entry, or an entry without a
handler, stops the broker at startup rather than serving an API no stage knows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .api_table import API_TABLE
from .handlers import HandlerServices, build_handlers
from .handlers.produce_fast import FastProduce

if TYPE_CHECKING:
    from .requests import RequestDispatcher


def register_handlers(dispatcher: RequestDispatcher, services: HandlerServices) -> None:
    built, appends = build_handlers(services)
    if set(built) != set(API_TABLE):
        unlisted = sorted(key.name for key in set(built) - set(API_TABLE))
        unserved = sorted(key.name for key in set(API_TABLE) - set(built))
        raise RuntimeError(f"the API table and the handlers disagree: no table entry for "
                           f"{unlisted}, no handler for {unserved}")
    for api_key, handler in built.items():
        entry = API_TABLE[api_key]
        if type(handler) is not entry.handler:
            raise RuntimeError(f"{api_key.name} is served by {type(handler).__name__}, "
                               f"the API table names {entry.handler.__name__}")
        dispatcher.register(api_key, handler, *entry.versions, entry.quota,
                            entry.before_authentication)
    dispatcher.fast_produce = FastProduce(appends, dispatcher, services.metrics)
