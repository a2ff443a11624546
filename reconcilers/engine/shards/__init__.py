"""Controller shards: several controller replicas share the keys of the reconciled kinds.

- `ring`: which replica owns which key — consistent hashing with bounded loads over the keys' uids, so a replica
  that joins or leaves moves about 1/N of the keys and no replica holds more than its bound;
- `membership`: who the replicas are — one coordination.k8s.io Lease per shard (`opsconsole-shard-<id>`), held
  and renewed as the leader Lease is, and judged live or expired by observation, never by another host's clock;
- `ownership`: the keys this replica acts on among the live shards, the handover (the old owner stops before
  the new one starts) and canary shards defined by a label selector (`selector`);
- `handoff`: the controller's handoff filtered to this shard's keys; `setup`: a shard put together for
  `runcontroller --shard`;
- `labels` and `sharder` (`--shard-informers labels`): a shard's informers watch only the objects labelled with its
  id, and the sharder, on the replica running the cluster-wide work, keeps those labels (with a drain handshake).
"""
