package kube

import "time"

// LookAgainEvery makes StartCache look for a kind not served every d, for the rest of the
// package's tests.
func LookAgainEvery(d time.Duration) { notServedRetry = d }
