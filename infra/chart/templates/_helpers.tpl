{{/* The cluster's name: given, or the seed's when gardenlet installs the chart. gardener-operator
names no cluster (gardener.runtimeCluster): the Extension's runtimeClusterValues set it. */}}
{{- define "housekeeper.cluster" -}}
{{- $seed := dig "seed" "name" "" (.Values.gardener | default dict) -}}
{{- required "cluster is required: the seed's name (gardenlet sets gardener.seed.name; in the garden runtime cluster, set cluster in the Extension's runtimeClusterValues)" (.Values.cluster | default $seed) -}}
{{- end -}}

{{/* The pods' priority class: priorityClassName, or the one gardener-operator gives an extension
in the garden runtime cluster (gardener.runtimeCluster.priorityClassName, its
gardener-garden-system-200: the seeds' gardener-system-* classes do not exist there). */}}
{{- define "housekeeper.priorityClassName" -}}
{{- .Values.priorityClassName | default (dig "runtimeCluster" "priorityClassName" "" (.Values.gardener | default dict)) -}}
{{- end -}}

{{/* The served types, checked: at least one (values.schema.json names those implemented). */}}
{{- define "housekeeper.types" -}}
{{- if not .Values.types -}}
{{- fail "types is required: the spec.types this installation owns (values.schema.json lists those housekeeper implements); an empty list would serve nothing" -}}
{{- end -}}
{{- if and (has "local" .Values.types) (not .Values.local.hostPath) -}}
{{- fail "types has local: set local.hostPath, the node directory of the local provider's buckets" -}}
{{- end -}}
{{- join "," .Values.types -}}
{{- end -}}

{{/* The image of the functions, the forwarders and the setup: housekeeper-<type> when the
installation serves one cloud's type, linking only that provider's SDK; housekeeper (every
provider and local) otherwise. */}}
{{- define "housekeeper.image" -}}
{{- $name := "housekeeper" -}}
{{- if and (eq (len .Values.types) 1) (ne (first .Values.types) "local") -}}
{{- $name = printf "housekeeper-%s" (first .Values.types) -}}
{{- end -}}
{{- include "housekeeper.imageNamed" (dict "root" . "name" $name) -}}
{{- end -}}

{{- define "housekeeper.bridgeImage" -}}
{{- include "housekeeper.imageNamed" (dict "root" . "name" "housekeeper-bridge") -}}
{{- end -}}

{{/* An image of the registry (pass a dict: root, name): its digest from image.digests, or the tag. */}}
{{- define "housekeeper.imageNamed" -}}
{{- $image := .root.Values.image -}}
{{- $digest := get ($image.digests | default dict) .name -}}
{{- if $digest -}}
{{ $image.registry }}/{{ .name }}@{{ $digest }}
{{- else -}}
{{ $image.registry }}/{{ .name }}:{{ $image.tag | default (printf "v%s" .root.Chart.AppVersion) }}
{{- end -}}
{{- end -}}

{{/* Labels of an object of component (pass a dict: root, component). */}}
{{- define "housekeeper.labels" -}}
app.kubernetes.io/name: housekeeper
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: housekeeper
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end -}}

