package bridge

import "encoding/json"

// WatchedFileName is where the chart keeps Watched (its files/, byte-equal: infra's tests
// check).
const WatchedFileName = "infra/chart/files/bridge.json"

// WatchedFile is Watched as the chart reads it: {"watched": [...]}.
func WatchedFile() ([]byte, error) {
	data, err := json.MarshalIndent(map[string][]WatchedGroup{"watched": Watched()}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// WatchedGroup is one API group's resources the bridge lists and watches.
type WatchedGroup struct {
	APIGroup  string   `json:"apiGroup"`
	Resources []string `json:"resources"`
}

// Watched is every resource the bridge lists and watches, by API group in the order of kinds:
// each kind's, then the namespaces and secrets its objects refer to (their inputs). The chart
// grants the bridge exactly these: `make registry` writes them into the chart's
// files/bridge.json, which its RBAC template reads.
func Watched() []WatchedGroup {
	var groups []WatchedGroup
	add := func(group, resource string) {
		for i := range groups {
			if groups[i].APIGroup == group {
				groups[i].Resources = append(groups[i].Resources, resource)
				return
			}
		}
		groups = append(groups, WatchedGroup{APIGroup: group, Resources: []string{resource}})
	}
	for _, k := range kinds {
		add(k.gv.Group, k.resource)
	}
	add("", "namespaces")
	add("", "secrets")
	return groups
}
