"""The protobuf body decoder, fed bodies encoded here by hand (a varint and length-delimited encoder)."""

from __future__ import annotations

import asyncio

import pytest

from kubesim import protobuf
from kubesim.errors import ApiError
from kubesim.server.http import read_body

PROTOBUF = "application/vnd.kubernetes.protobuf"


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative numbers go on the wire as 64-bit two's complement
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def f(num: int, value: int | bool | str | bytes) -> bytes:
    """One field: ints and bools as varints (wire type 0), strings and messages length-delimited (2)."""
    if isinstance(value, bool | int):
        return varint(num << 3) + varint(int(value))
    raw = value.encode() if isinstance(value, str) else value
    return varint(num << 3 | 2) + varint(len(raw)) + raw


def msg(*fields: bytes) -> bytes:
    return b"".join(fields)


def entry(num: int, key: str, value: str | bytes) -> bytes:
    """A map entry: {1: key, 2: value}."""
    return f(num, msg(f(1, key), f(2, value)))


def envelope(api_version: str, kind: str, obj: bytes) -> bytes:
    """runtime.Unknown behind the magic: {1: TypeMeta{1: apiVersion, 2: kind}, 2: raw}."""
    return protobuf.MAGIC + f(1, msg(f(1, api_version), f(2, kind))) + f(2, obj) + f(3, "") + f(4, "")


def meta(name: str = "", **labels: str) -> bytes:
    """ObjectMeta as gogo-protobuf writes it: every non-pointer field present, a zero Time as no bytes."""
    return msg(f(1, name), f(2, ""), f(3, ""), f(4, ""), f(5, ""), f(6, ""), f(7, 0), f(8, b""),
               *(entry(11, k, v) for k, v in labels.items()))


def int_or_string(value: int | str) -> bytes:
    if isinstance(value, str):
        return msg(f(1, 1), f(2, 0), f(3, value))
    return msg(f(1, 0), f(2, value), f(3, ""))


def quantity(text: str) -> bytes:
    return msg(f(1, text))


def deployment(replicas: int) -> bytes:
    container = msg(
        f(1, "app"), f(2, "nginx:1.27"), f(4, "--port"), f(4, "8080"), f(5, ""),
        f(6, msg(f(1, "http"), f(2, 0), f(3, 8080), f(4, "TCP"), f(5, ""))),
        f(7, msg(f(1, "MODE"), f(2, "prod"))),
        f(7, msg(f(1, "TOKEN"), f(2, ""), f(3, msg(f(4, msg(f(1, msg(f(1, "creds"))), f(2, "token"))))))),
        f(8, msg(entry(1, "cpu", quantity("500m")), entry(1, "memory", quantity("128Mi")),
                 entry(2, "cpu", quantity("250m")))),
        f(11, msg(f(1, msg(f(2, msg(f(1, "/healthz"), f(2, int_or_string("http")))))), f(2, 0), f(4, 5))),
        f(10, msg(f(1, msg(f(3, msg(f(1, int_or_string(8080)), f(2, ""))))), f(2, 3))),
        f(14, "IfNotPresent"), f(16, False), f(17, False), f(18, False),
    )
    pod_spec = msg(f(2, container), f(3, ""), f(4, -1), f(6, ""), f(11, False),
                   f(14, msg(f(4, 1000), f(4, 2000))))
    selector = msg(entry(1, "app", "web"), f(2, msg(f(1, "tier"), f(2, "In"), f(3, "a"), f(3, "b"))))
    strategy = msg(f(1, "RollingUpdate"), f(2, msg(f(1, int_or_string(0)), f(2, int_or_string("25%")))))
    spec = msg(f(1, replicas), f(2, selector), f(3, msg(f(1, meta(app="web")), f(2, pod_spec))), f(4, strategy),
               f(5, 0), f(7, False))
    status = msg(f(1, 0), f(2, 0), f(3, 0), f(4, 0), f(5, 0), f(7, 0))
    return envelope("apps/v1", "Deployment", msg(f(1, meta("web", app="web")), f(2, spec), f(3, status)))


def test_a_deployment_decodes_to_what_json_would_have_given():
    got = protobuf.decode(deployment(replicas=3))
    assert got == {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "creationTimestamp": None, "labels": {"app": "web"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"},
                         "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
            "template": {
                "metadata": {"creationTimestamp": None, "labels": {"app": "web"}},
                "spec": {
                    "containers": [{
                        "name": "app", "image": "nginx:1.27", "args": ["--port", "8080"],
                        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                        "env": [{"name": "MODE", "value": "prod"},
                                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}}],
                        "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m"}},
                        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 5},
                        "livenessProbe": {"tcpSocket": {"port": 8080}, "initialDelaySeconds": 3},
                        "imagePullPolicy": "IfNotPresent",
                    }],
                    "terminationGracePeriodSeconds": -1,
                    "securityContext": {"supplementalGroups": [1000, 2000]},
                },
            },
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "25%"}},
        },
        "status": {},
    }


def test_pointer_fields_keep_their_zero_value_and_negative_int32_take_ten_bytes():
    assert len(varint(-1)) == 10
    assert protobuf.decode(deployment(replicas=0))["spec"]["replicas"] == 0
    assert protobuf.decode(deployment(replicas=-2))["spec"]["replicas"] == -2


