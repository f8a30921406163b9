#!/usr/bin/env bash
# The same server as docker-compose.yaml, with plain commands on one machine (Debian/Ubuntu).
# Binds 127.0.0.1 only; expose it through a TLS reverse proxy, never on all interfaces without TLS.
set -euo pipefail
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
ARTIFACTS=${ARTIFACTS:-/var/lib/mlflow/artifacts}
sudo apt-get install -y postgresql
sudo -u postgres psql -c "CREATE USER mlflow WITH PASSWORD '${POSTGRES_PASSWORD}';" || true
sudo -u postgres psql -c "CREATE DATABASE mlflow OWNER mlflow;" || true
pip install "mlflow>=3" psycopg2-binary
mkdir -p "$ARTIFACTS"
export MLFLOW_AUTH_CONFIG_PATH=${MLFLOW_AUTH_CONFIG_PATH:-$(dirname "$0")/basic_auth.ini}
exec mlflow server --app-name basic-auth --host 127.0.0.1 --port 5000 \
  --backend-store-uri "postgresql://mlflow:${POSTGRES_PASSWORD}@127.0.0.1:5432/mlflow" \
  --artifacts-destination "$ARTIFACTS" --serve-artifacts
