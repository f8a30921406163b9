#!/bin/sh
# Run once by docker-compose.yaml's `buckets` service (image minio/mc) as MinIO's root user: the artifact and sweep
# buckets, a policy that limits a user to the artifact bucket, and MLflow's own user under that policy, so the
# tracking server never holds the root credentials. Secrets come from the environment and reach mc on stdin (it
# reads the keys it is not given as arguments from there), never as arguments, which `ps` shows to every user.
set -eu
: "${MINIO_ROOT_USER:?}" "${MINIO_ROOT_PASSWORD:?}" "${MINIO_MLFLOW_PASSWORD:?}"
until printf '%s\n%s\n' "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD" | mc alias set local http://minio:9000 >/dev/null
do
  sleep 1  # MinIO is still starting
done
mc mb --ignore-existing local/mlflow-artifacts local/sweeps
mc admin policy create local mlflow-artifacts "$(dirname "$0")/mlflow-artifacts-policy.json"
printf '%s\n' "$MINIO_MLFLOW_PASSWORD" | mc admin user add local mlflow   # creates the user or sets its password
mc admin policy attach local mlflow-artifacts --user mlflow
