package stack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The stack's Keystone: its bootstrap admin (scripts/install-swift.sh), and the domain, project
// and user the BackupBuckets' credentials name (development values; not secrets).
const (
	KeystoneAdminPassword = "housekeeper-local-keystone"
	SwiftDomain           = "housekeeper"
	SwiftProject          = "backups"
	SwiftUser             = "etcd-backup"
	SwiftPassword         = "housekeeper-local-swift"
	SwiftRegion           = "RegionOne"
)

// SwiftMaxDeletesPerRequest is the proxy's bulk delete limit (its /info shows it): below
// Swift's default of 10,000 and housekeeper's own 1,000, so that a test shows which one a bulk
// delete heeds.
const SwiftMaxDeletesPerRequest = 100

// Swift is a running OpenStack Swift — proxy, account, container and object servers on one
// single-replica ring, memcached — behind a running Keystone (v3, under uwsgi), all on free
// loopback ports. The proxy authenticates with Keystone's tokens (keystonemiddleware) and is
// in Keystone's catalog as the object-store of SwiftRegion. The user SwiftUser of domain
// SwiftDomain is a member of project SwiftProject, and has an application credential.
type Swift struct {
	// AuthURL is Keystone's v3 endpoint; ProxyURL the proxy's base URL.
	AuthURL, ProxyURL string
	// ApplicationCredentialID and ApplicationCredentialSecret are SwiftUser's application
	// credential (made at start).
	ApplicationCredentialID, ApplicationCredentialSecret string
	Dir                                                  string

	procs []*Process
}

// KeystoneDir is the Keystone database prepared by scripts/install-swift.sh for the installed
// Keystone.
func KeystoneDir() (string, error) {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "python3-keystone").Output()
	if err != nil {
		return "", fmt.Errorf("keystone %w: run `make tools` (scripts/install-swift.sh)", ErrNotInstalled)
	}
	version := strings.NewReplacer(":", "-", "~", "-", "+", "-").Replace(string(out))
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "swift", "keystone-"+version)
	if _, err := os.Stat(filepath.Join(dir, "keystone.db")); err != nil {
		return "", fmt.Errorf("keystone database %w in %s: run `make tools` (scripts/install-swift.sh)", ErrNotInstalled, dir)
	}
	return dir, nil
}

