package events

import (
	"fmt"
	"strconv"
	"strings"
)

// NATS subjects. Every event of type dev.housekeeper.<group>.<op>.v1 about object <name> is
// published on housekeeper.<group>.<op>.<token(name)>, so consumers filter by kind and
// operation with wildcards.
const (
	subjectRoot = "housekeeper"
	// auditRoot is the root of the audit stream's subjects, deadLetterRoot the dead letters'.
	auditRoot      = "housekeeper-audit"
	deadLetterRoot = "housekeeper-deadletter"

	// SubjectAll matches every event of the stream of record.
	SubjectAll = subjectRoot + ".>"
	// SubjectBuckets matches every BackupBucket event.
	SubjectBuckets = subjectRoot + ".backupbucket.>"
	// SubjectEntries matches every BackupEntry event.
	SubjectEntries = subjectRoot + ".backupentry.>"
	// SubjectPurgesDue matches the purge-due events fired by the server's scheduler.
	SubjectPurgesDue = subjectRoot + ".purge.due.>"
	// SubjectPurgeSchedules matches the schedule holders of pending purges.
	SubjectPurgeSchedules = subjectRoot + ".schedule.purge.*"

	// SubjectEtcdBackupConfigs matches every EtcdBackupConfig event.
	SubjectEtcdBackupConfigs = subjectRoot + ".etcdbackupconfig.>"
	// SubjectEtcdBackupsDue matches the backup-due events fired by EtcdBackupConfig schedules.
	SubjectEtcdBackupsDue = subjectRoot + ".etcdbackup.due.>"
	// SubjectEtcdBackupSchedules matches the schedule holders of EtcdBackupConfigs.
	SubjectEtcdBackupSchedules = subjectRoot + ".schedule.etcdbackup.*"
	// SubjectEtcdBackupUnschedules matches the requests to remove those schedules.
	SubjectEtcdBackupUnschedules = subjectRoot + ".unschedule.etcdbackup.*"

	// SubjectRestoreDrills matches every RestoreDrill event.
	SubjectRestoreDrills = subjectRoot + ".restoredrill.>"
	// SubjectDrillsDue matches the drill-due events fired by RestoreDrill schedules.
	SubjectDrillsDue = subjectRoot + ".drill.due.>"
	// SubjectDrillSchedules matches the schedule holders of RestoreDrills.
	SubjectDrillSchedules = subjectRoot + ".schedule.drill.*"
	// SubjectDrillUnschedules matches the requests to remove those schedules.
	SubjectDrillUnschedules = subjectRoot + ".unschedule.drill.*"

	// SubjectBackupCopyPolicies matches every BackupCopyPolicy event.
	SubjectBackupCopyPolicies = subjectRoot + ".backupcopypolicy.>"
	// SubjectCopiesDue matches the copy-due events fired by BackupCopyPolicy schedules.
	SubjectCopiesDue = subjectRoot + ".copy.due.>"
	// SubjectCopySchedules matches the schedule holders of BackupCopyPolicies.
	SubjectCopySchedules = subjectRoot + ".schedule.copy.*"
	// SubjectCopyUnschedules matches the requests to remove those schedules.
	SubjectCopyUnschedules = subjectRoot + ".unschedule.copy.*"

	// SubjectDeadLetters matches every dead letter; one subject per function below it.
	SubjectDeadLetters = deadLetterRoot + ".>"
	// SubjectAudit matches every report of the audit stream (IsAudit).
	SubjectAudit = auditRoot + ".>"

	// SubjectResync is a core NATS request subject (outside every stream): the bridge leader
	// answers it by announcing every object again.
	SubjectResync = "housekeeper-control.resync"
)

// Subject returns the subject an event of eventType about the named object is published on.
func Subject(eventType, name string) (string, error) {
	if !IsKnownType(eventType) {
		return "", fmt.Errorf("%w: %q", ErrUnknownType, eventType)
	}
	if name == "" {
		return "", fmt.Errorf("%w: empty object name", ErrInvalidEvent)
	}
	filter, _ := SubjectFilter(eventType)
	return strings.TrimSuffix(filter, "*") + Token(name), nil
}

// SubjectFilters returns the filter of each of eventTypes, which must be known types.
func SubjectFilters(eventTypes ...string) []string {
	filters := make([]string, len(eventTypes))
	for i, t := range eventTypes {
		f, err := SubjectFilter(t)
		if err != nil {
			panic(err)
		}
		filters[i] = f
	}
	return filters
}

