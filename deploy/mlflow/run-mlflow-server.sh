#!/usr/bin/env bash
# The same server as docker-compose.yaml, with plain commands on one machine (Debian/Ubuntu): basic auth on,
# PostgreSQL backend, artifacts proxied by the server. Binds 127.0.0.1 only; expose it through a TLS reverse
# proxy, never on all interfaces without TLS.
#   cp deploy/mlflow/basic_auth.ini.example deploy/mlflow/basic_auth.ini   # set admin_password, database_uri
#   export POSTGRES_PASSWORD=... MLFLOW_FLASK_SERVER_SECRET_KEY=$(openssl rand -hex 32)   # keep the key stable
#   deploy/mlflow/run-mlflow-server.sh --setup   # the first time: PostgreSQL, its user and database, pip packages
#   deploy/mlflow/run-mlflow-server.sh           # afterwards
# ARTIFACTS is a folder or object storage: s3://bucket/prefix (with MinIO, also MLFLOW_S3_ENDPOINT_URL and
# AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY). BACKEND_STORE_URI, PORT and MLFLOW_AUTH_CONFIG_PATH may be set too.
set -euo pipefail
: "${BACKEND_STORE_URI:=postgresql://mlflow:${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}@127.0.0.1:5432/mlflow}"
: "${MLFLOW_FLASK_SERVER_SECRET_KEY:?set MLFLOW_FLASK_SERVER_SECRET_KEY (openssl rand -hex 32): basic auth needs a static key}"
export MLFLOW_FLASK_SERVER_SECRET_KEY
ARTIFACTS=${ARTIFACTS:-/var/lib/mlflow/artifacts}
PORT=${PORT:-5000}
export MLFLOW_AUTH_CONFIG_PATH=${MLFLOW_AUTH_CONFIG_PATH:-$(dirname "$0")/basic_auth.ini}
if [[ "${1:-}" == "--setup" ]]; then
  sudo apt-get install -y postgresql
  sudo -u postgres psql -c "CREATE USER mlflow WITH PASSWORD '${POSTGRES_PASSWORD}';" || true
  sudo -u postgres psql -c "CREATE DATABASE mlflow OWNER mlflow;" || true
  pip install "mlflow[auth]>=3" "psycopg[binary]" boto3   # auth: Flask-WTF; psycopg 3: SQLAlchemy 2.1's postgresql driver
fi
[[ "$ARTIFACTS" == *://* ]] || mkdir -p "$ARTIFACTS"
exec mlflow server --app-name basic-auth --host 127.0.0.1 --port "$PORT" \
  --backend-store-uri "$BACKEND_STORE_URI" --artifacts-destination "$ARTIFACTS" --serve-artifacts
