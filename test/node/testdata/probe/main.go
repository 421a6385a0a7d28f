// Command probe is the workload of test/node: a static HTTP server (serve, the default) and a
// client (fetch). It uses only the standard library, and reaches the API server the way
// client-go's in-cluster config does: KUBERNETES_SERVICE_HOST and _PORT, the service account's
// token and the cluster's CA from /var/run/secrets/kubernetes.io/serviceaccount.
//
//	probe [serve]            :8080 — /healthz, / (hello from $POD_NAME), /whoami (the API
//	                         server's SelfSubjectReview of the pod's token), /fetch?url=,
//	                         /resolve?name=[&tcp=1] (the addresses of name, asked over UDP or TCP)
//	probe fetch URL WANT     GET URL; exit 0 if its body contains WANT
//
// Every request of /whoami and /fetch is a new connection: a NetworkPolicy judges connections
// when they open.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

const sa = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "fetch" {
		if len(os.Args) != 4 {
			fmt.Fprintln(os.Stderr, "usage: probe fetch URL WANT")
			os.Exit(2)
		}
		os.Exit(fetchMain(os.Args[2], os.Args[3]))
	}
	serve()
}

// fetchMain says how it went on stdout and in the termination message (/dev/termination-log),
// which the pod's status shows after the pod is gone from the node.
func fetchMain(url, want string) int {
	client := &http.Client{Timeout: 5 * time.Second}
	start := time.Now()
	var last string
	for i := 1; i <= 20; i++ {
		body, err := get(client, url)
		if err == nil && strings.Contains(body, want) {
			return report(0, "fetched %s in %s (attempt %d): %s", url, time.Since(start).Round(time.Millisecond), i, strings.TrimSpace(body))
		}
		last = fmt.Sprintf("body %q, error %v", body, err)
		time.Sleep(500 * time.Millisecond)
	}
	return report(1, "fetching %s: want %q, got %s", url, want, last)
}

func report(code int, format string, args ...any) int {
	msg := fmt.Sprintf(format, args...)
	fmt.Println(msg)
	_ = os.WriteFile("/dev/termination-log", []byte(msg), 0o644)
	return code
}

func get(client *http.Client, url string) (string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("%s", resp.Status)
	}
	return string(b), err
}

func serve() {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s\n", os.Getenv("POD_NAME"))
	})
	mux.HandleFunc("/whoami", func(w http.ResponseWriter, r *http.Request) {
		user, err := whoami()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		fmt.Fprintln(w, user)
	})
	mux.HandleFunc("/fetch", func(w http.ResponseWriter, r *http.Request) {
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		body, err := get(client, r.URL.Query().Get("url"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		fmt.Fprint(w, body)
	})
	mux.HandleFunc("/resolve", func(w http.ResponseWriter, r *http.Request) {
		resolver := &net.Resolver{PreferGo: true}
		if r.URL.Query().Get("tcp") != "" {
			resolver.Dial = func(ctx context.Context, _, address string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", address)
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), 4*time.Second)
		defer cancel()
		addrs, err := resolver.LookupHost(ctx, r.URL.Query().Get("name"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		fmt.Fprintln(w, strings.Join(addrs, " "))
	})
	fmt.Println("serving on :8080")
	if err := http.ListenAndServe(":8080", mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// whoami asks the API server who the pod's token is (a SelfSubjectReview, which every
// authenticated user may create), through the in-cluster address, verifying the API server's
// certificate with the cluster's CA.
func whoami() (string, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return "", fmt.Errorf("KUBERNETES_SERVICE_HOST or _PORT not set")
	}
	token, err := os.ReadFile(sa + "/token")
	if err != nil {
		return "", err
	}
	ca, err := os.ReadFile(sa + "/ca.crt")
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return "", fmt.Errorf("no certificate in %s/ca.crt", sa)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
	req, err := http.NewRequest(http.MethodPost, "https://"+net.JoinHostPort(host, port)+"/apis/authentication.k8s.io/v1/selfsubjectreviews",
		bytes.NewBufferString(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, body)
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &review); err != nil {
		return "", err
	}
	return review.Status.UserInfo.Username, nil
}
