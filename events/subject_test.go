package events

import (
	"errors"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"testing/quick"
	"unicode"
)

// tokenChars is everything Token may emit: one NATS subject token, no wildcards, no separators.
var tokenChars = regexp.MustCompile(`^[a-z0-9_-]*$`)

func checkToken(t *testing.T, s string) {
	t.Helper()
	tok := Token(s)
	if !tokenChars.MatchString(tok) {
		t.Errorf("Token(%q) = %q has characters outside [a-z0-9_-]", s, tok)
	}
	if strings.ContainsAny(tok, ".*>") || strings.ContainsFunc(tok, unicode.IsSpace) {
		t.Errorf("Token(%q) = %q contains a separator, wildcard or whitespace", s, tok)
	}
	if s != "" && tok == "" {
		t.Errorf("Token(%q) is empty", s)
	}
	back, err := ParseToken(tok)
	if err != nil {
		t.Errorf("ParseToken(Token(%q) = %q): %v", s, tok, err)
	} else if back != s {
		t.Errorf("ParseToken(Token(%q)) = %q", s, back)
	}
}

func TestTokenRoundTrip(t *testing.T) {
	for _, s := range []string{
		"", "a", "shoot--dev--app", "a.b", "a..b", ".", "..", "a_b", "_", "__", "_2e", "a b", "a\tb", "\n",
		"*", ">", "a.*", "a.>", "A", "Shoot.Dev", "ü", "日本.語", "\x00", "\xff\xfe", "%2e", "-", "0",
		"source-shoot--garden--app--5c0f8d4e-2b7a-4e31-9a3c-6d8e1f2a3b4c",
	} {
		checkToken(t, s)
	}
}

// Property: Token/ParseToken round trip for arbitrary strings (testing/quick generates
// arbitrary Unicode), and for strings drawn from the characters that matter.
func TestTokenRoundTripProperty(t *testing.T) {
	roundTrips := func(s string) bool {
		tok := Token(s)
		back, err := ParseToken(tok)
		return err == nil && back == s && tokenChars.MatchString(tok)
	}
	if err := quick.Check(roundTrips, &quick.Config{MaxCount: 5000}); err != nil {
		t.Error(err)
	}
	alphabet := []rune("ab.-_*> \tZ09ü日\x00%")
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		b := make([]rune, r.IntN(20))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if s := string(b); !roundTrips(s) {
			t.Fatalf("no round trip for %q: Token = %q", s, Token(s))
		}
	}
}

// Property: distinct names give distinct tokens.
func TestTokenInjective(t *testing.T) {
	distinct := func(a, b string) bool { return a == b || Token(a) != Token(b) }
	if err := quick.Check(distinct, &quick.Config{MaxCount: 5000}); err != nil {
		t.Error(err)
	}
}