{{- define "housekeeper.selector" -}}
app.kubernetes.io/name: housekeeper
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The annotations every pod carries: scraping, and the configuration's checksum (a change rolls the pods).
With monitoring.enabled the PodMonitor scrapes the pods: without the prometheus.io annotations, so
that no annotation-driven job (a seed Prometheus's "extensions" PodMonitor) scrapes them twice. */}}
{{- define "housekeeper.podAnnotations" -}}
{{- if not .Values.monitoring.enabled }}
prometheus.io/scrape: "true"
prometheus.io/port: "8080"
prometheus.io/path: /metrics
{{- end }}
checksum/config: {{ include (print .Template.BasePath "/config.yaml") . | sha256sum }}
{{- /* New identities (a rotation) roll the pods, which read their credentials at start. */}}
{{- with .Values.nats.identities }}
checksum/nats-identities: {{ toJson . | sha256sum }}
{{- end }}
{{- end -}}

{{- define "housekeeper.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "housekeeper.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* The environment variables of identity's NATS credentials (pass a dict: root, identity). */}}
{{- define "housekeeper.natsEnv" -}}
{{- if .root.Values.nats.identitiesSecret }}
{{- $file := include "housekeeper.natsCredentialsFile" . }}
- name: {{ ternary "HOUSEKEEPER_NATS_CREDS" "HOUSEKEEPER_NATS_NKEY" (eq .root.Values.nats.credentials "jwt") }}
  value: /etc/housekeeper/nats/{{ $file }}
- name: HOUSEKEEPER_NATS_TLS_CA
  value: /etc/housekeeper/nats/ca.pem
{{- end }}
{{- end -}}

{{/* The file of identity's credentials in the identities Secret, by nats.credentials (pass a
dict: root, identity): <identity>.nk (config) or <identity>.creds (jwt). */}}
{{- define "housekeeper.natsCredentialsFile" -}}
{{- $form := .root.Values.nats.credentials -}}
{{- if eq $form "config" -}}
{{ .identity }}.nk
{{- else if eq $form "jwt" -}}
{{ .identity }}.creds
{{- else -}}
{{- fail (printf "nats.credentials %q: config (<identity>.nk, from `housekeeper nats-auth --form config`) or jwt (<identity>.creds)" $form) -}}
{{- end -}}
{{- end -}}

{{/* The NATS account of housekeeper's users, where KEDA reads the consumers' lag: given, or
implied by the credentials' form. $G (the account of users without one) cannot hold issued
identities, and a JWT account is a public key nobody can guess. */}}
{{- define "housekeeper.natsAccount" -}}
{{- $nats := .Values.nats -}}
{{- if not $nats.identitiesSecret -}}
{{- $nats.account | default "$G" -}}
{{- else if eq $nats.account "$G" -}}
{{- fail (printf "nats.account $G: the identities of nats.identitiesSecret %q live in housekeeper's own account, and KEDA would find no consumer in $G; leave it empty with config credentials (HOUSEKEEPER), or give the account `housekeeper nats-auth --form jwt` printed" $nats.identitiesSecret) -}}
{{- else if $nats.account -}}
{{- if and (eq $nats.credentials "jwt") (not (regexMatch "^A[A-Z2-7]{55}$" $nats.account)) -}}
{{- fail (printf "nats.account %q: with jwt credentials the account is its public key (A followed by 55 characters), as `housekeeper nats-auth --form jwt` prints it" $nats.account) -}}
{{- end -}}
{{- $nats.account -}}
{{- else if eq $nats.credentials "jwt" -}}
{{- fail "nats.account is required with jwt credentials: the account's public key (A…), as `housekeeper nats-auth --form jwt` prints it" -}}
{{- else -}}
HOUSEKEEPER
{{- end -}}
{{- end -}}

{{- define "housekeeper.natsMount" -}}
{{- if .root.Values.nats.identitiesSecret }}
- name: nats-identity
  mountPath: /etc/housekeeper/nats
  readOnly: true
{{- end }}
{{- end -}}

{{/* Only identity's own credentials are mounted. */}}
{{- define "housekeeper.natsVolume" -}}
{{- if .root.Values.nats.identitiesSecret }}
- name: nats-identity
  secret:
    secretName: {{ .root.Values.nats.identitiesSecret }}
    items:
      - {key: {{ include "housekeeper.natsCredentialsFile" . }}, path: {{ include "housekeeper.natsCredentialsFile" . }}}
      - {key: ca.pem, path: ca.pem}
{{- end }}
{{- end -}}

{{/* What the component called .name needs where it runs (a JSON object; {} for the bridge):
the registry's facts, files/functions.json, which `make registry` writes from functions/all
(runner.Needs: apiServer, stores, readOnlyStores, workDir, feature). */}}
{{- define "housekeeper.needs" -}}
{{- $facts := .root.Files.Get "files/functions.json" | fromJson -}}
{{- index $facts .name | default dict | toJson -}}
{{- end -}}

{{/* The local provider's directory, for the functions that open object stores. */}}
{{- define "housekeeper.opensStores" -}}
{{- if (include "housekeeper.needs" . | fromJson).stores }}true{{ end -}}
{{- end -}}

{{- define "housekeeper.localEnv" -}}
{{- if and .root.Values.local.hostPath (include "housekeeper.opensStores" .) }}
- name: HOUSEKEEPER_LOCAL_ROOT
  value: /var/lib/housekeeper/buckets
{{- /* etcd-druid mounts <hostPath>/<bucket> on etcd's node: the node's path, not this pod's. */}}
- name: HOUSEKEEPER_LOCAL_HOST_PATH
  value: {{ .root.Values.local.etcdHostPath | default .root.Values.local.hostPath | quote }}
{{- end }}
{{- end -}}

{{- define "housekeeper.localMount" -}}
{{- if and .root.Values.local.hostPath (include "housekeeper.opensStores" .) }}
- name: local-buckets
  mountPath: /var/lib/housekeeper/buckets
{{- if (include "housekeeper.needs" . | fromJson).readOnlyStores }}
  readOnly: true
{{- end }}
{{- end }}
{{- end -}}

{{/* A function's work directory, its $TMPDIR on the read-only root (the drill's: a throwaway
etcd's data directory and the snapshot being read, about twice an entry's snapshot db per
concurrent drill). */}}
{{- define "housekeeper.workMount" -}}
{{- if (include "housekeeper.needs" . | fromJson).workDir }}
- name: work
  mountPath: /tmp
{{- end }}
{{- end -}}

{{- define "housekeeper.workVolume" -}}
{{- if (include "housekeeper.needs" . | fromJson).workDir }}
- name: work
  emptyDir: {}
{{- end }}
{{- end -}}

{{/* The drill's etcdbrctl (drill.etcdBackupRestoreImage): a volume its init containers fill
(housekeeper.etcdbrctlInit), mounted read-only where the drill runs it from. */}}
{{- define "housekeeper.runsEtcdbrctl" -}}
{{- if and (eq .name "drill") .root.Values.drill.etcdBackupRestoreImage }}true{{ end }}
{{- end -}}

{{- define "housekeeper.etcdbrctlVolume" -}}
{{- if include "housekeeper.runsEtcdbrctl" . }}
- name: etcdbrctl
  emptyDir: {}
{{- end }}
{{- end -}}

{{- define "housekeeper.etcdbrctlMount" -}}
{{- if include "housekeeper.runsEtcdbrctl" . }}
- name: etcdbrctl
  mountPath: /opt/etcdbrctl
  readOnly: true
{{- end }}
{{- end -}}

{{- define "housekeeper.etcdbrctlEnv" -}}
{{- if include "housekeeper.runsEtcdbrctl" . }}
- name: HOUSEKEEPER_ETCDBRCTL
  value: /opt/etcdbrctl/etcdbrctl
{{- end }}
{{- end -}}

{{/* The drill's comparison with the shoots' etcd-main (drill.liveShootEtcd): the pods' namespace
is the release's, where the drill admits itself from (its NetworkPolicy in each shoot's
namespace). */}}
{{- define "housekeeper.liveShootEtcd" -}}
{{- if and (eq .name "drill") .root.Values.drill.liveShootEtcd }}true{{ end }}
{{- end -}}

{{- define "housekeeper.liveShootEtcdEnv" -}}
{{- if include "housekeeper.liveShootEtcd" . }}
- name: HOUSEKEEPER_LIVE_SHOOT_ETCD
  value: "true"
- name: HOUSEKEEPER_POD_NAMESPACE
  value: {{ .root.Release.Namespace | quote }}
{{- end }}
{{- end -}}

{{/* Two steps, as etcd-backup-restore's image has no shell nor cp: housekeeper's image copies
housekeeper into the volume, and etcd-backup-restore's image runs that copy to copy its own
etcdbrctl there (housekeeper copy-binary). */}}
{{- define "housekeeper.etcdbrctlInit" -}}
{{- if include "housekeeper.runsEtcdbrctl" . }}
initContainers:
  - name: housekeeper-binary
    image: {{ include "housekeeper.image" .root }}
    imagePullPolicy: {{ .root.Values.image.pullPolicy }}
    args: ["copy-binary", "--to", "/opt/etcdbrctl/housekeeper"]
    volumeMounts:
      - name: etcdbrctl
        mountPath: /opt/etcdbrctl
    resources:
      requests: {cpu: 10m, memory: 32Mi}
      limits: {memory: 64Mi}
    securityContext:
      {{- include "housekeeper.containerSecurityContext" .root | nindent 6 }}
  - name: etcdbrctl
    image: {{ .root.Values.drill.etcdBackupRestoreImage }}
    imagePullPolicy: IfNotPresent
    command: ["/opt/etcdbrctl/housekeeper"]
    args: ["copy-binary", "--from", {{ .root.Values.drill.etcdbrctlPath | quote }}, "--to", "/opt/etcdbrctl/etcdbrctl"]
    volumeMounts:
      - name: etcdbrctl
        mountPath: /opt/etcdbrctl
    resources:
      requests: {cpu: 10m, memory: 32Mi}
      limits: {memory: 64Mi}
    securityContext:
      {{- include "housekeeper.containerSecurityContext" .root | nindent 6 }}
{{- end }}
{{- end -}}

{{- define "housekeeper.localVolume" -}}
{{- if and .root.Values.local.hostPath (include "housekeeper.opensStores" .) }}
- name: local-buckets
  hostPath:
    path: {{ .root.Values.local.hostPath }}
    type: DirectoryOrCreate
{{- end }}
{{- end -}}

{{/* The volumes and mounts of component name (pass a dict: root, name, and identity when it is
not the name): its NATS identity and, for the functions that open buckets, the local provider's
directory. */}}
{{- define "housekeeper.volumes" -}}
{{- $v := printf "%s%s%s%s" (include "housekeeper.natsVolume" (dict "root" .root "identity" (.identity | default .name))) (include "housekeeper.localVolume" .) (include "housekeeper.workVolume" .) (include "housekeeper.etcdbrctlVolume" .) -}}
{{- if $v }}
volumes:
{{- $v | trim | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "housekeeper.mounts" -}}
{{- $m := printf "%s%s%s%s" (include "housekeeper.natsMount" (dict "root" .root)) (include "housekeeper.localMount" .) (include "housekeeper.workMount" .) (include "housekeeper.etcdbrctlMount" .) -}}
{{- if $m }}
volumeMounts:
{{- $m | trim | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The pods' imagePullSecrets: imagePullSecrets, and housekeeper-image-pull when the chart
creates it from image.pullCredentials (image-pull-secret.yaml). */}}
{{- define "housekeeper.imagePullSecrets" -}}
{{- $secrets := .Values.imagePullSecrets | default list }}
{{- if .Values.image.pullCredentials }}
{{- $secrets = append $secrets (dict "name" "housekeeper-image-pull") }}
{{- end }}
{{- with $secrets }}
imagePullSecrets:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "housekeeper.priorityClass" -}}
{{- with include "housekeeper.priorityClassName" . }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/* priorityClassName on a Knative Service: Knative refuses it unless its config-features has
kubernetes.podspec-priorityclassname on, which knative.features declares. */}}
{{- define "housekeeper.knativePriorityClass" -}}
{{- $pc := include "housekeeper.priorityClassName" . }}
{{- if $pc }}
{{- $flag := index (.Values.knative.features | default dict) "kubernetes.podspec-priorityclassname" | default "disabled" }}
{{- if not (has $flag (list "enabled" "allowed")) }}
{{- fail (printf "priorityClassName %q with mode knative: Knative Serving refuses it (\"must not set the field(s): spec.template.spec.priorityClassName\") unless its config-features has kubernetes.podspec-priorityclassname: enabled; turn the flag on and set knative.features, or unset priorityClassName" $pc) }}
{{- end }}
priorityClassName: {{ $pc }}
{{- end }}
{{- end -}}

