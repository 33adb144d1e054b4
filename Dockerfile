# The Strata image: one image for every role (agent, worker, or both in one process).
#   docker build -t strata .
#   docker run -p 8080:8080 strata                       # embedded default: local directory + SQLite in /data
#   docker run strata strata serve --role worker ...     # any `strata` command; settings via STRATA_*
# docker-compose.yml runs it against MinIO and PostgreSQL. tests/unit/test_compose.py checks this file.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# Only what the package needs (pyproject.toml names README.md as the long description).
COPY pyproject.toml README.md ./
COPY agents ./agents
COPY api ./api
COPY broker ./broker
COPY pipeline ./pipeline
COPY planner ./planner
COPY storage ./storage
# gcc builds the C extensions (storage/_*.c, agents/_encode.c, planner/_probe.c, api/_recordjson.c); removed
# once built.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install . \
    && apt-get purge -y --auto-remove gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/* /src/build /src/*.egg-info \
    && useradd --system --uid 10001 --user-group --home-dir /data --no-create-home strata \
    && mkdir -p /data \
    && chown strata:strata /data

# A container must listen on all interfaces to be reachable; the embedded default keeps its data in /data
# (a volume: the local bucket and the SQLite file). Settings given with S3/PostgreSQL make /data unused.
ENV STRATA_HOST=0.0.0.0 \
    STRATA_PORT=8080 \
    STRATA_KAFKA_PORT=9092 \
    STRATA_SCHEMA_REGISTRY_PORT=8081 \
    STRATA_DATA_DIR=/data
VOLUME ["/data"]
WORKDIR /data
USER strata
EXPOSE 8080 9092 8081

# No HEALTHCHECK here: the worker role serves no HTTP. docker-compose.yml probes the agents' /readyz.
CMD ["strata", "serve"]
