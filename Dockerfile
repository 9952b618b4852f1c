# The gateway image used by docker-compose.yml: one process per container, state in PostgreSQL.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY gql gql
COPY store store
COPY policies policies
RUN pip install --no-cache-dir . && useradd --system edgeloom \
    && mkdir /keys && chown edgeloom /keys
USER edgeloom
EXPOSE 4000
CMD ["edgeloom", "serve", "--host", "0.0.0.0", "--port", "4000", "--policy", "/app/policies/examples/crm.yaml"]
