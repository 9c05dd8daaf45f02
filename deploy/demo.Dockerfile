# Image for the `demo` service of deploy/compose.yaml: the ctxutil-otel package and its console script.
# Build context: the repository root (only pyproject.toml, README.md and src/ are copied).
FROM python:3.12-slim

WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir --disable-pip-version-check .

ENTRYPOINT ["ctxutil-otel"]
CMD ["demo"]
