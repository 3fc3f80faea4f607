# The odradek broker. Build: `docker build -t odradek .` (BuildKit: the engine's own Dockerfile
# frontend builds it, no frontend image is pulled); run:
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
# 9092: Kafka's protocol and odradek's (one port); 9644: Prometheus /metrics.
EXPOSE 9092 9644
# The broker's settings, as ODRADEK_* variables so that `docker run -e` (or compose's
# `environment:`) replaces any of them; options after the image name (`serve --set KEY=VALUE`)
# win over both (docs/config.md). Metadata tells Kafka clients to connect to localhost:9092:
# publish another port or host name and set ODRADEK_ADVERTISED_LISTENERS to what clients use.
ENV ODRADEK_LOG_DIRS=/var/lib/odradek \
    ODRADEK_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    ODRADEK_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 \
    ODRADEK_METRICS_HOST=0.0.0.0 \
    ODRADEK_METRICS_PORT=9644
# SIGTERM: stop accepting, finish requests, flush, write checkpoints and the clean-shutdown marker.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["odradek", "health", "--bootstrap", "127.0.0.1:9092", "--timeout", "4"]
ENTRYPOINT ["odradek"]
CMD ["serve"]
