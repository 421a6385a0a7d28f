// Package gardener holds the rules of Gardener's extension contract for backups that every
// housekeeper component follows: names, annotations, finalizers and the status protocol.
package gardener

import "strings"

// SourcePrefix marks the BackupEntry of the source seed during control-plane migration.
const SourcePrefix = "source-"

// EntryNamespace is the shoot's control-plane namespace for a BackupEntry: the entry name
// (shoot--<project>--<shoot>--<uid>) without the source- prefix and without its last --<uid>
// token.
func EntryNamespace(entryName string) string {
	name := strings.TrimPrefix(entryName, SourcePrefix)
	if i := strings.LastIndex(name, "--"); i > 0 {
		return name[:i]
	}
	return name
}

// EntryPrefix is the object-store prefix holding a BackupEntry's backups: the entry name
// without source-, with a trailing slash, so that shoot--a--b--1 never matches shoot--a--b--10/.
func EntryPrefix(entryName string) string {
	return strings.TrimPrefix(entryName, SourcePrefix) + "/"
}
