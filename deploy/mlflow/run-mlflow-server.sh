#!/usr/bin/env bash
# The same server as docker-compose.yaml, with plain commands on one machine (Debian/Ubuntu): basic auth on,
# PostgreSQL backend, artifacts proxied by the server. Binds 127.0.0.1 only; expose it through a TLS reverse
# proxy, never on all interfaces without TLS.
#   cp deploy/mlflow/basic_auth.ini.example deploy/mlflow/basic_auth.ini   # set admin_password, database_uri
#   chmod 600 deploy/mlflow/basic_auth.ini   # it holds the admin password (or export MLFLOW_AUTH_ADMIN_PASSWORD)
#   export POSTGRES_PASSWORD=... MLFLOW_FLASK_SERVER_SECRET_KEY=$(openssl rand -hex 32)   # keep the key stable
#   deploy/mlflow/run-mlflow-server.sh --setup      # the first time: PostgreSQL, its user and database, pip packages
#   deploy/mlflow/run-mlflow-server.sh --setup-db   # only the user and database (again after a new POSTGRES_PASSWORD)
#   deploy/mlflow/run-mlflow-server.sh              # afterwards
# No secret goes on a command line, where every user of the machine reads it (ps): the backend store URI holds no
# password and reaches MLflow as MLFLOW_BACKEND_STORE_URI, PostgreSQL's client library reads the password from
# PGPASSWORD (set from POSTGRES_PASSWORD) or a PGPASSFILE of mode 600, and the setup's SQL reaches psql on stdin.
# ARTIFACTS is a folder or object storage: s3://bucket/prefix (with MinIO, also MLFLOW_S3_ENDPOINT_URL and
# AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY of a user limited to that bucket). BACKEND_STORE_URI (without a
# password), PORT, HOST (a container's own interfaces only where its port is published on 127.0.0.1), PSQL (the
# command that runs the setup's SQL as PostgreSQL's superuser), MLFLOW_AUTH_CONFIG_PATH and WORKERS (the server's
# processes, else MLFLOW_WORKERS, else MLflow's default 4; each loads MLflow, about 5 s of CPU: a small lab's 2-core
# machine wants 1 or 2) may be set too.
set -euo pipefail
here=$(dirname "$0")

die() {  # one line on stderr, exit 2: the project's answer to bad input
  echo "run-mlflow-server.sh: $*" >&2
  exit 2
}

# first, before anything is set up or written: MLflow's own MLFLOW_WORKERS too (an explicit --workers overrides it)
WORKERS=${WORKERS:-${MLFLOW_WORKERS:-4}}
if [[ ! "$WORKERS" =~ ^[1-9][0-9]{0,2}$ ]]; then  # shown escaped (LC_ALL=C: every non-ASCII byte too) and cut
  shown=$(LC_ALL=C printf %q "${WORKERS:0:40}")
  ((${#WORKERS} <= 40)) || shown+="..."
  die "WORKERS: $shown; allowed: a whole number from 1 to 999"
fi

ini_value() {  # ini_value FILE KEY: the last value of KEY in FILE ('' when absent), as configparser reads a plain line
  sed -n "s/^[[:space:]]*$2[[:space:]]*[=:][[:space:]]*//p" "$1" | tail -n 1 | sed 's/[[:space:]]*$//'
}

check_admin_password() {  # the admin password MLflow will use is not the example's, and only its owner reads the ini
  local ini=$1 password
  [[ -f "$ini" ]] || die "$ini: not found; allowed: a copy of basic_auth.ini.example with your own admin_password"
  if [[ -v MLFLOW_AUTH_ADMIN_PASSWORD ]]; then  # MLflow prefers the variable to the file, even when it is empty
    password=$MLFLOW_AUTH_ADMIN_PASSWORD
  else
    password=$(ini_value "$ini" admin_password)
  fi
  [[ "$password" != "$(ini_value "$here/basic_auth.ini.example" admin_password)" ]] ||
    die "$ini: mlflow.admin_password: the example password; allowed: your own (or MLFLOW_AUTH_ADMIN_PASSWORD)"
  [[ -z "$(ini_value "$ini" admin_password)" || "$(stat -c %a "$ini")" == [4-7]00 ]] ||
    die "$ini: mode $(stat -c %a "$ini") shows admin_password to others; allowed: chmod 600"
}

setup_database() {  # the mlflow user (created or given the new password) and its database; SQL on stdin, not argv
  [[ -n "${POSTGRES_PASSWORD:-}" ]] || die "POSTGRES_PASSWORD: not set; allowed: the mlflow database user's password"
  local literal=${POSTGRES_PASSWORD//\'/\'\'} psql  # an SQL string literal: a quote is written twice
  read -ra psql <<<"${PSQL:-sudo -u postgres psql}"
  "${psql[@]}" -v ON_ERROR_STOP=1 -q <<SQL
SELECT 'CREATE USER mlflow' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mlflow') \gexec
ALTER USER mlflow WITH PASSWORD '$literal';
SELECT 'CREATE DATABASE mlflow OWNER mlflow' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'mlflow') \gexec
SQL
}

case "${1:-}" in
  --setup)
    sudo apt-get install -y postgresql
    setup_database
    pip install "mlflow[auth]>=3" "psycopg[binary]" boto3 ;;  # auth: Flask-WTF; psycopg 3: SQLAlchemy 2.1's driver
  --setup-db)
    setup_database
    exit 0 ;;
  "") ;;
  *) die "$1: unknown option; allowed: --setup, --setup-db or nothing" ;;
esac
if [[ -z "${BACKEND_STORE_URI:-}" ]]; then
  [[ -n "${POSTGRES_PASSWORD:-}" ]] || die "POSTGRES_PASSWORD: not set; allowed: the mlflow database user's password"
  BACKEND_STORE_URI=postgresql://mlflow@127.0.0.1:5432/mlflow
fi
[[ ! "$BACKEND_STORE_URI" =~ ^[^:/]+://[^/@]*:[^/]*@ ]] ||
  die "BACKEND_STORE_URI: holds a password; allowed: none in it, POSTGRES_PASSWORD or a PGPASSFILE instead"
[[ -z "${POSTGRES_PASSWORD:-}" ]] || export PGPASSWORD=$POSTGRES_PASSWORD
export MLFLOW_BACKEND_STORE_URI=$BACKEND_STORE_URI
[[ -n "${MLFLOW_FLASK_SERVER_SECRET_KEY:-}" ]] ||
  die "MLFLOW_FLASK_SERVER_SECRET_KEY: not set; allowed: a stable key (openssl rand -hex 32): basic auth needs one"
export MLFLOW_FLASK_SERVER_SECRET_KEY
export MLFLOW_AUTH_CONFIG_PATH=${MLFLOW_AUTH_CONFIG_PATH:-$here/basic_auth.ini}
check_admin_password "$MLFLOW_AUTH_CONFIG_PATH"
ARTIFACTS=${ARTIFACTS:-/var/lib/mlflow/artifacts}
[[ "$ARTIFACTS" == *://* ]] || mkdir -p "$ARTIFACTS"
exec mlflow server --app-name basic-auth --host "${HOST:-127.0.0.1}" --port "${PORT:-5000}" --workers "$WORKERS" \
  --artifacts-destination "$ARTIFACTS" --serve-artifacts
