package etcdbackup

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// keyTimeLayout names backups by their fire time, UTC, to the second: lexical order is time
// order.
const keyTimeLayout = "20060102T150405Z"

// keySuffix ends every backup key.
const keySuffix = ".db"

var backupName = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z\.db$`)

// Prefix is where a config's backups live in its destination's bucket: "<namespace>/<name>/",
// with the trailing slash, so that config "a" never reaches into config "ab"'s backups.
func Prefix(cfg *backupv1alpha1.EtcdBackupConfig) string {
	return cfg.Namespace + "/" + cfg.Name + "/"
}

// Key is the key of the backup taken for the fire at t.
func Key(cfg *backupv1alpha1.EtcdBackupConfig, t time.Time) string {
	return Prefix(cfg) + t.UTC().Format(keyTimeLayout) + keySuffix
}

// BackupTime parses the fire time back from a key under a config's Prefix; ok is false for any
// key that is not exactly a backup of that config (a temporary upload, someone else's object).
func BackupTime(prefix, key string) (time.Time, bool) {
	rest, found := strings.CutPrefix(key, prefix)
	if !found || !backupName.MatchString(rest) {
		return time.Time{}, false
	}
	t, err := time.Parse(keyTimeLayout, strings.TrimSuffix(rest, keySuffix))
	return t, err == nil
}

// expired returns, of the keys listed under prefix, the backups beyond the newest keep, oldest
// first, and the kept ones newest first. Keys that are not backups of this config are in
// neither: they are never deleted.
func expired(prefix string, keys []string, keep int) (remove []string, kept []backupv1alpha1.BackupReference, err error) {
	if keep < 1 {
		return nil, nil, fmt.Errorf("keep %d: at least one backup is kept", keep)
	}
	var backups []string
	for _, k := range keys {
		if _, ok := BackupTime(prefix, k); ok {
			if err := objectstore.ValidateKey(k); err != nil {
				return nil, nil, err
			}
			backups = append(backups, k)
		}
	}
	slices.Sort(backups)
	backups = slices.Compact(backups)
	if n := len(backups) - keep; n > 0 {
		remove, backups = backups[:n], backups[n:]
	}
	for i := len(backups) - 1; i >= 0; i-- {
		t, _ := BackupTime(prefix, backups[i])
		kept = append(kept, backupv1alpha1.BackupReference{Key: backups[i], Time: kube.Time(t)})
	}
	return remove, kept, nil
}
