{{/* Clusters beside the one the chart is installed in (values: clusters; docs/operations.md, "Many clusters").
Once KUBECONFIG is set a process reaches every cluster through it, the default one included (its first file's
current context): so the first file is a kubeconfig of this cluster's own service account (the ConfigMap
<fullname>-in-cluster-kubeconfig), then each cluster's Secret (key `kubeconfig`) mounted at
/etc/opsconsole/clusters/<name>/kubeconfig. Nothing here renders without clusters. */}}

{{- define "opsconsole.inClusterKubeconfig" -}}
/etc/opsconsole/in-cluster/kubeconfig
{{- end -}}

{{/* KUBECONFIG of a process: (dict "ctx" $ "clusters" (list of cluster entries)) */}}
{{- define "opsconsole.clustersKubeconfig" -}}
{{- $paths := list (include "opsconsole.inClusterKubeconfig" .ctx) -}}
{{- range .clusters -}}
{{- $paths = append $paths (printf "/etc/opsconsole/clusters/%s/kubeconfig" .name) -}}
{{- end -}}
{{- join ":" $paths -}}
{{- end -}}

{{/* the env entry, mounts and volumes of those clusters' kubeconfigs: (dict "ctx" $ "clusters" (list ...)) */}}
{{- define "opsconsole.clustersEnv" -}}
- {name: KUBECONFIG, value: {{ include "opsconsole.clustersKubeconfig" . | quote }}}
{{- end -}}

{{- define "opsconsole.clustersMounts" -}}
- {name: in-cluster-kubeconfig, mountPath: /etc/opsconsole/in-cluster, readOnly: true}
{{- range .clusters }}
- {name: kubeconfig-{{ .name }}, mountPath: /etc/opsconsole/clusters/{{ .name }}, readOnly: true}
{{- end }}
{{- end -}}

{{- define "opsconsole.clustersVolumes" -}}
- name: in-cluster-kubeconfig
  configMap: {name: {{ include "opsconsole.fullname" .ctx }}-in-cluster-kubeconfig}
{{- range .clusters }}
- name: kubeconfig-{{ .name }}
  secret: {secretName: {{ .kubeconfigSecret }}, items: [{key: kubeconfig, path: kubeconfig}], defaultMode: 0440}
{{- end }}
{{- end -}}
