"""Where a sweep keeps its state: a local folder, a shared volume, S3 or GCS behind one Storage, the stored records
read back within their bounds, and the object stores' conditional writes. May import the space and nmt_core's
gates; never tracking, the summary or running."""
