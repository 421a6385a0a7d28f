package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of housekeeper's backup types.
const GroupName = "backup.housekeeper.dev"

// SchemeGroupVersion is the group and version of this package's types.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme registers BackupDestination, EtcdBackupConfig, RestoreDrill and
	// BackupCopyPolicy (and their lists).
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion,
		&BackupDestination{}, &BackupDestinationList{},
		&EtcdBackupConfig{}, &EtcdBackupConfigList{},
		&RestoreDrill{}, &RestoreDrillList{},
		&BackupCopyPolicy{}, &BackupCopyPolicyList{},
	)
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
