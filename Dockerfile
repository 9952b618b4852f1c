# The gateway image used by docker-compose.yml: one process per container, state in
# PostgreSQL (DATABASE_URL; the embedded PostgreSQL of scripts/serve is not installed).
FROM python:3.11-slim
WORKDIR /app
RUN useradd --system --uid 10001 --no-create-home edgeloom \
    && mkdir /keys && chown edgeloom /keys
# The pinned versions, with their hashes (scripts/lock writes the file).
COPY requirements-server.lock ./
RUN pip install --no-cache-dir --disable-pip-version-check --require-hashes \
    -r requirements-server.lock
COPY pyproject.toml README.md ./
COPY gql gql
COPY store store
COPY policies policies
RUN pip install --no-cache-dir --disable-pip-version-check --no-deps . \
    && rm -rf /app/build /app/*.egg-info
USER edgeloom
EXPOSE 4000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:4000/healthz', timeout=2)"]
CMD ["edgeloom", "serve", "--host", "0.0.0.0", "--port", "4000", "--policy", "/app/policies/examples/crm.yaml"]
