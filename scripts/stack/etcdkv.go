package stack

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Keys are written and read through etcd's JSON gRPC gateway (/v3/kv/...), which etcd serves
// on its client URL: no etcd client library for the 3.5 server.

// Put writes key=value and returns the store's revision after the write.
func (e *Etcd) Put(ctx context.Context, key, value string) (int64, error) {
	var resp struct {
		Header struct {
			Revision int64 `json:"revision,string"`
		} `json:"header"`
	}
	err := e.call(ctx, "/v3/kv/put", map[string]string{
		"key":   base64.StdEncoding.EncodeToString([]byte(key)),
		"value": base64.StdEncoding.EncodeToString([]byte(value)),
	}, &resp)
	return resp.Header.Revision, err
}

// Get returns every key with prefix and its value.
func (e *Etcd) Get(ctx context.Context, prefix string) (map[string]string, error) {
	var resp struct {
		KVs []struct{ Key, Value []byte } `json:"kvs"` // base64 in JSON, decoded by encoding/json
	}
	err := e.call(ctx, "/v3/kv/range", map[string]string{
		"key":       base64.StdEncoding.EncodeToString([]byte(prefix)),
		"range_end": base64.StdEncoding.EncodeToString(prefixEnd(prefix)),
	}, &resp)
	if err != nil {
		return nil, err
	}
	kvs := make(map[string]string, len(resp.KVs))
	for _, kv := range resp.KVs {
		kvs[string(kv.Key)] = string(kv.Value)
	}
	return kvs, nil
}

// prefixEnd is the range end that selects every key starting with prefix.
func prefixEnd(prefix string) []byte {
	end := []byte(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0}
}

func (e *Etcd) call(ctx context.Context, path string, body any, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.ClientURL+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, resp.Status, bytes.TrimSpace(answer))
	}
	return json.Unmarshal(answer, out)
}

// waitHealthy polls etcd's /health until it says true.
func (e *Etcd) waitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		if e.proc.Exited() {
			return fmt.Errorf("etcd %s exited before it was healthy (see its log)", e.Name)
		}
		resp, err := http.Get(e.ClientURL + "/health")
		if err == nil {
			var h struct{ Health string }
			_ = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if h.Health == "true" {
				return nil
			}
			last = "health " + h.Health
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("etcd %s not healthy within %s: %s", e.Name, timeout, last)
}
