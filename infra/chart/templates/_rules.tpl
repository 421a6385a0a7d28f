{{/* Each component's cluster-wide rules: the verbs its code uses (bridge/*.go,
functions/gardener, functions/destination, functions/{bucket,entry,etcdbackup,drill,copy}). */}}

{{/* The bridge: list + watch only (informers), of exactly what it watches: files/bridge.json,
which `make registry` writes from its table of kinds (bridge.Watched). Gardener's BackupBuckets
and BackupEntries; housekeeper's own kinds, kept with etcdBackupConfig.enabled off (the CRDs
outlive the feature, and a bridge that finds a kind served but may not list it would never finish
its initial lists); namespaces and secrets, the objects' inputs: an entry is announced again when
its shoot namespace appears, an object when its spec.secretRef secret appears or changes (the
bridge keeps only a digest of the data, never the values, and watches only the namespaces
spec.secretRef names, known at run time: a ClusterRole). */}}
{{- define "housekeeper.rules.bridge" -}}
{{- range (.Files.Get "files/bridge.json" | fromJson).watched }}
- apiGroups: [{{ .apiGroup | quote }}]
  resources: {{ toJson .resources }}
  verbs: ["list", "watch"]
{{- end }}
{{- end -}}

{{/* The operators' CLI (infra/docs/operating.md, "Running the CLI in a seed"): `deadletters`
reads the object each dead letter names to say whether it converged since (functions/cli
StateOf); nothing else of the API, and never a secret. */}}
{{- define "housekeeper.rules.cli" -}}
- apiGroups: ["extensions.gardener.cloud"]
  resources: ["backupbuckets", "backupentries"]
  verbs: ["get"]
{{- if .Values.etcdBackupConfig.enabled }}
- apiGroups: ["backup.housekeeper.dev"]
  resources: ["etcdbackupconfigs", "restoredrills", "backupcopypolicies"]
  verbs: ["get"]
{{- end }}
{{- end -}}

{{- define "housekeeper.rules.bucket" -}}
# get: read the object an event names; patch: finalizer and operation annotation.
- apiGroups: ["extensions.gardener.cloud"]
  resources: ["backupbuckets"]
  verbs: ["get", "patch"]
- apiGroups: ["extensions.gardener.cloud"]
  resources: ["backupbuckets/status"]
  verbs: ["patch"]
# A bucket is deleted only once no BackupEntry names it.
- apiGroups: ["extensions.gardener.cloud"]
  resources: ["backupentries"]
  verbs: ["list"]
# get: credentials from spec.secretRef; create/patch: generated-bucket-<name> and the finalizer
# on spec.secretRef secrets; delete: the generated secret when the bucket goes. Names cannot be
# narrowed: create takes no resourceNames and the generated names are per bucket.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create", "patch", "delete"]
{{- end -}}

{{- define "housekeeper.rules.entry" -}}
- apiGroups: ["extensions.gardener.cloud"]
  resources: ["backupentries"]
  verbs: ["get", "patch"]
- apiGroups: ["extensions.gardener.cloud"]
  resources: ["backupentries/status"]
  verbs: ["patch"]
# The shoot's purpose, recorded for per-purpose retention (only when that is configured).
- apiGroups: ["extensions.gardener.cloud"]
  resources: ["clusters"]
  verbs: ["get"]
# An entry due when it is deleted is purged here: the bucket's type and credentials open the
# store, as for the purge function; list/watch: the function's cache of BackupBuckets and
# BackupCopyPolicies (which buckets a policy selects).
- apiGroups: ["extensions.gardener.cloud"]
  resources: ["backupbuckets"]
  verbs: ["get", "list", "watch"]
# ... and its copies, as for the purge function: which BackupCopyPolicies copied the entry (from
# that cache), and their BackupDestinations (kept with etcdBackupConfig.enabled off, as the
# purge's). The same reads point etcd-backup at a destination while a policy has failed over
# the entry's bucket.
- apiGroups: ["backup.housekeeper.dev"]
  resources: ["backupcopypolicies"]
  verbs: ["list", "watch"]
- apiGroups: ["backup.housekeeper.dev"]
  resources: ["backupdestinations"]
  verbs: ["get"]
# Is the shoot's control-plane namespace there, and is it the entry's shoot's? list/watch: the
# function's cache of namespace metadata.
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get", "list", "watch"]
# patch: the finalizer on spec.secretRef (the answer carries its data) and etcd-backup;
# get/create: etcd-backup (source-etcd-backup); delete: etcd-backup when the entry goes (not on
# migrate); list/watch: the cache of etcd-backup metadata (by name, metadata only).
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
{{- end -}}

{{- define "housekeeper.rules.purge" -}}
# get: re-check the live entry; patch: finalizers.
- apiGroups: ["extensions.gardener.cloud"]
  resources: ["backupentries"]
  verbs: ["get", "patch"]
- apiGroups: ["extensions.gardener.cloud"]
  resources: ["backupentries/status"]
  verbs: ["patch"]
# The bucket's type and credentials open the store (the entry's own secret may be gone); its
# labels and type say which BackupCopyPolicies select it. list/watch: the function's cache of
# BackupBuckets and BackupCopyPolicies.
- apiGroups: ["extensions.gardener.cloud"]
  resources: ["backupbuckets"]
  verbs: ["get", "list", "watch"]
