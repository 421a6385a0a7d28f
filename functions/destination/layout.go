// The layout of an EtcdBackupConfig's backups in its BackupDestination: the snapshot function
// writes and rotates them, the drill reads them.

package destination

import (
	"regexp"
	"strings"
	"time"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
)

// keyTimeLayout names backups by their fire time, UTC, to the second: lexical order is time
// order.
const keyTimeLayout = "20060102T150405Z"

// keySuffix ends every backup key.
const keySuffix = ".db"

var backupName = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z\.db$`)

// ConfigPrefix is where a config's backups live in its destination's bucket: "<namespace>/<name>/",
// with the trailing slash, so that config "a" never reaches into config "ab"'s backups.
func ConfigPrefix(cfg *backupv1alpha1.EtcdBackupConfig) string {
	return cfg.Namespace + "/" + cfg.Name + "/"
}

// ConfigKey is the key of the backup taken for the fire at t.
func ConfigKey(cfg *backupv1alpha1.EtcdBackupConfig, t time.Time) string {
	return ConfigPrefix(cfg) + t.UTC().Format(keyTimeLayout) + keySuffix
}

// ConfigBackupTime parses the fire time back from a key under a config's ConfigPrefix; ok is false for any
// key that is not exactly a backup of that config (a temporary upload, someone else's object).
func ConfigBackupTime(prefix, key string) (time.Time, bool) {
	rest, found := strings.CutPrefix(key, prefix)
	if !found || !backupName.MatchString(rest) {
		return time.Time{}, false
	}
	t, err := time.Parse(keyTimeLayout, strings.TrimSuffix(rest, keySuffix))
	return t, err == nil
}
