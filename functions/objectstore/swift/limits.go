package swift

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// bulkLimit is the most names one bulk delete of this store holds (the Batcher's Limit): what
// the proxy's /info says, read at the first bulk delete and kept; 0 when the proxy has no bulk
// delete.
func (s *store) bulkLimit(ctx context.Context) int {
	s.limitMu.Lock()
	defer s.limitMu.Unlock()
	if s.limitKnown {
		return s.limit
	}
	c, err := s.objectStorage(ctx)
	if err != nil {
		return s.opts.batchSize // the delete meets the same error and reports it
	}
	n := readBulkLimit(ctx, s.http, c.Endpoint, s.opts.batchSize)
	if ctx.Err() == nil {
		s.limit, s.limitKnown = n, true
	}
	return n
}

// lowerBulkLimit keeps a limit the proxy named in refusing a bulk delete as too large.
func (s *store) lowerBulkLimit(n int) {
	s.limitMu.Lock()
	defer s.limitMu.Unlock()
	if !s.limitKnown || n < s.limit {
		s.limit, s.limitKnown = n, true
	}
}

// readBulkLimit reads the proxy's /info (its capabilities, public: no token is sent) for the
// most names one bulk delete may hold, at most ceiling: bulk_delete's max_deletes_per_request,
// and its max_failed_deletes too — a bulk delete that meets that many failures stops and leaves
// the names after them unanswered, which a batch no larger never does.
//
// A proxy whose /info lists no bulk_delete has none: 0, one delete per object. One whose /info
// cannot be read or says no number gets ceiling (MaxBulkDelete): Swift's default is 10,000,
// and a proxy that takes fewer refuses a larger bulk delete naming its maximum, which
// bulkDelete heeds.
func readBulkLimit(ctx context.Context, client *http.Client, endpoint string, ceiling int) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, infoURL(endpoint), nil)
	if err != nil {
		return ceiling
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return ceiling
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ceiling // 401/403: the operator hides /info (expose_info = false); 404: no Swift /info
	}
	var info struct {
		Swift      json.RawMessage `json:"swift"`
		BulkDelete *struct {
			MaxDeletesPerRequest int `json:"max_deletes_per_request"`
			MaxFailedDeletes     int `json:"max_failed_deletes"`
		} `json:"bulk_delete"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info); err != nil || info.Swift == nil {
		return ceiling // not Swift's answer: its silence on bulk_delete says nothing
	}
	if info.BulkDelete == nil {
		return 0
	}
	n := ceiling
	for _, most := range []int{info.BulkDelete.MaxDeletesPerRequest, info.BulkDelete.MaxFailedDeletes} {
		if most > 0 {
			n = min(n, most)
		}
	}
	return n
}

// infoURL is the /info beside the API's version in endpoint, the object-store endpoint of the
// catalog (https://swift.example.com/v1/AUTH_project → https://swift.example.com/info; a proxy
// under a path keeps it).
func infoURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return endpoint
	}
	path := strings.TrimSuffix(u.Path, "/") + "/"
	if i := strings.LastIndex(path, "/v1/"); i >= 0 {
		path = path[:i]
	} else {
		path = ""
	}
	u.Path, u.RawPath, u.RawQuery, u.Fragment = path+"/info", "", "", ""
	return u.String()
}

// maxDeletesRefusal is the bulk middleware's answer to more names than it takes.
var maxDeletesRefusal = regexp.MustCompile(`Maximum Bulk Deletes: (\d+) per request`)

// refusedMax is the maximum a refusal of a bulk delete as too large names; 0 for none.
func refusedMax(status, body string) int {
	if !strings.HasPrefix(status, "413") {
		return 0
	}
	m := maxDeletesRefusal.FindStringSubmatch(body)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0
	}
	return n
}