// StartSwift starts Keystone and Swift with their data and configuration under dir (made
// afresh), writing each server's log to logs(name). As OnFreePort, it tries up to three times,
// each with ports free when it starts: the six servers' ports are written into the
// configuration and rings before the servers bind them, and another test can take one between.
func StartSwift(dir string, logs func(name string) io.Writer) (*Swift, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := startSwift(dir, logs)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startSwift(dir string, logs func(name string) io.Writer) (*Swift, error) {
	template, err := KeystoneDir()
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	for _, d := range []string{"etc", "srv/node/d1", "keystone"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	ports := map[string]int{}
	for _, name := range []string{"memcached", "object", "container", "account", "keystone", "proxy"} {
		if ports[name], err = FreePort(); err != nil {
			return nil, err
		}
	}
	s := &Swift{
		AuthURL:  fmt.Sprintf("http://127.0.0.1:%d/v3", ports["keystone"]),
		ProxyURL: fmt.Sprintf("http://127.0.0.1:%d", ports["proxy"]),
		Dir:      dir,
	}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	if err := s.startKeystone(template, ports["keystone"], logs("keystone")); err != nil {
		return nil, err
	}
	if err := writeSwiftConfig(dir, ports); err != nil {
		return nil, err
	}
	if err := buildRings(filepath.Join(dir, "etc"), ports); err != nil {
		return nil, err
	}
	memcached := exec.Command("memcached", "-u", "nobody", "-l", "127.0.0.1", "-p", strconv.Itoa(ports["memcached"]), "-m", "64")
	if err := s.start("memcached", memcached, ports["memcached"], logs("memcached")); err != nil {
		return nil, err
	}
	for _, server := range []string{"account", "container", "object", "proxy"} {
		cmd := exec.Command("/usr/bin/swift-"+server+"-server", filepath.Join(dir, "etc", server+"-server.conf"), "--verbose")
		if err := s.start("swift-"+server+"-server", cmd, ports[server], logs("swift-"+server)); err != nil {
			return nil, err
		}
	}
	healthy := func() (bool, string, error) {
		if err := httpOK(s.ProxyURL + "/healthcheck"); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	}
	if err := Poll(60*time.Second, 100*time.Millisecond, "the Swift proxy's health check", healthy); err != nil {
		return nil, err
	}
	if err := s.register(); err != nil {
		return nil, fmt.Errorf("keystone: %w", err)
	}
	ok = true
	return s, nil
}

// start starts a server and waits until it listens on port.
func (s *Swift) start(name string, cmd *exec.Cmd, port int, logs io.Writer) error {
	cmd.Stdout, cmd.Stderr = logs, logs
	proc, err := StartProcess(cmd)
	if err != nil {
		return err
	}
	s.procs = append(s.procs, proc)
	return proc.AwaitListening(name, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

// startKeystone copies the prepared database and keys and serves Keystone under uwsgi.
func (s *Swift) startKeystone(template string, port int, logs io.Writer) error {
	kdir := filepath.Join(s.Dir, "keystone")
	if err := exec.Command("cp", "-a", template+"/.", kdir).Run(); err != nil {
		return fmt.Errorf("copying the keystone database: %w", err)
	}
	conf := filepath.Join(kdir, "keystone.conf")
	err := os.WriteFile(conf, fmt.Appendf(nil, `[DEFAULT]
use_stderr = true
[database]
connection = sqlite:///%[1]s/keystone.db
[token]
provider = fernet
[fernet_tokens]
key_repository = %[1]s/fernet-keys
[fernet_receipts]
key_repository = %[1]s/fernet-receipts
[credential]
key_repository = %[1]s/credential-keys
[cache]
enabled = false
[identity]
# Hashing a development password at the default cost takes a third of a second a login.
password_hash_rounds = 4
`, kdir), 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("uwsgi", "--plugin", "python3", "--http-socket", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		"--wsgi-file", "/usr/bin/keystone-wsgi-public", "--master", "--processes", "2", "--threads", "1", "--die-on-term",
		// uwsgi's http-socket closes every connection after its answer without saying so; a
		// client that reuses it gets a reset.
		"--add-header", "Connection: close",
		"--env", "OS_KEYSTONE_CONFIG_FILES="+conf)
	if err := s.start("keystone", cmd, port, logs); err != nil {
		return err
	}
	ready := func() (bool, string, error) {
		if err := httpOK(s.AuthURL); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	}
	return Poll(60*time.Second, 100*time.Millisecond, "keystone", ready)
}

func writeSwiftConfig(dir string, ports map[string]int) error {
	etc := filepath.Join(dir, "etc")
	// fallocate_reserve 0: the servers share the host's disk, which may be large, thin and
	// nearly full; Swift's default reserve of 1% of its size answers 507 to every write then.
	common := func(name string, port int) string {
		return fmt.Sprintf("[DEFAULT]\nbind_ip = 127.0.0.1\nbind_port = %d\nworkers = 0\nuser = root\nswift_dir = %s\ndevices = %s\nmount_check = false\ndisable_fallocate = true\nfallocate_reserve = 0\nlog_name = %s\n",
			port, etc, filepath.Join(dir, "srv", "node"), name)
	}
	files := map[string]string{
		"swift.conf": "[swift-hash]\nswift_hash_path_suffix = housekeeper\nswift_hash_path_prefix = housekeeper\n[storage-policy:0]\nname = Policy-0\ndefault = yes\n",
	}
	for _, server := range []string{"account", "container", "object"} {
		files[server+"-server.conf"] = common(server+"-server", ports[server]) +
			fmt.Sprintf("[pipeline:main]\npipeline = %[1]s-server\n[app:%[1]s-server]\nuse = egg:swift#%[1]s\n", server)
	}
	memcache := fmt.Sprintf("127.0.0.1:%d", ports["memcached"])
	proxy := common("proxy-server", ports["proxy"]) + `[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats bulk authtoken keystoneauth copy slo dlo versioned_writes proxy-logging proxy-server
[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true
[filter:cache]
use = egg:swift#memcache
memcache_servers = ` + memcache + `
[filter:bulk]
use = egg:swift#bulk
max_deletes_per_request = ` + strconv.Itoa(SwiftMaxDeletesPerRequest) + `
[filter:authtoken]
paste.filter_factory = keystonemiddleware.auth_token:filter_factory
www_authenticate_uri = http://127.0.0.1:` + strconv.Itoa(ports["keystone"]) + `/v3
auth_url = http://127.0.0.1:` + strconv.Itoa(ports["keystone"]) + `/v3
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = admin
username = admin
password = ` + KeystoneAdminPassword + `
delay_auth_decision = True
memcached_servers = ` + memcache + `
include_service_catalog = False
service_token_roles_required = True
[filter:keystoneauth]
use = egg:swift#keystoneauth
operator_roles = admin, member
`
	for _, f := range []string{"catch_errors", "gatekeeper", "healthcheck", "listing_formats", "copy", "slo", "dlo", "versioned_writes"} {
		proxy += fmt.Sprintf("[filter:%s]\nuse = egg:swift#%s\n", f, f)
	}
	proxy += "[filter:proxy-logging]\nuse = egg:swift#proxy_logging\n"
	files["proxy-server.conf"] = proxy
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// buildRings builds the account, container and object rings: one replica on one device.
func buildRings(etc string, ports map[string]int) error {
	for _, ring := range []string{"account", "container", "object"} {
		builder := filepath.Join(etc, ring+".builder")
		for _, args := range [][]string{
			{builder, "create", "10", "1", "1"},
			{builder, "add", fmt.Sprintf("r1z1-127.0.0.1:%d/d1", ports[ring]), "100"},
			{builder, "rebalance"},
		} {
			out, err := exec.Command("swift-ring-builder", args...).CombinedOutput()
			var exit *exec.ExitError
			if err != nil && !(args[1] == "rebalance" && errors.As(err, &exit) && exit.ExitCode() == 1) { // 1: a warning
				return fmt.Errorf("swift-ring-builder %s: %w: %s", strings.Join(args[1:], " "), err, out)
			}
		}
	}
	return nil
}

// register puts the proxy into Keystone's catalog and makes the domain, project, user and
// application credential of the stack's BackupBuckets.
func (s *Swift) register() error {
	admin, err := s.token(map[string]any{"methods": []string{"password"}, "password": map[string]any{"user": map[string]any{
		"name": "admin", "domain": map[string]string{"name": "Default"}, "password": KeystoneAdminPassword}}},
		map[string]any{"project": map[string]any{"name": "admin", "domain": map[string]string{"name": "Default"}}})
	if err != nil {
		return err
	}
	// The bootstrap's identity endpoint names the port the database was prepared with; the
	// proxy's token validation finds Keystone through the catalog (its internal endpoint).
	var identity struct{ Services []struct{ ID string } }
	if err := s.call(admin, http.MethodGet, "services?type=identity", nil, &identity); err != nil || len(identity.Services) != 1 {
		return fmt.Errorf("finding the identity service: %v (%d found)", err, len(identity.Services))
	}
	var endpoints struct{ Endpoints []struct{ ID string } }
	if err := s.call(admin, http.MethodGet, "endpoints?service_id="+identity.Services[0].ID, nil, &endpoints); err != nil {
		return err
	}
	for _, e := range endpoints.Endpoints {
		if err := s.call(admin, http.MethodDelete, "endpoints/"+e.ID, nil, nil); err != nil {
			return err
		}
	}
	for _, iface := range []string{"public", "internal"} {
		if _, err := s.create(admin, "endpoints", "endpoint", map[string]any{"service_id": identity.Services[0].ID, "interface": iface,
			"region_id": SwiftRegion, "url": s.AuthURL}); err != nil {
			return err
		}
	}
	service, err := s.create(admin, "services", "service", map[string]any{"type": "object-store", "name": "swift"})
	if err != nil {
		return err
	}
	for _, iface := range []string{"public", "internal"} {
		if _, err := s.create(admin, "endpoints", "endpoint", map[string]any{"service_id": service, "interface": iface,
			"region_id": SwiftRegion, "url": s.ProxyURL + "/v1/AUTH_%(project_id)s"}); err != nil {
			return err
		}
	}
	domain, err := s.create(admin, "domains", "domain", map[string]any{"name": SwiftDomain})
	if err != nil {
		return err
	}
	project, err := s.create(admin, "projects", "project", map[string]any{"name": SwiftProject, "domain_id": domain})
	if err != nil {
		return err
	}
	user, err := s.create(admin, "users", "user", map[string]any{"name": SwiftUser, "domain_id": domain, "password": SwiftPassword})
	if err != nil {
		return err
	}
	var roles struct{ Roles []struct{ ID string } }
	if err := s.call(admin, http.MethodGet, "roles?name=member", nil, &roles); err != nil || len(roles.Roles) != 1 {
		return fmt.Errorf("finding the member role: %v (%d found)", err, len(roles.Roles))
	}
	if err := s.call(admin, http.MethodPut, fmt.Sprintf("projects/%s/users/%s/roles/%s", project, user, roles.Roles[0].ID), nil, nil); err != nil {
		return err
	}
	// An application credential is made by its user, with a token scoped to the project.
	own, err := s.token(map[string]any{"methods": []string{"password"}, "password": map[string]any{"user": map[string]any{
		"name": SwiftUser, "domain": map[string]string{"name": SwiftDomain}, "password": SwiftPassword}}},
		map[string]any{"project": map[string]any{"name": SwiftProject, "domain": map[string]string{"name": SwiftDomain}}})
	if err != nil {
		return err
	}
	var cred struct {
		Credential struct{ ID, Secret string } `json:"application_credential"`
	}
	if err := s.call(own, http.MethodPost, "users/"+user+"/application_credentials",
		map[string]any{"application_credential": map[string]any{"name": "housekeeper"}}, &cred); err != nil {
		return err
	}
	s.ApplicationCredentialID, s.ApplicationCredentialSecret = cred.Credential.ID, cred.Credential.Secret
	return nil
}

// token is a token for identity, scoped to scope.
func (s *Swift) token(identity, scope map[string]any) (string, error) {
	body, _ := json.Marshal(map[string]any{"auth": map[string]any{"identity": identity, "scope": scope}})
	resp, err := http.Post(s.AuthURL+"/auth/tokens", "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		data, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("token: %s: %s", resp.Status, data)
	}
	return resp.Header.Get("X-Subject-Token"), nil
}

// create posts one object of kind and returns its id.
func (s *Swift) create(token, path, kind string, object map[string]any) (string, error) {
	var out map[string]struct{ ID string }
	if err := s.call(token, http.MethodPost, path, map[string]any{kind: object}, &out); err != nil {
		return "", err
	}
	return out[kind].ID, nil
}

func (s *Swift) call(token, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.AuthURL+"/"+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("X-Auth-Token", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// Stop terminates every server and waits for them to exit.
func (s *Swift) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].Stop()
	}
}
