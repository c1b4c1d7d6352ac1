# The Phased operator image.
#
#   docker build -t phased:0.1.0 .
#   kind load docker-image phased:0.1.0        # for a kind cluster (docs/install.md)
#
# Two stages: the first installs the locked, hash-checked dependencies into a virtualenv,
# then a wheel of the package with --no-deps; the second copies only that virtualenv onto
# the same base and runs as the unprivileged uid 65532 (the chart's securityContext expects it).

# The base image by digest: the digest is what is pulled, the tag beside it says which image
# that is. Change both together; `docker buildx imagetools inspect python:<tag>` prints the
# digest of the multi-platform index for a tag.
ARG PYTHON_TAG=3.11.14-slim-bookworm
ARG PYTHON_DIGEST=sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d
ARG PYTHON_IMAGE=python:${PYTHON_TAG}@${PYTHON_DIGEST}

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Dependencies first (their own layer): exactly the locked versions, each checked against
# its hash (requirements/runtime.txt; `make lock` refreshes it).
COPY requirements/runtime.txt requirements/build.txt requirements/
RUN python -m venv /opt/phased \
 && /opt/phased/bin/pip install --require-hashes --no-deps -r requirements/runtime.txt \
 && python -m venv /opt/build \
 && /opt/build/bin/pip install --require-hashes --no-deps -r requirements/build.txt
# Then the package itself, built with the locked setuptools and installed without
# dependencies (they are all in place, hash-checked). Tests and charts stay out (.dockerignore).
COPY pyproject.toml README.md ./
COPY operator/ operator/
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && /opt/phased/bin/pip install --no-deps /wheels/*.whl \
 && /opt/phased/bin/pip check \
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