# The entry's copies are purged with it: list/watch: the BackupCopyPolicies that select its
# bucket or list it (that cache); get: their BackupDestinations, opened with their credentials.
# Kept with etcdBackupConfig.enabled off: the CRDs outlive the feature, and copies made while it
# was on are purged with their entries all the same.
- apiGroups: ["backup.housekeeper.dev"]
  resources: ["backupcopypolicies"]
  verbs: ["list", "watch"]
- apiGroups: ["backup.housekeeper.dev"]
  resources: ["backupdestinations"]
  verbs: ["get"]
# get: the bucket's credentials and the destinations' (any namespace); patch: release the
# finalizer on the entry's spec.secretRef.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "patch"]
{{- end -}}

{{- define "housekeeper.rules.schedule" -}}
# get: the live config, drill or copy policy; patch: its finalizer.
- apiGroups: ["backup.housekeeper.dev"]
  resources: ["etcdbackupconfigs", "restoredrills", "backupcopypolicies"]
  verbs: ["get", "patch"]
# The Scheduled condition and observedGeneration.
- apiGroups: ["backup.housekeeper.dev"]
  resources: ["etcdbackupconfigs/status", "restoredrills/status", "backupcopypolicies/status"]
  verbs: ["update"]
{{- end -}}

{{- define "housekeeper.rules.snapshot" -}}
- apiGroups: ["backup.housekeeper.dev"]
  resources: ["etcdbackupconfigs", "backupdestinations"]
  verbs: ["get"]
# The BackupSucceeded condition, the last and the kept backups, the next run.
- apiGroups: ["backup.housekeeper.dev"]
  resources: ["etcdbackupconfigs/status"]
  verbs: ["update"]
# A destination's credentials secret (any namespace) and a config's etcd TLS secret.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- end -}}

{{- define "housekeeper.rules.drill" -}}
# get: the live RestoreDrill a fire names; list: the BackupEntries and EtcdBackupConfigs it
# selects; get: a config's BackupDestination, as the snapshot function opens it, and for a
# drill of the copy the BackupCopyPolicy and its destination; get: the BackupEntry
# `housekeeper drill --entry` names, run with this ServiceAccount (operating.md, Drilling in a seed).
- apiGroups: ["backup.housekeeper.dev"]
  resources: ["restoredrills", "backupdestinations", "backupcopypolicies"]
  verbs: ["get"]
- apiGroups: ["backup.housekeeper.dev"]
  resources: ["etcdbackupconfigs"]
  verbs: ["list"]
# The DrillsSucceeded condition, the results and counts, the last and the next run.
- apiGroups: ["backup.housekeeper.dev"]
  resources: ["restoredrills/status"]
  verbs: ["update"]
- apiGroups: ["extensions.gardener.cloud"]
  resources: ["backupentries"]
  verbs: ["get", "list"]
# The bucket's type and credentials open the store, as for the purge function.
- apiGroups: ["extensions.gardener.cloud"]
  resources: ["backupbuckets"]
  verbs: ["get"]
# get: the bucket's (or a source- entry's own) credentials, a destination's, and with
# drill.liveShootEtcd a shoot's etcd-main CA bundle and client certificate; never written.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- if .Values.drill.liveShootEtcd }}
# drill.liveShootEtcd: a shoot's etcd-main, etcd-druid's Etcd (its client port and TLS secrets).
- apiGroups: ["druid.gardener.cloud"]
  resources: ["etcds"]
  verbs: ["get"]
# The NetworkPolicy that admits the drill's pods to it in the shoot's namespace, applied
# server-side: a patch, authorized as a create of that name when it is not there yet. RBAC
# cannot narrow a ClusterRole to namespaces by label: the name is the narrowing.
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  resourceNames: ["housekeeper-drill-to-etcd-main"]
  verbs: ["create", "patch"]
{{- end }}
{{- end -}}


{{- define "housekeeper.rules.copy" -}}
# get: the live BackupCopyPolicy an event names, its BackupDestination; patch: remove the
# run-now annotation (gardener.cloud/operation) once its run is done.
- apiGroups: ["backup.housekeeper.dev"]
  resources: ["backupcopypolicies"]
  verbs: ["get", "patch"]
- apiGroups: ["backup.housekeeper.dev"]
  resources: ["backupdestinations"]
  verbs: ["get"]
# The CopiesSucceeded and WithinLagObjective conditions, the results and counts, the runs.
- apiGroups: ["backup.housekeeper.dev"]
  resources: ["backupcopypolicies/status"]
  verbs: ["update"]
# list: the BackupBuckets the policy selects and their BackupEntries; get: a bucket's type and
# credentials open its store, as for the purge function.
- apiGroups: ["extensions.gardener.cloud"]
  resources: ["backupbuckets"]
  verbs: ["get", "list"]
# patch: a fail-over, and the return from it, ask each entry's reconcile
# (gardener.cloud/operation), which points its etcd-backup at the destination or back.
- apiGroups: ["extensions.gardener.cloud"]
  resources: ["backupentries"]
  verbs: ["list", "patch"]
# get: the buckets' credentials and the destination's; never written.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- end -}}
