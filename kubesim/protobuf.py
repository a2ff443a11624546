"""Decoding Kubernetes protobuf request bodies into the objects' JSON form.

client-go's typed clients send ``application/vnd.kubernetes.protobuf``. kubesim decodes the kinds that
kubectl's typed commands send this way:

- core/v1 Namespace, ConfigMap, Secret, ServiceAccount and Service (``kubectl create namespace|configmap|
  secret|serviceaccount|service``), apps/v1 Deployment (``kubectl create deployment``), batch/v1 Job and
  CronJob (``kubectl create job|cronjob``, ``kubectl create job --from=cronjob/NAME``);
- authorization.k8s.io/v1 SelfSubjectAccessReview, SubjectAccessReview and SelfSubjectRulesReview
  (``kubectl auth can-i``) and authentication.k8s.io/v1 TokenRequest (``kubectl create token``).

Any other kind is refused (:class:`ProtobufUnsupported`; the caller answers 415), and so is a Deployment, Job
or CronJob whose pods use one of the in-tree cloud volume plugins (``gcePersistentDisk``, ``rbd``, ``cephfs``
and the like), which are not decoded.

The body is the magic ``k8s\\0`` and a ``runtime.Unknown`` message ({1: TypeMeta {1: apiVersion, 2: kind},
2: the object's bytes}). Field numbers come from the ``generated.proto`` files of k8s.io/api v0.32 and
k8s.io/apimachinery. The result is what the same Go object gives as JSON: gogo-protobuf writes every field
that is not a Go pointer even at its zero value, so such scalars are dropped at zero as ``omitempty`` drops
them, while pointer fields (on the wire only when set) and fields JSON always writes keep their zero value
(``replicas: 0``). Fields a schema does not list are skipped.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

MAGIC = b"k8s\x00"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ProtobufUnsupported(ValueError):
    """A body this decoder cannot turn into JSON."""


@dataclass(frozen=True)
class Map:
    """A ``map<string, value>`` field: a JSON object whose values are of kind ``value``."""

    value: Any


# A schema maps a field number to (JSON name, kind); a JSON name of None inlines the nested message into its
# parent (Go's `json:",inline"` embedding). Kinds:
#   "str" "int" "bool" "bytes"  a scalar of a non-pointer `omitempty` Go field: dropped at its zero value
#   "*str" "*int" "*bool"       a pointer field, or one JSON writes without omitempty: kept at zero
#   "time"                      meta/v1 Time {1: seconds, 2: nanos}: RFC 3339, None when zero (JSON's null)
#   "intorstr"                  util/intstr IntOrString {1: type, 2: intVal, 3: strVal}: an int or a string
#   "quantity"                  api/resource Quantity {1: string}: the string
#   "fieldsv1"                  meta/v1 FieldsV1 {1: raw JSON}: the JSON it holds
#   UNSUPPORTED                 a field this decoder refuses rather than drop
#   Map(kind), [kind], dict     a map, a repeated field, a nested message
Schema = dict[int, tuple[str | None, Any]]
UNSUPPORTED = "unsupported"
STR_MAP, BYTES_MAP, QUANTITY_MAP = Map("*str"), Map("bytes"), Map("quantity")
_OMITEMPTY = frozenset({"str", "int", "bool", "bytes"})
_VARINT = frozenset({"int", "*int", "bool", "*bool"})

# k8s.io/apimachinery pkg/apis/meta/v1
OWNER_REFERENCE = {1: ("kind", "*str"), 3: ("name", "*str"), 4: ("uid", "*str"), 5: ("apiVersion", "*str"),
                   6: ("controller", "*bool"), 7: ("blockOwnerDeletion", "*bool")}
MANAGED_FIELDS_ENTRY = {1: ("manager", "str"), 2: ("operation", "str"), 3: ("apiVersion", "str"), 4: ("time", "time"),
                        6: ("fieldsType", "str"), 7: ("fieldsV1", "fieldsv1"), 8: ("subresource", "str")}
OBJECT_META = {1: ("name", "str"), 2: ("generateName", "str"), 3: ("namespace", "str"), 4: ("selfLink", "str"),
               5: ("uid", "str"), 6: ("resourceVersion", "str"), 7: ("generation", "int"),
               8: ("creationTimestamp", "time"), 9: ("deletionTimestamp", "time"),
               10: ("deletionGracePeriodSeconds", "*int"), 11: ("labels", STR_MAP), 12: ("annotations", STR_MAP),
               13: ("ownerReferences", [OWNER_REFERENCE]), 14: ("finalizers", ["str"]),
               17: ("managedFields", [MANAGED_FIELDS_ENTRY])}
LABEL_SELECTOR_REQUIREMENT = {1: ("key", "*str"), 2: ("operator", "*str"), 3: ("values", ["str"])}
LABEL_SELECTOR = {1: ("matchLabels", STR_MAP), 2: ("matchExpressions", [LABEL_SELECTOR_REQUIREMENT])}

# k8s.io/api core/v1: the pod template shared by Deployments, Jobs and CronJobs
HOST_PATH_VOLUME_SOURCE = {1: ("path", "*str"), 2: ("type", "*str")}
EMPTY_DIR_VOLUME_SOURCE = {1: ("medium", "str"), 2: ("sizeLimit", "quantity")}
KEY_TO_PATH = {1: ("key", "*str"), 2: ("path", "*str"), 3: ("mode", "*int")}
SECRET_VOLUME_SOURCE = {1: ("secretName", "str"), 2: ("items", [KEY_TO_PATH]), 3: ("defaultMode", "*int"),
                        4: ("optional", "*bool")}
NFS_VOLUME_SOURCE = {1: ("server", "*str"), 2: ("path", "*str"), 3: ("readOnly", "bool")}
PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE = {1: ("claimName", "*str"), 2: ("readOnly", "bool")}
OBJECT_FIELD_SELECTOR = {1: ("apiVersion", "str"), 2: ("fieldPath", "*str")}
RESOURCE_FIELD_SELECTOR = {1: ("containerName", "str"), 2: ("resource", "*str"), 3: ("divisor", "quantity")}
DOWNWARD_API_VOLUME_FILE = {1: ("path", "*str"), 2: ("fieldRef", OBJECT_FIELD_SELECTOR),
                            3: ("resourceFieldRef", RESOURCE_FIELD_SELECTOR), 4: ("mode", "*int")}
DOWNWARD_API_VOLUME_SOURCE = {1: ("items", [DOWNWARD_API_VOLUME_FILE]), 2: ("defaultMode", "*int")}
LOCAL_OBJECT_REFERENCE = {1: ("name", "str")}
OBJECT_REFERENCE = {1: ("kind", "str"), 2: ("namespace", "str"), 3: ("name", "str"), 4: ("uid", "str"),
                    5: ("apiVersion", "str"), 6: ("resourceVersion", "str"), 7: ("fieldPath", "str")}
CONFIG_MAP_VOLUME_SOURCE = {1: (None, LOCAL_OBJECT_REFERENCE), 2: ("items", [KEY_TO_PATH]), 3: ("defaultMode", "*int"),
                            4: ("optional", "*bool")}
SECRET_PROJECTION = {1: (None, LOCAL_OBJECT_REFERENCE), 2: ("items", [KEY_TO_PATH]), 4: ("optional", "*bool")}
DOWNWARD_API_PROJECTION = {1: ("items", [DOWNWARD_API_VOLUME_FILE])}
CONFIG_MAP_PROJECTION = {1: (None, LOCAL_OBJECT_REFERENCE), 2: ("items", [KEY_TO_PATH]), 4: ("optional", "*bool")}
SERVICE_ACCOUNT_TOKEN_PROJECTION = {1: ("audience", "str"), 2: ("expirationSeconds", "*int"), 3: ("path", "*str")}
CLUSTER_TRUST_BUNDLE_PROJECTION = {1: ("name", "*str"), 2: ("signerName", "*str"), 3: ("labelSelector", LABEL_SELECTOR),
                                   4: ("path", "*str"), 5: ("optional", "*bool")}
VOLUME_PROJECTION = {1: ("secret", SECRET_PROJECTION), 2: ("downwardAPI", DOWNWARD_API_PROJECTION),
                     3: ("configMap", CONFIG_MAP_PROJECTION),
                     4: ("serviceAccountToken", SERVICE_ACCOUNT_TOKEN_PROJECTION),
                     5: ("clusterTrustBundle", CLUSTER_TRUST_BUNDLE_PROJECTION)}
PROJECTED_VOLUME_SOURCE = {1: ("sources", [VOLUME_PROJECTION]), 2: ("defaultMode", "*int")}
CSI_VOLUME_SOURCE = {1: ("driver", "*str"), 2: ("readOnly", "*bool"), 3: ("fsType", "*str"),
                     4: ("volumeAttributes", STR_MAP), 5: ("nodePublishSecretRef", LOCAL_OBJECT_REFERENCE)}
VOLUME_RESOURCE_REQUIREMENTS = {1: ("limits", QUANTITY_MAP), 2: ("requests", QUANTITY_MAP)}
TYPED_LOCAL_OBJECT_REFERENCE = {1: ("apiGroup", "*str"), 2: ("kind", "*str"), 3: ("name", "*str")}
TYPED_OBJECT_REFERENCE = {1: ("apiGroup", "*str"), 2: ("kind", "*str"), 3: ("name", "*str"), 4: ("namespace", "*str")}
PERSISTENT_VOLUME_CLAIM_SPEC = {1: ("accessModes", ["str"]), 2: ("resources", VOLUME_RESOURCE_REQUIREMENTS),
                                3: ("volumeName", "str"), 4: ("selector", LABEL_SELECTOR),
                                5: ("storageClassName", "*str"), 6: ("volumeMode", "*str"),
                                7: ("dataSource", TYPED_LOCAL_OBJECT_REFERENCE),
                                8: ("dataSourceRef", TYPED_OBJECT_REFERENCE), 9: ("volumeAttributesClassName", "*str")}
PERSISTENT_VOLUME_CLAIM_TEMPLATE = {1: ("metadata", OBJECT_META), 2: ("spec", PERSISTENT_VOLUME_CLAIM_SPEC)}
EPHEMERAL_VOLUME_SOURCE = {1: ("volumeClaimTemplate", PERSISTENT_VOLUME_CLAIM_TEMPLATE)}
IMAGE_VOLUME_SOURCE = {1: ("reference", "str"), 2: ("pullPolicy", "str")}
VOLUME_SOURCE = {1: ("hostPath", HOST_PATH_VOLUME_SOURCE), 2: ("emptyDir", EMPTY_DIR_VOLUME_SOURCE),
                 3: ("gcePersistentDisk", UNSUPPORTED), 4: ("awsElasticBlockStore", UNSUPPORTED),
                 5: ("gitRepo", UNSUPPORTED), 6: ("secret", SECRET_VOLUME_SOURCE), 7: ("nfs", NFS_VOLUME_SOURCE),
                 8: ("iscsi", UNSUPPORTED), 9: ("glusterfs", UNSUPPORTED),
                 10: ("persistentVolumeClaim", PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE), 11: ("rbd", UNSUPPORTED),
                 12: ("flexVolume", UNSUPPORTED), 13: ("cinder", UNSUPPORTED), 14: ("cephfs", UNSUPPORTED),
                 15: ("flocker", UNSUPPORTED), 16: ("downwardAPI", DOWNWARD_API_VOLUME_SOURCE), 17: ("fc", UNSUPPORTED),
                 18: ("azureFile", UNSUPPORTED), 19: ("configMap", CONFIG_MAP_VOLUME_SOURCE),
                 20: ("vsphereVolume", UNSUPPORTED), 21: ("quobyte", UNSUPPORTED), 22: ("azureDisk", UNSUPPORTED),
                 23: ("photonPersistentDisk", UNSUPPORTED), 24: ("portworxVolume", UNSUPPORTED),
                 25: ("scaleIO", UNSUPPORTED), 26: ("projected", PROJECTED_VOLUME_SOURCE),
                 27: ("storageos", UNSUPPORTED), 28: ("csi", CSI_VOLUME_SOURCE),
                 29: ("ephemeral", EPHEMERAL_VOLUME_SOURCE), 30: ("image", IMAGE_VOLUME_SOURCE)}
VOLUME = {1: ("name", "*str"), 2: (None, VOLUME_SOURCE)}
CONTAINER_PORT = {1: ("name", "str"), 2: ("hostPort", "int"), 3: ("containerPort", "*int"), 4: ("protocol", "str"),
                  5: ("hostIP", "str")}
CONFIG_MAP_ENV_SOURCE = {1: (None, LOCAL_OBJECT_REFERENCE), 2: ("optional", "*bool")}
SECRET_ENV_SOURCE = {1: (None, LOCAL_OBJECT_REFERENCE), 2: ("optional", "*bool")}
ENV_FROM_SOURCE = {1: ("prefix", "str"), 2: ("configMapRef", CONFIG_MAP_ENV_SOURCE),
                   3: ("secretRef", SECRET_ENV_SOURCE)}
CONFIG_MAP_KEY_SELECTOR = {1: (None, LOCAL_OBJECT_REFERENCE), 2: ("key", "*str"), 3: ("optional", "*bool")}
SECRET_KEY_SELECTOR = {1: (None, LOCAL_OBJECT_REFERENCE), 2: ("key", "*str"), 3: ("optional", "*bool")}
ENV_VAR_SOURCE = {1: ("fieldRef", OBJECT_FIELD_SELECTOR), 2: ("resourceFieldRef", RESOURCE_FIELD_SELECTOR),
                  3: ("configMapKeyRef", CONFIG_MAP_KEY_SELECTOR), 4: ("secretKeyRef", SECRET_KEY_SELECTOR)}
ENV_VAR = {1: ("name", "*str"), 2: ("value", "str"), 3: ("valueFrom", ENV_VAR_SOURCE)}
RESOURCE_CLAIM = {1: ("name", "*str"), 2: ("request", "str")}
RESOURCE_REQUIREMENTS = {1: ("limits", QUANTITY_MAP), 2: ("requests", QUANTITY_MAP), 3: ("claims", [RESOURCE_CLAIM])}
CONTAINER_RESIZE_POLICY = {1: ("resourceName", "*str"), 2: ("restartPolicy", "*str")}
VOLUME_MOUNT = {1: ("name", "*str"), 2: ("readOnly", "bool"), 3: ("mountPath", "*str"), 4: ("subPath", "str"),
                5: ("mountPropagation", "*str"), 6: ("subPathExpr", "str"), 7: ("recursiveReadOnly", "*str")}
VOLUME_DEVICE = {1: ("name", "*str"), 2: ("devicePath", "*str")}
EXEC_ACTION = {1: ("command", ["str"])}
HTTP_HEADER = {1: ("name", "*str"), 2: ("value", "*str")}
HTTP_GET_ACTION = {1: ("path", "str"), 2: ("port", "intorstr"), 3: ("host", "str"), 4: ("scheme", "str"),
                   5: ("httpHeaders", [HTTP_HEADER])}
TCP_SOCKET_ACTION = {1: ("port", "intorstr"), 2: ("host", "str")}
GRPC_ACTION = {1: ("port", "*int"), 2: ("service", "*str")}
PROBE_HANDLER = {1: ("exec", EXEC_ACTION), 2: ("httpGet", HTTP_GET_ACTION), 3: ("tcpSocket", TCP_SOCKET_ACTION),
                 4: ("grpc", GRPC_ACTION)}
PROBE = {1: (None, PROBE_HANDLER), 2: ("initialDelaySeconds", "int"), 3: ("timeoutSeconds", "int"),
         4: ("periodSeconds", "int"), 5: ("successThreshold", "int"), 6: ("failureThreshold", "int"),
         7: ("terminationGracePeriodSeconds", "*int")}
SLEEP_ACTION = {1: ("seconds", "*int")}
LIFECYCLE_HANDLER = {1: ("exec", EXEC_ACTION), 2: ("httpGet", HTTP_GET_ACTION), 3: ("tcpSocket", TCP_SOCKET_ACTION),
                     4: ("sleep", SLEEP_ACTION)}
LIFECYCLE = {1: ("postStart", LIFECYCLE_HANDLER), 2: ("preStop", LIFECYCLE_HANDLER)}
CAPABILITIES = {1: ("add", ["str"]), 2: ("drop", ["str"])}
SE_LINUX_OPTIONS = {1: ("user", "str"), 2: ("role", "str"), 3: ("type", "str"), 4: ("level", "str")}
WINDOWS_SECURITY_CONTEXT_OPTIONS = {1: ("gmsaCredentialSpecName", "*str"), 2: ("gmsaCredentialSpec", "*str"),
                                    3: ("runAsUserName", "*str"), 4: ("hostProcess", "*bool")}
SECCOMP_PROFILE = {1: ("type", "*str"), 2: ("localhostProfile", "*str")}
APP_ARMOR_PROFILE = {1: ("type", "*str"), 2: ("localhostProfile", "*str")}
SECURITY_CONTEXT = {1: ("capabilities", CAPABILITIES), 2: ("privileged", "*bool"),
                    3: ("seLinuxOptions", SE_LINUX_OPTIONS), 4: ("runAsUser", "*int"), 5: ("runAsNonRoot", "*bool"),
                    6: ("readOnlyRootFilesystem", "*bool"), 7: ("allowPrivilegeEscalation", "*bool"),
                    8: ("runAsGroup", "*int"), 9: ("procMount", "*str"),
                    10: ("windowsOptions", WINDOWS_SECURITY_CONTEXT_OPTIONS), 11: ("seccompProfile", SECCOMP_PROFILE),
                    12: ("appArmorProfile", APP_ARMOR_PROFILE)}
CONTAINER = {1: ("name", "*str"), 2: ("image", "str"), 3: ("command", ["str"]), 4: ("args", ["str"]),
             5: ("workingDir", "str"), 6: ("ports", [CONTAINER_PORT]), 7: ("env", [ENV_VAR]),
             8: ("resources", RESOURCE_REQUIREMENTS), 9: ("volumeMounts", [VOLUME_MOUNT]), 10: ("livenessProbe", PROBE),
             11: ("readinessProbe", PROBE), 12: ("lifecycle", LIFECYCLE), 13: ("terminationMessagePath", "str"),
             14: ("imagePullPolicy", "str"), 15: ("securityContext", SECURITY_CONTEXT), 16: ("stdin", "bool"),
             17: ("stdinOnce", "bool"), 18: ("tty", "bool"), 19: ("envFrom", [ENV_FROM_SOURCE]),
             20: ("terminationMessagePolicy", "str"), 21: ("volumeDevices", [VOLUME_DEVICE]),
             22: ("startupProbe", PROBE), 23: ("resizePolicy", [CONTAINER_RESIZE_POLICY]),
             24: ("restartPolicy", "*str")}
EPHEMERAL_CONTAINER = {1: (None, CONTAINER), 2: ("targetContainerName", "str")}
SYSCTL = {1: ("name", "*str"), 2: ("value", "*str")}
POD_SECURITY_CONTEXT = {1: ("seLinuxOptions", SE_LINUX_OPTIONS), 2: ("runAsUser", "*int"), 3: ("runAsNonRoot", "*bool"),
                        4: ("supplementalGroups", ["int"]), 5: ("fsGroup", "*int"), 6: ("runAsGroup", "*int"),
                        7: ("sysctls", [SYSCTL]), 8: ("windowsOptions", WINDOWS_SECURITY_CONTEXT_OPTIONS),
                        9: ("fsGroupChangePolicy", "*str"), 10: ("seccompProfile", SECCOMP_PROFILE),
                        11: ("appArmorProfile", APP_ARMOR_PROFILE), 12: ("supplementalGroupsPolicy", "*str"),
                        13: ("seLinuxChangePolicy", "*str")}
NODE_SELECTOR_REQUIREMENT = {1: ("key", "*str"), 2: ("operator", "*str"), 3: ("values", ["str"])}
NODE_SELECTOR_TERM = {1: ("matchExpressions", [NODE_SELECTOR_REQUIREMENT]),
                      2: ("matchFields", [NODE_SELECTOR_REQUIREMENT])}
NODE_SELECTOR = {1: ("nodeSelectorTerms", [NODE_SELECTOR_TERM])}
PREFERRED_SCHEDULING_TERM = {1: ("weight", "*int"), 2: ("preference", NODE_SELECTOR_TERM)}
NODE_AFFINITY = {1: ("requiredDuringSchedulingIgnoredDuringExecution", NODE_SELECTOR),
                 2: ("preferredDuringSchedulingIgnoredDuringExecution", [PREFERRED_SCHEDULING_TERM])}
POD_AFFINITY_TERM = {1: ("labelSelector", LABEL_SELECTOR), 2: ("namespaces", ["str"]), 3: ("topologyKey", "*str"),
                     4: ("namespaceSelector", LABEL_SELECTOR), 5: ("matchLabelKeys", ["str"]),
                     6: ("mismatchLabelKeys", ["str"])}
WEIGHTED_POD_AFFINITY_TERM = {1: ("weight", "*int"), 2: ("podAffinityTerm", POD_AFFINITY_TERM)}
POD_AFFINITY = {1: ("requiredDuringSchedulingIgnoredDuringExecution", [POD_AFFINITY_TERM]),
                2: ("preferredDuringSchedulingIgnoredDuringExecution", [WEIGHTED_POD_AFFINITY_TERM])}
POD_ANTI_AFFINITY = {1: ("requiredDuringSchedulingIgnoredDuringExecution", [POD_AFFINITY_TERM]),
                     2: ("preferredDuringSchedulingIgnoredDuringExecution", [WEIGHTED_POD_AFFINITY_TERM])}
AFFINITY = {1: ("nodeAffinity", NODE_AFFINITY), 2: ("podAffinity", POD_AFFINITY),
            3: ("podAntiAffinity", POD_ANTI_AFFINITY)}
TOLERATION = {1: ("key", "str"), 2: ("operator", "str"), 3: ("value", "str"), 4: ("effect", "str"),
              5: ("tolerationSeconds", "*int")}
HOST_ALIAS = {1: ("ip", "*str"), 2: ("hostnames", ["str"])}
POD_DNS_CONFIG_OPTION = {1: ("name", "str"), 2: ("value", "*str")}
POD_DNS_CONFIG = {1: ("nameservers", ["str"]), 2: ("searches", ["str"]), 3: ("options", [POD_DNS_CONFIG_OPTION])}
POD_READINESS_GATE = {1: ("conditionType", "*str")}
TOPOLOGY_SPREAD_CONSTRAINT = {1: ("maxSkew", "*int"), 2: ("topologyKey", "*str"), 3: ("whenUnsatisfiable", "*str"),
                              4: ("labelSelector", LABEL_SELECTOR), 5: ("minDomains", "*int"),
                              6: ("nodeAffinityPolicy", "*str"), 7: ("nodeTaintsPolicy", "*str"),
                              8: ("matchLabelKeys", ["str"])}
POD_OS = {1: ("name", "*str")}
POD_SCHEDULING_GATE = {1: ("name", "*str")}
POD_RESOURCE_CLAIM = {1: ("name", "*str"), 3: ("resourceClaimName", "*str"), 4: ("resourceClaimTemplateName", "*str")}
POD_SPEC = {1: ("volumes", [VOLUME]), 2: ("containers", [CONTAINER]), 3: ("restartPolicy", "str"),
            4: ("terminationGracePeriodSeconds", "*int"), 5: ("activeDeadlineSeconds", "*int"), 6: ("dnsPolicy", "str"),
            7: ("nodeSelector", STR_MAP), 8: ("serviceAccountName", "str"), 9: ("serviceAccount", "str"),
            10: ("nodeName", "str"), 11: ("hostNetwork", "bool"), 12: ("hostPID", "bool"), 13: ("hostIPC", "bool"),
            14: ("securityContext", POD_SECURITY_CONTEXT), 15: ("imagePullSecrets", [LOCAL_OBJECT_REFERENCE]),
            16: ("hostname", "str"), 17: ("subdomain", "str"), 18: ("affinity", AFFINITY), 19: ("schedulerName", "str"),
            20: ("initContainers", [CONTAINER]), 21: ("automountServiceAccountToken", "*bool"),
            22: ("tolerations", [TOLERATION]), 23: ("hostAliases", [HOST_ALIAS]), 24: ("priorityClassName", "str"),
            25: ("priority", "*int"), 26: ("dnsConfig", POD_DNS_CONFIG), 27: ("shareProcessNamespace", "*bool"),
            28: ("readinessGates", [POD_READINESS_GATE]), 29: ("runtimeClassName", "*str"),
            30: ("enableServiceLinks", "*bool"), 31: ("preemptionPolicy", "*str"), 32: ("overhead", QUANTITY_MAP),
            33: ("topologySpreadConstraints", [TOPOLOGY_SPREAD_CONSTRAINT]),
            34: ("ephemeralContainers", [EPHEMERAL_CONTAINER]), 35: ("setHostnameAsFQDN", "*bool"), 36: ("os", POD_OS),
            37: ("hostUsers", "*bool"), 38: ("schedulingGates", [POD_SCHEDULING_GATE]),
            39: ("resourceClaims", [POD_RESOURCE_CLAIM]), 40: ("resources", RESOURCE_REQUIREMENTS)}
POD_TEMPLATE_SPEC = {1: ("metadata", OBJECT_META), 2: ("spec", POD_SPEC)}

# core/v1 Service
SERVICE_PORT = {1: ("name", "str"), 2: ("protocol", "str"), 3: ("port", "*int"), 4: ("targetPort", "intorstr"),
                5: ("nodePort", "int"), 6: ("appProtocol", "*str")}
CLIENT_IP_CONFIG = {1: ("timeoutSeconds", "*int")}
SESSION_AFFINITY_CONFIG = {1: ("clientIP", CLIENT_IP_CONFIG)}
SERVICE_SPEC = {1: ("ports", [SERVICE_PORT]), 2: ("selector", STR_MAP), 3: ("clusterIP", "str"), 4: ("type", "str"),
                5: ("externalIPs", ["str"]), 7: ("sessionAffinity", "str"), 8: ("loadBalancerIP", "str"),
                9: ("loadBalancerSourceRanges", ["str"]), 10: ("externalName", "str"),
                11: ("externalTrafficPolicy", "str"), 12: ("healthCheckNodePort", "int"),
                13: ("publishNotReadyAddresses", "bool"), 14: ("sessionAffinityConfig", SESSION_AFFINITY_CONFIG),
                17: ("ipFamilyPolicy", "*str"), 18: ("clusterIPs", ["str"]), 19: ("ipFamilies", ["str"]),
                20: ("allocateLoadBalancerNodePorts", "*bool"), 21: ("loadBalancerClass", "*str"),
                22: ("internalTrafficPolicy", "*str"), 23: ("trafficDistribution", "*str")}
PORT_STATUS = {1: ("port", "*int"), 2: ("protocol", "*str"), 3: ("error", "*str")}
LOAD_BALANCER_INGRESS = {1: ("ip", "str"), 2: ("hostname", "str"), 3: ("ipMode", "*str"), 4: ("ports", [PORT_STATUS])}
LOAD_BALANCER_STATUS = {1: ("ingress", [LOAD_BALANCER_INGRESS])}
CONDITION = {1: ("type", "*str"), 2: ("status", "*str"), 3: ("observedGeneration", "int"),
             4: ("lastTransitionTime", "time"), 5: ("reason", "*str"), 6: ("message", "*str")}
SERVICE_STATUS = {1: ("loadBalancer", LOAD_BALANCER_STATUS), 2: ("conditions", [CONDITION])}
SERVICE = {1: ("metadata", OBJECT_META), 2: ("spec", SERVICE_SPEC), 3: ("status", SERVICE_STATUS)}

# k8s.io/api apps/v1
ROLLING_UPDATE_DEPLOYMENT = {1: ("maxUnavailable", "intorstr"), 2: ("maxSurge", "intorstr")}
DEPLOYMENT_STRATEGY = {1: ("type", "str"), 2: ("rollingUpdate", ROLLING_UPDATE_DEPLOYMENT)}
DEPLOYMENT_SPEC = {1: ("replicas", "*int"), 2: ("selector", LABEL_SELECTOR), 3: ("template", POD_TEMPLATE_SPEC),
                   4: ("strategy", DEPLOYMENT_STRATEGY), 5: ("minReadySeconds", "int"),
                   6: ("revisionHistoryLimit", "*int"), 7: ("paused", "bool"), 9: ("progressDeadlineSeconds", "*int")}
DEPLOYMENT_CONDITION = {1: ("type", "*str"), 2: ("status", "*str"), 4: ("reason", "str"), 5: ("message", "str"),
                        6: ("lastUpdateTime", "time"), 7: ("lastTransitionTime", "time")}
DEPLOYMENT_STATUS = {1: ("observedGeneration", "int"), 2: ("replicas", "int"), 3: ("updatedReplicas", "int"),
                     4: ("availableReplicas", "int"), 5: ("unavailableReplicas", "int"),
                     6: ("conditions", [DEPLOYMENT_CONDITION]), 7: ("readyReplicas", "int"),
                     8: ("collisionCount", "*int")}
DEPLOYMENT = {1: ("metadata", OBJECT_META), 2: ("spec", DEPLOYMENT_SPEC), 3: ("status", DEPLOYMENT_STATUS)}

# k8s.io/api batch/v1
POD_FAILURE_POLICY_ON_EXIT_CODES_REQUIREMENT = {1: ("containerName", "*str"), 2: ("operator", "*str"),
                                                3: ("values", ["int"])}
POD_FAILURE_POLICY_ON_POD_CONDITIONS_PATTERN = {1: ("type", "*str"), 2: ("status", "*str")}
POD_FAILURE_POLICY_RULE = {1: ("action", "*str"), 2: ("onExitCodes", POD_FAILURE_POLICY_ON_EXIT_CODES_REQUIREMENT),
                           3: ("onPodConditions", [POD_FAILURE_POLICY_ON_POD_CONDITIONS_PATTERN])}
POD_FAILURE_POLICY = {1: ("rules", [POD_FAILURE_POLICY_RULE])}
SUCCESS_POLICY_RULE = {1: ("succeededIndexes", "*str"), 2: ("succeededCount", "*int")}
SUCCESS_POLICY = {1: ("rules", [SUCCESS_POLICY_RULE])}
JOB_SPEC = {1: ("parallelism", "*int"), 2: ("completions", "*int"), 3: ("activeDeadlineSeconds", "*int"),
            4: ("selector", LABEL_SELECTOR), 5: ("manualSelector", "*bool"), 6: ("template", POD_TEMPLATE_SPEC),
            7: ("backoffLimit", "*int"), 8: ("ttlSecondsAfterFinished", "*int"), 9: ("completionMode", "*str"),
            10: ("suspend", "*bool"), 11: ("podFailurePolicy", POD_FAILURE_POLICY),
            12: ("backoffLimitPerIndex", "*int"), 13: ("maxFailedIndexes", "*int"),
            14: ("podReplacementPolicy", "*str"), 15: ("managedBy", "*str"), 16: ("successPolicy", SUCCESS_POLICY)}
JOB_CONDITION = {1: ("type", "*str"), 2: ("status", "*str"), 3: ("lastProbeTime", "time"),
                 4: ("lastTransitionTime", "time"), 5: ("reason", "str"), 6: ("message", "str")}
UNCOUNTED_TERMINATED_PODS = {1: ("succeeded", ["str"]), 2: ("failed", ["str"])}
JOB_STATUS = {1: ("conditions", [JOB_CONDITION]), 2: ("startTime", "time"), 3: ("completionTime", "time"),
              4: ("active", "int"), 5: ("succeeded", "int"), 6: ("failed", "int"), 7: ("completedIndexes", "str"),
              8: ("uncountedTerminatedPods", UNCOUNTED_TERMINATED_PODS), 9: ("ready", "*int"),
              10: ("failedIndexes", "*str"), 11: ("terminating", "*int")}
JOB = {1: ("metadata", OBJECT_META), 2: ("spec", JOB_SPEC), 3: ("status", JOB_STATUS)}
JOB_TEMPLATE_SPEC = {1: ("metadata", OBJECT_META), 2: ("spec", JOB_SPEC)}
CRON_JOB_SPEC = {1: ("schedule", "*str"), 2: ("startingDeadlineSeconds", "*int"), 3: ("concurrencyPolicy", "str"),
                 4: ("suspend", "*bool"), 5: ("jobTemplate", JOB_TEMPLATE_SPEC),
                 6: ("successfulJobsHistoryLimit", "*int"), 7: ("failedJobsHistoryLimit", "*int"),
                 8: ("timeZone", "*str")}
CRON_JOB_STATUS = {1: ("active", [OBJECT_REFERENCE]), 4: ("lastScheduleTime", "time"),
                   5: ("lastSuccessfulTime", "time")}
CRON_JOB = {1: ("metadata", OBJECT_META), 2: ("spec", CRON_JOB_SPEC), 3: ("status", CRON_JOB_STATUS)}

# authorization.k8s.io/v1: what `kubectl auth can-i` sends
RESOURCE_ATTRIBUTES = {1: ("namespace", "str"), 2: ("verb", "str"), 3: ("group", "str"), 4: ("version", "str"),
                       5: ("resource", "str"), 6: ("subresource", "str"), 7: ("name", "str")}
NON_RESOURCE_ATTRIBUTES = {1: ("path", "str"), 2: ("verb", "str")}
ACCESS_SPEC = {1: ("resourceAttributes", RESOURCE_ATTRIBUTES), 2: ("nonResourceAttributes", NON_RESOURCE_ATTRIBUTES)}

KINDS: dict[tuple[str, str], Schema] = {
    ("v1", "Namespace"): {1: ("metadata", OBJECT_META), 2: ("spec", {1: ("finalizers", ["str"])}),
                          3: ("status", {1: ("phase", "str")})},
    ("v1", "ConfigMap"): {1: ("metadata", OBJECT_META), 2: ("data", STR_MAP), 3: ("binaryData", BYTES_MAP),
                          4: ("immutable", "*bool")},
    ("v1", "Secret"): {1: ("metadata", OBJECT_META), 2: ("data", BYTES_MAP), 3: ("type", "str"),
                       4: ("stringData", STR_MAP), 5: ("immutable", "*bool")},
    ("v1", "ServiceAccount"): {1: ("metadata", OBJECT_META), 2: ("secrets", [OBJECT_REFERENCE]),
                               3: ("imagePullSecrets", [LOCAL_OBJECT_REFERENCE]),
                               4: ("automountServiceAccountToken", "*bool")},
    ("v1", "Service"): SERVICE,
    ("apps/v1", "Deployment"): DEPLOYMENT,
    ("batch/v1", "Job"): JOB,
    ("batch/v1", "CronJob"): CRON_JOB,
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): {1: ("metadata", OBJECT_META), 2: ("spec", ACCESS_SPEC)},
    ("authorization.k8s.io/v1", "SubjectAccessReview"): {1: ("metadata", OBJECT_META), 2: ("spec", {
        **ACCESS_SPEC, 3: ("user", "str"), 4: ("groups", ["str"]), 6: ("uid", "str")})},
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): {1: ("metadata", OBJECT_META),
                                                            2: ("spec", {1: ("namespace", "str")})},
    # authentication.k8s.io/v1: `kubectl create token`
    ("authentication.k8s.io/v1", "TokenRequest"): {1: ("metadata", OBJECT_META), 2: ("spec", {
        1: ("audiences", ["str"]), 4: ("expirationSeconds", "*int")})},
}


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufUnsupported("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int, Any]]:
    out, pos = [], 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise ProtobufUnsupported("truncated field")
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ProtobufUnsupported(f"wire type {wire}")
        out.append((num, wire, value))
    return out


def _signed(raw: int) -> int:
    # int32 and int64 are both sent as 64-bit two's complement varints (a negative int32 takes 10 bytes)
    return raw if raw < (1 << 63) else raw - (1 << 64)


def _time(buf: bytes) -> str | None:
    if not buf:
        return None  # a zero Time marshals to no bytes; JSON writes it as null
    parts = {n: v for n, w, v in _fields(buf) if w == 0}
    stamp = _EPOCH + timedelta(seconds=_signed(parts.get(1, 0)))
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")  # metav1.Time's JSON has whole seconds


def _int_or_string(buf: bytes) -> int | str:
    parts = {n: v for n, _, v in _fields(buf)}
    if parts.get(1, 0) == 1:
        return bytes(parts.get(3, b"")).decode()
    return _signed(parts.get(2, 0))


def _value(kind: Any, wire: int, raw: Any) -> Any:
    if isinstance(kind, dict):
        if wire != 2:
            raise ProtobufUnsupported(f"a message field with wire type {wire}")
        return _message(bytes(raw), kind)
    if kind in _VARINT:
        if wire != 0:
            raise ProtobufUnsupported(f"a {kind} field with wire type {wire}")
        return _signed(raw) if kind in ("int", "*int") else bool(raw)
    if wire != 2:
        raise ProtobufUnsupported(f"a {kind} field with wire type {wire}")
    raw = bytes(raw)
    if kind in ("str", "*str"):
        return raw.decode()
    if kind == "bytes":
        return base64.b64encode(raw).decode()
    if kind == "time":
        return _time(raw)
    if kind == "intorstr":
        return _int_or_string(raw)
    if kind == "quantity":
        return bytes({n: v for n, _, v in _fields(raw)}.get(1, b"0")).decode()
    if kind == "fieldsv1":
        return json.loads(bytes({n: v for n, _, v in _fields(raw)}.get(1, b"{}")))
    raise ProtobufUnsupported(f"field type {kind}")


def _repeated(kind: Any, wire: int, raw: Any) -> list[Any]:
    if isinstance(kind, str) and kind in _VARINT and wire == 2:  # a packed run of varints
        buf, pos, out = bytes(raw), 0, []
        while pos < len(buf):
            value, pos = _varint(buf, pos)
            out.append(_value(kind, 0, value))
        return out
    return [_value(kind, wire, raw)]


def _map_entry(kind: Map, wire: int, raw: Any) -> tuple[str, Any]:
    if wire != 2:
        raise ProtobufUnsupported(f"a map entry with wire type {wire}")
    entry = {n: (w, v) for n, w, v in _fields(bytes(raw))}
    key = bytes(entry.get(1, (2, b""))[1]).decode()
    if 2 in entry:
        value_wire, value = entry[2]
    else:  # an absent value is the zero value
        value_wire, value = (0, 0) if isinstance(kind.value, str) and kind.value in _VARINT else (2, b"")
    return key, _value(kind.value, value_wire, value)


def _message(buf: bytes, schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for num, wire, raw in _fields(buf):
        if num not in schema:
            continue
        name, kind = schema[num]
        if kind == UNSUPPORTED:
            raise ProtobufUnsupported(f"protobuf field {name or num} is not supported")
        if isinstance(kind, Map):
            key, value = _map_entry(kind, wire, raw)
            out.setdefault(str(name), {})[key] = value
        elif isinstance(kind, list):
            out.setdefault(str(name), []).extend(_repeated(kind[0], wire, raw))
        elif name is None:
            out.update(_value(kind, wire, raw))
        else:
            value = _value(kind, wire, raw)
            if isinstance(kind, str) and kind in _OMITEMPTY and not value:
                out.pop(name, None)  # omitempty: a non-pointer field at its zero value
            else:
                out[name] = value
    return out


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object; ProtobufUnsupported for kinds or fields not covered."""
    if not body.startswith(MAGIC):
        raise ProtobufUnsupported("missing the k8s protobuf magic")
    unknown = {n: v for n, _, v in _fields(body[len(MAGIC):])}
    type_meta = {n: bytes(v).decode() for n, _, v in _fields(bytes(unknown.get(1, b"")))}
    api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
    schema = KINDS.get((api_version, kind))
    if schema is None:
        raise ProtobufUnsupported(f"protobuf bodies of {api_version}/{kind} are not supported")
    try:
        obj = _message(bytes(unknown.get(2, b"")), schema)
    except ProtobufUnsupported:
        raise
    except (ValueError, OverflowError) as e:  # a string that is not UTF-8, fieldsV1 that is not JSON, a wild time
        raise ProtobufUnsupported(f"undecodable field: {e}") from e
    obj["apiVersion"], obj["kind"] = api_version, kind
    return obj
