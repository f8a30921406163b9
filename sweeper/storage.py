"""Where a sweep keeps its trials, state and results: a folder that every Ray node sees.

Object storage (s3://, gs://) does not work yet: every file the sweeper keeps would have to go through
pyarrow.fs. Until it does, such a URI is refused in one line, instead of silently becoming a local folder
named `s3:`.
"""
from __future__ import annotations

import re
from pathlib import Path

from sweeper.space import SpecError

SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def check_storage(storage: str, source: str) -> str:
    """The storage as a path (`file://` removed); any other URI scheme is bad input."""
    match = SCHEME.match(storage)
    if match is None:
        return storage
    if match.group(1) == "file":
        return storage.removeprefix("file://")
    raise SpecError("--storage", f"{storage}: {match.group(1)}:// storage is not supported yet; use a folder that "
                    "every node sees (a local folder on one machine, a ReadWriteMany volume or NFS on a cluster)", source)


def storage_folder(storage: str, source: str) -> Path:
    return Path(check_storage(storage, source)).expanduser().resolve()