func TestTokenEncoding(t *testing.T) {
	for in, want := range map[string]string{
		"shoot--dev--app": "shoot--dev--app", // DNS labels read as themselves
		"a.b":             "a_2eb",
		"a_b":             "a_5fb",
		"A":               "_41",
		"a b":             "a_20b",
		"*":               "_2a",
		">":               "_3e",
		"ü":               "_c3_bc",
	} {
		if got := Token(in); got != want {
			t.Errorf("Token(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseTokenRejects(t *testing.T) {
	for _, tok := range []string{"_", "_2", "a_", "a_2", "_zz", "_g0", "a_+1", "_-1", "_ 1"} {
		if s, err := ParseToken(tok); err == nil {
			t.Errorf("ParseToken(%q) = %q, want an error", tok, s)
		}
	}
}

// subjectMatches implements NATS subject matching: '*' matches one token, '>' the rest.
func subjectMatches(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, tok := range p {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || (tok != "*" && tok != s[i]) {
			return false
		}
	}
	return len(p) == len(s)
}

func TestSubjectMatcher(t *testing.T) {
	for _, tc := range []struct {
		pattern, subject string
		want             bool
	}{
		{"a.>", "a.b.c", true}, {"a.>", "a", false}, {"a.*", "a.b", true}, {"a.*", "a.b.c", false},
		{"a.b", "a.b", true}, {"a.b", "a.bc", false}, {"a.*.c", "a.b.c", true},
	} {
		if got := subjectMatches(tc.pattern, tc.subject); got != tc.want {
			t.Errorf("subjectMatches(%q, %q) = %v", tc.pattern, tc.subject, got)
		}
	}
}

func TestSubjectForEachType(t *testing.T) {
	const name = "my.entry"
	want := map[string]struct{ subject, filter string }{
		TypeBucketCreated:  {"housekeeper.backupbucket.created.my_2eentry", SubjectBuckets},
		TypeBucketUpdated:  {"housekeeper.backupbucket.updated.my_2eentry", SubjectBuckets},
		TypeBucketDeleting: {"housekeeper.backupbucket.deleting.my_2eentry", SubjectBuckets},
		TypeBucketDeleted:  {"housekeeper.backupbucket.deleted.my_2eentry", SubjectBuckets},
		TypeBucketSynced:   {"housekeeper.backupbucket.synced.my_2eentry", SubjectBuckets},
		TypeEntryCreated:   {"housekeeper.backupentry.created.my_2eentry", SubjectEntries},
		TypeEntryUpdated:   {"housekeeper.backupentry.updated.my_2eentry", SubjectEntries},
		TypeEntryDeleting:  {"housekeeper.backupentry.deleting.my_2eentry", SubjectEntries},
		TypeEntryDeleted:   {"housekeeper.backupentry.deleted.my_2eentry", SubjectEntries},
		TypeEntrySynced:    {"housekeeper.backupentry.synced.my_2eentry", SubjectEntries},
		TypePurgeScheduled: {"housekeeper-audit.purge.scheduled.my_2eentry", "housekeeper-audit.purge.scheduled.*"},
		TypePurgeDue:       {"housekeeper.purge.due.my_2eentry", SubjectPurgesDue},
		TypePurgeCompleted: {"housekeeper-audit.purge.completed.my_2eentry", "housekeeper-audit.purge.completed.*"},
		TypePurgeFailed:    {"housekeeper-audit.purge.failed.my_2eentry", "housekeeper-audit.purge.failed.*"},
		TypePurgeVerify:    {"housekeeper.purge.verify.my_2eentry", "housekeeper.purge.verify.*"},
		TypePurgeVerified:  {"housekeeper-audit.purge.verified.my_2eentry", "housekeeper-audit.purge.verified.*"},

		TypeEtcdBackupConfigCreated:  {"housekeeper.etcdbackupconfig.created.my_2eentry", SubjectEtcdBackupConfigs},
		TypeEtcdBackupConfigUpdated:  {"housekeeper.etcdbackupconfig.updated.my_2eentry", SubjectEtcdBackupConfigs},
		TypeEtcdBackupConfigDeleting: {"housekeeper.etcdbackupconfig.deleting.my_2eentry", SubjectEtcdBackupConfigs},
		TypeEtcdBackupConfigDeleted:  {"housekeeper.etcdbackupconfig.deleted.my_2eentry", SubjectEtcdBackupConfigs},
		TypeEtcdBackupConfigSynced:   {"housekeeper.etcdbackupconfig.synced.my_2eentry", SubjectEtcdBackupConfigs},
		TypeEtcdBackupDue:            {"housekeeper.etcdbackup.due.my_2eentry", SubjectEtcdBackupsDue},

		TypeRestoreDrillCreated:  {"housekeeper.restoredrill.created.my_2eentry", SubjectRestoreDrills},
		TypeRestoreDrillUpdated:  {"housekeeper.restoredrill.updated.my_2eentry", SubjectRestoreDrills},
		TypeRestoreDrillDeleting: {"housekeeper.restoredrill.deleting.my_2eentry", SubjectRestoreDrills},
		TypeRestoreDrillDeleted:  {"housekeeper.restoredrill.deleted.my_2eentry", SubjectRestoreDrills},
		TypeRestoreDrillSynced:   {"housekeeper.restoredrill.synced.my_2eentry", SubjectRestoreDrills},
		TypeDrillDue:             {"housekeeper.drill.due.my_2eentry", SubjectDrillsDue},

		TypeBackupCopyPolicyCreated:  {"housekeeper.backupcopypolicy.created.my_2eentry", SubjectBackupCopyPolicies},
		TypeBackupCopyPolicyUpdated:  {"housekeeper.backupcopypolicy.updated.my_2eentry", SubjectBackupCopyPolicies},
		TypeBackupCopyPolicyDeleting: {"housekeeper.backupcopypolicy.deleting.my_2eentry", SubjectBackupCopyPolicies},
		TypeBackupCopyPolicyDeleted:  {"housekeeper.backupcopypolicy.deleted.my_2eentry", SubjectBackupCopyPolicies},
		TypeBackupCopyPolicySynced:   {"housekeeper.backupcopypolicy.synced.my_2eentry", SubjectBackupCopyPolicies},
		TypeCopyDue:                  {"housekeeper.copy.due.my_2eentry", SubjectCopiesDue},
	}
	if len(Types) != len(want) {
		t.Fatalf("Types has %d types, this test knows %d: add the new ones here", len(Types), len(want))
	}
	seen := map[string]string{}
	for _, typ := range Types {
		w, ok := want[typ]
		if !ok {
			t.Errorf("type %s is not covered by this test", typ)
			continue
		}
		got, err := Subject(typ, name)
		if err != nil {
			t.Errorf("Subject(%s): %v", typ, err)
			continue
		}
		if got != w.subject {
			t.Errorf("Subject(%s, %q) = %q, want %q", typ, name, got, w.subject)
		}
		if n := strings.Count(got, ".") + 1; n != 4 {
			t.Errorf("Subject(%s) = %q has %d tokens, want 4", typ, got, n)
		}
		// Each subject is in one stream: the audit stream's reports, the stream of record's events.
		stream, root := RecordStream, SubjectAll
		if IsAudit(typ) {
			stream, root = AuditStream, SubjectAudit
		}
		if !subjectMatches(root, got) || !subjectMatches(w.filter, got) || StreamOf(got) != stream {
			t.Errorf("%q is not matched by %s and %s, or is not stored in %s (StreamOf: %s)", got, root, w.filter, stream, StreamOf(got))
		}
		if other := map[string]string{SubjectAll: SubjectAudit, SubjectAudit: SubjectAll}[root]; subjectMatches(other, got) {
			t.Errorf("%q is matched by %s as well as %s: two streams would claim it", got, other, root)
		}
		for _, other := range []string{SubjectBuckets, SubjectEntries, SubjectPurgesDue, SubjectPurgeSchedules, SubjectDeadLetters,
			SubjectEtcdBackupConfigs, SubjectEtcdBackupsDue, SubjectEtcdBackupSchedules, SubjectEtcdBackupUnschedules,
			SubjectRestoreDrills, SubjectDrillsDue, SubjectDrillSchedules, SubjectDrillUnschedules,
			SubjectBackupCopyPolicies, SubjectCopiesDue, SubjectCopySchedules, SubjectCopyUnschedules} {
			if other != w.filter && subjectMatches(other, got) {
				t.Errorf("%q is also matched by %s", got, other)
			}
		}
		filter, err := SubjectFilter(typ)
		if err != nil || filter != strings.TrimSuffix(w.subject, "my_2eentry")+"*" {
			t.Errorf("SubjectFilter(%s) = %q, %v", typ, filter, err)
		}
		for _, other := range Types {
			if o, _ := Subject(other, name); subjectMatches(filter, o) != (other == typ) {
				t.Errorf("SubjectFilter(%s) = %q and the subject of %s: match = %v", typ, filter, other, subjectMatches(filter, o))
			}
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%s and %s share subject %s", prev, typ, got)
		}
		seen[got] = typ
		if !IsKnownType(typ) || !strings.HasPrefix(typ, "dev.housekeeper.") || !strings.HasSuffix(typ, ".v1") {
			t.Errorf("type %s is not a known, reverse-DNS, versioned type", typ)
		}
	}
}

func TestSubjectRejects(t *testing.T) {
	if _, err := Subject("dev.housekeeper.backupentry.exploded.v1", "x"); !errors.Is(err, ErrUnknownType) {
		t.Errorf("unknown type: %v, want ErrUnknownType", err)
	}
	if _, err := Subject("", "x"); !errors.Is(err, ErrUnknownType) {
		t.Errorf("empty type: %v, want ErrUnknownType", err)
	}
	if _, err := SubjectFilter("dev.housekeeper.backupentry.exploded.v1"); !errors.Is(err, ErrUnknownType) {
		t.Errorf("SubjectFilter of an unknown type: %v, want ErrUnknownType", err)
	}
	if _, err := Subject(TypeEntryCreated, ""); !errors.Is(err, ErrInvalidEvent) {
		t.Errorf("empty name: %v, want ErrInvalidEvent", err)
	}
}

// Names that are prefixes of one another, or that only differ in characters Token escapes,
// land on distinct subjects, and a subscriber to one never matches another.
func TestSubjectDistinctNames(t *testing.T) {
	names := []string{"a", "a.b", "a.b.c", "ab", "a-b", "a_b", "a_2eb", "a.", ".a", "a..b", "A", "a b", "a*", "a>"}
	subjects := map[string]string{}
	for _, name := range names {
		s, err := Subject(TypeEntryDeleted, name)
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := subjects[s]; dup {
			t.Errorf("%q and %q share subject %q", prev, name, s)
		}
		subjects[s] = name
		if strings.Count(s, ".") != 3 {
			t.Errorf("Subject(%q) = %q: the name is not one token", name, s)
		}
	}
	for s1 := range subjects {
		for s2 := range subjects {
			if s1 != s2 && (subjectMatches(s1, s2) || strings.HasPrefix(s2, s1+".")) {
				t.Errorf("subject %q matches %q", s1, s2)
			}
		}
	}
}

func TestScheduleRedriveAndDeadLetterSubjects(t *testing.T) {
	s := PurgeScheduleSubject("shoot.a")
	if s != "housekeeper.schedule.purge.shoot_2ea" {
		t.Errorf("PurgeScheduleSubject = %q", s)
	}
	if !subjectMatches(SubjectPurgeSchedules, s) || !subjectMatches(SubjectAll, s) {
		t.Errorf("%q is not matched by %s and %s", s, SubjectPurgeSchedules, SubjectAll)
	}
	due, _ := Subject(TypePurgeDue, "shoot.a")
	if s == due || subjectMatches(SubjectPurgesDue, s) || subjectMatches(SubjectPurgeSchedules, due) {
		t.Errorf("schedule holder %q and purge-due subject %q overlap", s, due)
	}
	if PurgeScheduleSubject("a") == PurgeScheduleSubject("a.b") {
		t.Error("two entries share a schedule subject")
	}

	// Redrives stay in the stream of record, on a subject no event type's filter matches.
	rd := RedriveSubject("purge")
	if rd != "housekeeper.redrive.purge" || !subjectMatches(SubjectAll, rd) || RedriveSubject("a.b") == RedriveSubject("a") {
		t.Errorf("RedriveSubject = %q", rd)
	}
	for _, typ := range Types {
		if f, _ := SubjectFilter(typ); subjectMatches(f, rd) {
			t.Errorf("the filter %s of %s matches the redrive subject %s", f, typ, rd)
		}
	}
	for _, f := range []string{SubjectBuckets, SubjectEntries, SubjectPurgesDue, SubjectPurgeSchedules, SubjectDeadLetters} {
		if subjectMatches(f, rd) || subjectMatches(f, SubjectResync) {
			t.Errorf("%s matches a redrive or control subject", f)
		}
	}
	if subjectMatches(SubjectAll, SubjectResync) || subjectMatches(SubjectDeadLetters, SubjectResync) {
		t.Errorf("%s is inside a stream", SubjectResync)
	}

	dl := DeadLetterSubject("purge")
	if dl != "housekeeper-deadletter.purge" || !subjectMatches(SubjectDeadLetters, dl) || subjectMatches(SubjectAll, dl) {
		t.Errorf("DeadLetterSubject = %q: must be in the dead-letter stream only", dl)
	}
	if !subjectMatches(SubjectDeadLetters, DeadLetterSubject("my.function")) || strings.Count(DeadLetterSubject("my.function"), ".") != 1 {
		t.Errorf("DeadLetterSubject(my.function) = %q", DeadLetterSubject("my.function"))
	}
}

// A RestoreDrill's schedule holder and unschedule requests are its own: matched by their
// filters only, never by a due or object event's filter, and distinct per drill.
func TestDrillScheduleSubjects(t *testing.T) {
	s, u := DrillScheduleSubject("drill.a"), DrillUnscheduleSubject("drill.a")
	if s != "housekeeper.schedule.drill.drill_2ea" || u != "housekeeper.unschedule.drill.drill_2ea" {
		t.Errorf("DrillScheduleSubject = %q, DrillUnscheduleSubject = %q", s, u)
	}
	if !subjectMatches(SubjectDrillSchedules, s) || !subjectMatches(SubjectDrillUnschedules, u) ||
		!subjectMatches(SubjectAll, s) || !subjectMatches(SubjectAll, u) {
		t.Errorf("%q and %q are not matched by %s, %s and %s", s, u, SubjectDrillSchedules, SubjectDrillUnschedules, SubjectAll)
	}
	for _, f := range []string{SubjectDrillsDue, SubjectRestoreDrills, SubjectEtcdBackupSchedules, SubjectEtcdBackupUnschedules} {
		if subjectMatches(f, s) || subjectMatches(f, u) {
			t.Errorf("%s matches %q or %q", f, s, u)
		}
	}
	for _, typ := range Types {
		if f, _ := SubjectFilter(typ); subjectMatches(f, s) || subjectMatches(f, u) {
			t.Errorf("the filter %s of %s matches %q or %q", f, typ, s, u)
		}
	}
	if DrillScheduleSubject("a") == DrillScheduleSubject("a.b") {
		t.Error("two drills share a schedule subject")
	}
}

// A BackupCopyPolicy's schedule holder and unschedule requests are its own: matched by their
// filters only, never by a due or object event's filter or a drill's, and distinct per policy.
func TestCopyScheduleSubjects(t *testing.T) {
	s, u := CopyScheduleSubject("copy.a"), CopyUnscheduleSubject("copy.a")
	if s != "housekeeper.schedule.copy.copy_2ea" || u != "housekeeper.unschedule.copy.copy_2ea" {
		t.Errorf("CopyScheduleSubject = %q, CopyUnscheduleSubject = %q", s, u)
	}
	if !subjectMatches(SubjectCopySchedules, s) || !subjectMatches(SubjectCopyUnschedules, u) ||
		!subjectMatches(SubjectAll, s) || !subjectMatches(SubjectAll, u) {
		t.Errorf("%q and %q are not matched by %s, %s and %s", s, u, SubjectCopySchedules, SubjectCopyUnschedules, SubjectAll)
	}
	for _, f := range []string{SubjectCopiesDue, SubjectBackupCopyPolicies, SubjectDrillSchedules, SubjectDrillUnschedules,
		SubjectEtcdBackupSchedules, SubjectEtcdBackupUnschedules} {
		if subjectMatches(f, s) || subjectMatches(f, u) {
			t.Errorf("%s matches %q or %q", f, s, u)
		}
	}
	for _, typ := range Types {
		if f, _ := SubjectFilter(typ); subjectMatches(f, s) || subjectMatches(f, u) {
			t.Errorf("the filter %s of %s matches %q or %q", f, typ, s, u)
		}
	}
	if CopyScheduleSubject("a") == CopyScheduleSubject("a.b") {
		t.Error("two policies share a schedule subject")
	}
}
