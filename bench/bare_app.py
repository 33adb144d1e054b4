"""The ceiling of the HTTP stack: a FastAPI app that parses a produce request and answers at once.

The produce route takes the same body model as Strata's (``api.models.ProduceIn``: strict pydantic, so
the JSON parsing and validation cost is identical) and answers with the same response shape (one fake
offset per record, serialised with orjson like ``api.responses.JSONBytes``). There is no agent, no
buffering, no record encoding and no middleware behind it.

Served by bench.produce_fetch as ``python -m uvicorn bench.bare_app:app --loop uvloop --http httptools``,
the options ``strata serve`` uses.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import Response

from api.models import ProduceIn
from api.responses import JSONBytes

app = FastAPI(title="bare produce ceiling")


@app.post("/v1/topics/{topic}/records")
async def produce(topic: str, body: ProduceIn) -> Response:
    return JSONBytes({"offsets": [{"partition": 0, "offset": i} for i in range(len(body.records))]})


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}