// SubjectFilter returns the filter matching every event of eventType, whatever its object.
func SubjectFilter(eventType string) (string, error) {
	if !IsKnownType(eventType) {
		return "", fmt.Errorf("%w: %q", ErrUnknownType, eventType)
	}
	root := subjectRoot
	if IsAudit(eventType) {
		root = auditRoot
	}
	return root + "." + strings.TrimSuffix(strings.TrimPrefix(eventType, typePrefix), ".v1") + ".*", nil
}

// RedriveSubject carries events re-delivered to one function only (replay, dead-letter
// retry): only that function's consumer filters on it.
func RedriveSubject(function string) string {
	return subjectRoot + ".redrive." + Token(function)
}

// PurgeScheduleSubject holds the one pending purge schedule of the named entry: publishing to
// it again replaces the schedule, purging it cancels the schedule.
func PurgeScheduleSubject(entryName string) string {
	return subjectRoot + ".schedule.purge." + Token(entryName)
}

// EtcdBackupScheduleSubject holds the one schedule of the EtcdBackupConfig namespace/name
// (a cron, an interval, or a single "@at"): publishing to it again replaces the schedule,
// purging it removes the schedule.
func EtcdBackupScheduleSubject(namespace, name string) string {
	return subjectRoot + ".schedule.etcdbackup." + Token(namespace+"/"+name)
}

// EtcdBackupUnscheduleSubject is where the schedule function asks the server to remove the
// schedule of the EtcdBackupConfig namespace/name (a message with Nats-Schedule-Next: purge);
// it stays in the stream of record as the trace of that removal. No consumer reads it.
func EtcdBackupUnscheduleSubject(namespace, name string) string {
	return subjectRoot + ".unschedule.etcdbackup." + Token(namespace+"/"+name)
}

// DrillScheduleSubject holds the one schedule of the named RestoreDrill (a cron or an
// interval): publishing to it again replaces the schedule, purging it removes the schedule.
func DrillScheduleSubject(name string) string {
	return subjectRoot + ".schedule.drill." + Token(name)
}

// DrillUnscheduleSubject is where the schedule function asks the server to remove the schedule
// of the named RestoreDrill (a message with Nats-Schedule-Next: purge); it stays in the stream
// of record as the trace of that removal. No consumer reads it.
func DrillUnscheduleSubject(name string) string {
	return subjectRoot + ".unschedule.drill." + Token(name)
}

// CopyScheduleSubject holds the one schedule of the named BackupCopyPolicy (a cron or an
// interval): publishing to it again replaces the schedule, purging it removes the schedule.
func CopyScheduleSubject(name string) string {
	return subjectRoot + ".schedule.copy." + Token(name)
}

// CopyUnscheduleSubject is where the schedule function asks the server to remove the schedule
// of the named BackupCopyPolicy (a message with Nats-Schedule-Next: purge); it stays in the
// stream of record as the trace of that removal. No consumer reads it.
func CopyUnscheduleSubject(name string) string {
	return subjectRoot + ".unschedule.copy." + Token(name)
}

// RetryScheduleSubject holds the one pending retry of an event (by id) for a function.
func RetryScheduleSubject(function, eventID string) string {
	return subjectRoot + ".schedule.retry." + Token(function) + "." + Token(eventID)
}

// RetryScheduleFilter matches the schedule holders of every pending retry of function.
func RetryScheduleFilter(function string) string {
	return subjectRoot + ".schedule.retry." + Token(function) + ".*"
}

// DeadLetterSubject is where a function's dead letters go.
func DeadLetterSubject(function string) string {
	return deadLetterRoot + "." + Token(function)
}

// Token encodes s as a single NATS subject token. Kubernetes names may contain dots, which
// separate tokens; characters outside [a-z0-9-] become _xx (hex), so the encoding is
// reversible and plain DNS labels read as themselves.
func Token(s string) string {
	if !strings.ContainsFunc(s, needsEscape) {
		return s // the common case, without a copy
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !needsEscape(rune(c)) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "_%02x", c)
	}
	return b.String()
}

func needsEscape(c rune) bool {
	return !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-')
}

// ParseToken reverses Token.
func ParseToken(token string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(token); i++ {
		c := token[i]
		if c != '_' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(token) {
			return "", fmt.Errorf("subject token %q: truncated escape at %d", token, i)
		}
		v, err := strconv.ParseUint(token[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("subject token %q: bad escape at %d", token, i)
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), nil
}
