// Package destination is housekeeper's BackupDestinations, for every function that uses one:
// how one is opened with its credentials (Open), which BackupBuckets a BackupCopyPolicy selects
// (Select), and which destinations hold copies of an entry's backups (CopiesOf), so that the
// copy function that writes them and the purge that deletes them with their entry agree. It
// imports no function: the functions import it.
package destination