def test_int_or_string_target_ports_and_node_ports():
    ports = [msg(f(1, "web"), f(2, "TCP"), f(3, 80), f(4, int_or_string(8080)), f(5, 30080)),
             msg(f(1, "named"), f(2, "TCP"), f(3, 443), f(4, int_or_string("https")), f(5, 0)),
             msg(f(1, ""), f(2, ""), f(3, 0), f(4, int_or_string(0)), f(5, 0))]
    spec = msg(*(f(1, p) for p in ports), entry(2, "app", "web"), f(3, ""), f(4, "NodePort"), f(12, 0))
    got = protobuf.decode(envelope("v1", "Service", msg(f(1, meta("web")), f(2, spec), f(3, msg(f(1, b""))))))
    assert got["spec"] == {
        "ports": [{"name": "web", "protocol": "TCP", "port": 80, "targetPort": 8080, "nodePort": 30080},
                  {"name": "named", "protocol": "TCP", "port": 443, "targetPort": "https"},
                  {"port": 0, "targetPort": 0}],  # port is written without omitempty, as JSON does
        "selector": {"app": "web"}, "type": "NodePort"}
    assert got["status"] == {"loadBalancer": {}}


def test_a_job_from_a_cronjob_keeps_its_owner_reference_annotation_and_times():
    owner = msg(f(1, "CronJob"), f(3, "nightly"), f(4, "uid-1"), f(5, "batch/v1"), f(6, True))
    metadata = msg(f(1, "manual-1"), entry(12, "cronjob.kubernetes.io/instantiate", "manual"), f(13, owner),
                   f(8, msg(f(1, 1_700_000_000), f(2, 5))))
    container = msg(f(1, "task"), f(2, "busybox"), f(3, "echo"), f(3, "hi"))
    spec = msg(f(7, 0), f(10, False),
               f(6, msg(f(1, meta()), f(2, msg(f(2, container), f(3, "Never"))))))
    got = protobuf.decode(envelope("batch/v1", "Job", msg(f(1, metadata), f(2, spec))))
    assert got["metadata"] == {
        "name": "manual-1", "creationTimestamp": "2023-11-14T22:13:20Z",
        "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
        "ownerReferences": [{"kind": "CronJob", "name": "nightly", "uid": "uid-1", "apiVersion": "batch/v1",
                             "controller": True}]}
    assert got["spec"]["backoffLimit"] == 0 and got["spec"]["suspend"] is False
    pod = got["spec"]["template"]["spec"]
    assert pod == {"containers": [{"name": "task", "image": "busybox", "command": ["echo", "hi"]}],
                   "restartPolicy": "Never"}


def test_quantities_packed_varints_and_empty_map_values():
    # a packed run of supplementalGroups, a Quantity message without its string (the zero Quantity, "0")
    container = msg(f(1, "c"), f(8, msg(entry(1, "cpu", quantity("1")), entry(2, "memory", b""))))
    pod = msg(f(2, container), f(14, msg(f(4, varint(5) + varint(6)))))
    body = envelope("batch/v1", "CronJob", msg(f(1, meta("c", empty="")), f(2, msg(
        f(1, "*/5 * * * *"), f(5, msg(f(2, msg(f(6, msg(f(2, pod)))))))))))
    got = protobuf.decode(body)
    assert got["metadata"]["labels"] == {"empty": ""}
    pod_spec = got["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod_spec["containers"][0]["resources"] == {"limits": {"cpu": "1"}, "requests": {"memory": "0"}}
    assert pod_spec["securityContext"] == {"supplementalGroups": [5, 6]}


def test_kinds_and_fields_not_covered_are_refused():
    with pytest.raises(protobuf.ProtobufUnsupported, match="rbac.authorization.k8s.io/v1/Role"):
        protobuf.decode(envelope("rbac.authorization.k8s.io/v1", "Role", msg(f(1, meta("r")))))
    # an in-tree cloud volume is refused rather than dropped
    volume = msg(f(1, "disk"), f(2, msg(f(3, msg(f(1, "pd-1"))))))
    body = envelope("batch/v1", "Job", msg(f(2, msg(f(6, msg(f(2, msg(f(1, volume)))))))))
    with pytest.raises(protobuf.ProtobufUnsupported, match="gcePersistentDisk"):
        protobuf.decode(body)
    # a varint where a message belongs, a truncated body, no magic
    with pytest.raises(protobuf.ProtobufUnsupported):
        protobuf.decode(envelope("apps/v1", "Deployment", msg(f(2, 7))))
    with pytest.raises(protobuf.ProtobufUnsupported):
        protobuf.decode(deployment(replicas=1)[:-10])
    with pytest.raises(protobuf.ProtobufUnsupported):
        protobuf.decode(b"{}")


class FakeRequest:
    """What read_body uses of an aiohttp request."""

    def __init__(self, body: bytes, content_type: str) -> None:
        self.body, self.content_type = body, content_type

    async def read(self) -> bytes:
        return self.body


def test_read_body_decodes_covered_kinds_and_answers_415_for_others():
    got = asyncio.run(read_body(FakeRequest(deployment(replicas=2), PROTOBUF)))
    assert got["kind"] == "Deployment" and got["spec"]["replicas"] == 2
    quota = envelope("v1", "ResourceQuota", msg(f(1, meta("q"))))
    with pytest.raises(ApiError) as refused:
        asyncio.run(read_body(FakeRequest(quota, PROTOBUF)))
    assert refused.value.code == 415 and refused.value.reason == "UnsupportedMediaType"
