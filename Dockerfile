# The Phased operator image.
#
#   docker build -t phased:0.1.0 .
#   kind load docker-image phased:0.1.0        # for a kind cluster (docs/install.md)
#
# Two stages: the first builds a wheel of the package and installs it with its
# dependencies into a virtualenv; the second copies only that virtualenv onto a slim base
# and runs as the unprivileged uid 65532 (the chart's securityContext expects it).

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/phased
# Only what the package needs to build (see .dockerignore): tests and charts stay out.
COPY pyproject.toml README.md ./
COPY operator/ operator/
RUN /opt/phased/bin/pip install --upgrade pip wheel \
 && /opt/phased/bin/pip wheel --no-deps --wheel-dir /wheels . \
 && /opt/phased/bin/pip install /wheels/*.whl \
 && /opt/phased/bin/phased --help >/dev/null

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="phased" \
      org.opencontainers.image.description="Kubernetes operator for long, multi-node GPU training runs that go through phases" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/phased/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PROMETHEUS_DISABLE_CREATED_SERIES=True
RUN groupadd --system --gid 65532 phased \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin phased
COPY --from=build /opt/phased /opt/phased
USER 65532:65532
# 8080: /metrics; 8081: /healthz and /readyz (settings metricsPort and healthPort).
EXPOSE 8080 8081
ENTRYPOINT ["phased"]
CMD ["run"]
