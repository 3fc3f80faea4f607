# syntax=docker/dockerfile:1
# The odradek broker. Build: `docker build -t odradek .`; run:
# `docker run -p 9092:9092 -p 9644:9644 -v odradek-data:/var/lib/odradek odradek`.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# Stage 1: wheels of odradek and its dependencies. The compiler builds odradek's C walks
# (docs/native.md); every dependency ships wheels. Nothing of this stage reaches the image.
FROM ${PYTHON_IMAGE} AS build
# Debian's compiler of the base image's release; only a build tool, so not pinned.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py MANIFEST.in README.md ./
COPY odradek ./odradek
COPY pyspark_odradek ./pyspark_odradek
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# Stage 2: the runtime, with the wheels installed and nothing else.
FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index /wheels/*.whl \
    && groupadd --system --gid 10001 odradek \
    && useradd --system --uid 10001 --gid odradek --home-dir /var/lib/odradek --no-create-home odradek \
    && mkdir -p /var/lib/odradek \
    && chown odradek:odradek /var/lib/odradek
USER 10001:10001
WORKDIR /var/lib/odradek
VOLUME ["/var/lib/odradek"]
# 9092: Kafka's protocol and odradek's (one port); 9644: Prometheus /metrics. Metadata tells
# Kafka clients to connect to localhost:9092: set advertised.listeners to the name clients use.
EXPOSE 9092 9644
# SIGTERM: stop accepting, finish requests, flush, write checkpoints and the clean-shutdown marker.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["odradek", "health", "--bootstrap", "127.0.0.1:9092", "--timeout", "4"]
ENTRYPOINT ["odradek"]
CMD ["serve", "--data-dir", "/var/lib/odradek", "--host", "0.0.0.0", "--port", "9092", "--metrics-port", "9644", "--set", "metrics.host=0.0.0.0", "--set", "advertised.listeners=PLAINTEXT://localhost:9092"]
