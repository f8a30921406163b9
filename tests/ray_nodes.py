"""`python -m tests.ray_nodes ADDRESS N`: return once the GCS of the Ray cluster at ADDRESS lists N alive nodes.

tests.servers.RayCluster waits for each node it starts with it. `ray status` answered the same question from the
autoscaler's summary, which Ray's monitor refreshes every few seconds, and costs a Python start per call: a 3-node
cluster took 12 calls, about 21 of the 30 seconds it took to start on 2 idle cores. This asks the GCS itself, from one
process, every 0.2 s. The token of a cluster with token authentication comes from the environment (RAY_AUTH_TOKEN).
No deadline of its own: a GCS that does not answer yet (a head still starting on a loaded machine) is asked again,
and the caller stops the wait.
"""

from __future__ import annotations

import sys
import time

from ray._raylet import GcsClient
from ray.core.generated.gcs_pb2 import GcsNodeInfo


def alive_nodes(client: GcsClient) -> int:
    return len(client.get_all_node_info(timeout=10, state_filter=GcsNodeInfo.GcsNodeState.ALIVE))


def main(address: str, nodes: int) -> None:
    client = None
    while True:
        try:  # Ray's client gives up after its own deadlines (connecting, each request): ask again
            client = client or GcsClient(address=address)
            if alive_nodes(client) >= nodes:
                return
        except Exception as err:  # noqa: BLE001 - Ray raises RpcError, TimeoutError or RuntimeError here
            print(f"tests.ray_nodes: {address}: {type(err).__name__}; asking again", file=sys.stderr)
        time.sleep(0.2)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
