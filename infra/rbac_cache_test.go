package infra_test

import (
	"context"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The chart's roles let the functions' caches list and watch every kind they hold, in every
// namespace. A cache that may list but not watch syncs once and then holds its first list
// forever without a word (its watch errors go to klog), so TestRBACIsEnough, whose functions
// read live what their caches lack, cannot tell.
func TestRBACLetsTheCachesWatch(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	admin := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	applyChartRBAC(ctx, t, admin)
	for fn, caches := range map[string][]cache.Options{
		entry.Definition.Name:      {entry.MetadataCacheOptions(), entry.CopiesCacheOptions()},
		entry.PurgeDefinition.Name: {entry.CopiesCacheOptions()},
	} {
		for _, opts := range caches {
			for obj := range opts.ByObject {
				gvk, err := apiutil.GVKForObject(obj, kube.Scheme)
				if err != nil {
					t.Fatal(err)
				}
				m, err := admin.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
				if err != nil {
					t.Fatal(err)
				}
				for _, verb := range []string{"list", "watch"} {
					review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
						User:               "system:serviceaccount:" + namespace + ":housekeeper-" + fn,
						Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
						ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: m.Resource.Group, Resource: m.Resource.Resource},
					}}
					if err := admin.Create(ctx, review); err != nil {
						t.Fatal(err)
					}
					if !review.Status.Allowed {
						t.Errorf("the %s function may not %s %s, which its cache holds: %s", fn, verb, m.Resource.Resource, review.Status.Reason)
					}
				}
			}
		}
	}
}
