package etcdbackup

import (
	"fmt"
	"slices"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// expired returns, of the keys listed under prefix, the backups beyond the newest keep, oldest
// first, and the kept ones newest first. Keys that are not backups of this config are in
// neither: they are never deleted.
func expired(prefix string, keys []string, keep int) (remove []string, kept []backupv1alpha1.BackupReference, err error) {
	if keep < 1 {
		return nil, nil, fmt.Errorf("keep %d: at least one backup is kept", keep)
	}
	var backups []string
	for _, k := range keys {
		if _, ok := destination.ConfigBackupTime(prefix, k); ok {
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
		t, _ := destination.ConfigBackupTime(prefix, backups[i])
		kept = append(kept, backupv1alpha1.BackupReference{Key: backups[i], Time: kube.Time(t)})
	}
	return remove, kept, nil
}