{{/* retention.byPurpose as the flag's purpose=duration list. */}}
{{- define "housekeeper.byPurpose" -}}
{{- $pairs := list -}}
{{- range $purpose, $d := . -}}
{{- $pairs = append $pairs (printf "%s=%s" $purpose $d) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/* Pod labels that Gardener's NetworkPolicy controller reads in a seed (pass a dict: root,
name): DNS for all, the API server for the bridge and the functions that need it, public
networks for those that open object stores (housekeeper.needs). */}}
{{- define "housekeeper.podNetworkLabels" -}}
networking.gardener.cloud/to-dns: allowed
{{- $needs := include "housekeeper.needs" . | fromJson }}
{{- if or (eq .name "bridge") $needs.apiServer }}
networking.gardener.cloud/to-runtime-apiserver: allowed
{{- end }}
{{- if $needs.stores }}
networking.gardener.cloud/to-public-networks: allowed
{{- end }}
{{- end -}}

{{/* The functions this installation runs, sorted (a JSON list, for fromJsonArray): every one of
.Values.functions, those with a feature (housekeeper.needs: the EtcdBackupConfig feature's
schedule and snapshot, and drill and copy, whose CRDs come with it) only with <feature>.enabled. Their Deployments or Services, ScaledObjects, consumers (the setup Job's
--functions), ServiceAccounts and rights follow this list. */}}
{{- define "housekeeper.functionNames" -}}
{{- $names := list -}}
{{- range $name := keys .Values.functions | sortAlpha -}}
{{- $feature := (include "housekeeper.needs" (dict "root" $ "name" $name) | fromJson).feature -}}
{{- if or (not $feature) (index $.Values $feature).enabled -}}
{{- $names = append $names $name -}}
{{- end -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}

{{/* The components that talk to the Kubernetes API, each with its ServiceAccount: the bridge,
every function run, and the operators' CLI (housekeeper-cli, which no workload uses: the pods an
operator runs the CLI in; a JSON list, for fromJsonArray). */}}
{{- define "housekeeper.apiClients" -}}
{{- append (prepend (include "housekeeper.functionNames" . | fromJsonArray) "bridge") "cli" | toJson -}}
{{- end -}}
