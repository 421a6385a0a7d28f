package natsconn

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/housekeeper-dev/housekeeper/events"
)

// Form is a form of NATS credentials, as nats-server takes them.
type Form string

const (
	// FormConfig: an account with one NKey user per identity in the server's configuration
	// (accounts.conf to include), and each identity's seed in <identity>.nk (--nats-nkey).
	FormConfig Form = "config"
	// FormJWT: decentralised auth, as nsc issues it: a user JWT per identity signed by the
	// account, in <identity>.creds (--nats-creds); without an account seed also an operator
	// and the account, with resolver.conf to include.
	FormJWT Form = "jwt"
)

// AccountName is the NATS account housekeeper's identities share: JetStream's streams live in it.
const AccountName = "HOUSEKEEPER"

// Issue writes credentials for perms into dir, in form. With FormJWT and accountSeed (an
// account's seed file, e.g. from nsc), the users are issued under that existing account and
// no server configuration is written. Seeds and credentials are written with mode 0600.
func Issue(dir string, form Form, accountSeed string, perms []events.Permission) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	switch form {
	case FormConfig:
		if accountSeed != "" {
			return errors.New("an account seed is for --form jwt")
		}
		return issueConfig(dir, perms)
	case FormJWT:
		return issueJWT(dir, accountSeed, perms)
	}
	return fmt.Errorf("unknown form %q: %s or %s", form, FormConfig, FormJWT)
}

func issueConfig(dir string, perms []events.Permission) error {
	var users []configUser
	for _, p := range perms {
		user, err := nkeys.CreateUser()
		if err != nil {
			return err
		}
		seed, err := user.Seed()
		if err != nil {
			return err
		}
		public, err := user.PublicKey()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, p.Identity+".nk"), append(seed, '\n'), 0o600); err != nil {
			return err
		}
		users = append(users, configUser{perm: p, public: public})
	}
	return os.WriteFile(filepath.Join(dir, "accounts.conf"), []byte(accountsConf(users)), 0o600)
}

// configUser is an NKey user of the config form: an identity's permissions and public key.
type configUser struct {
	perm   events.Permission
	public string
	// previous marks the user of an identity's previous credentials (a rotation).
	previous bool
}

// accountsConf is the server's side of the config form: housekeeper's account with users.
func accountsConf(users []configUser) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# housekeeper's NATS identities, written by `housekeeper nats-auth --form config`.\n")
	fmt.Fprintf(&b, "# Include it in nats-server.conf; each identity connects with --nats-nkey <identity>.nk.\n")
	fmt.Fprintf(&b, "accounts: {\n  %s: {\n    jetstream: enabled\n    users: [\n", AccountName)
	for _, u := range users {
		mark := ""
		if u.previous {
			mark = " (previous credentials, until the rotation is done)"
		}
		p := u.perm
		fmt.Fprintf(&b, "      # %s%s\n      {nkey: %s, permissions: {publish: {allow: %s}, subscribe: {allow: %s}%s}}\n",
			p.Identity, mark, u.public, quoted(p.Publish), quoted(p.Subscribe), map[bool]string{true: ", allow_responses: true"}[p.AllowResponses])
	}
	b.WriteString("    ]\n  }\n}\n")
	return b.String()
}

// RotationConfigName is the server configuration of a rotation in the config form, beside
// accounts.conf: its users and those of the previous credentials, each with its permissions.
const RotationConfigName = "accounts-rotation.conf"

// WriteRotationConfig writes Dir/accounts-rotation.conf (config form): the users of the
// identities in Dir and of those in previous (an earlier Issue's directory), so that the NATS
// servers accept both while the workloads move from the one to the other. Once none connects
// with the previous credentials, the servers take Dir/accounts.conf: the new ones alone. (The JWT
// form needs no such step: a server accepts every user its account signed, old and new.)
func (i Issued) WriteRotationConfig(previous string, perms []events.Permission) (string, error) {
	if i.Form != FormConfig {
		return "", fmt.Errorf("a rotation's server configuration is for the config form; in the %s form the account accepts every user it signed", i.Form)
	}
	var users, old []configUser
	for _, p := range perms {
		for _, set := range []struct {
			dir  string
			into *[]configUser
		}{{i.Dir, &users}, {previous, &old}} {
			seed, err := os.ReadFile(filepath.Join(set.dir, p.Identity+".nk"))
			if err != nil {
				return "", err
			}
			kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(seed))))
			if err != nil {
				return "", fmt.Errorf("%s: %w", filepath.Join(set.dir, p.Identity+".nk"), err)
			}
			public, _ := kp.PublicKey()
			*set.into = append(*set.into, configUser{perm: p, public: public, previous: set.dir == previous})
		}
	}
	path := filepath.Join(i.Dir, RotationConfigName)
	return path, os.WriteFile(path, []byte(accountsConf(append(users, old...))), 0o600)
}

// GardenSecretDir is where nats-auth writes, under its --out, the data of the garden Secret the
// ControllerDeployment references (GardenSecretData), a file per key.
const GardenSecretDir = "garden"

// GardenSecretCAKey is the key of the NATS server's CA in the garden Secret (and in the chart's
// nats.identities, beside the identities).
const GardenSecretCAKey = "ca"

// GardenSecretData is the data of the garden Secret housekeeper's ControllerDeployment
// references (resources: nats; the chart's nats.identities): each of identities' credentials
// under its name, and ca, the PEM of the NATS server's CA, when i has one. Keys are alphanumeric,
// as gardener's {{ .resources.<name>.data.<key> }} requires.
func (i Issued) GardenSecretData(identities []string) (map[string][]byte, error) {
	data := map[string][]byte{}
	for _, id := range identities {
		creds, err := os.ReadFile(i.CredentialsFile(id))
		if err != nil {
			return nil, err
		}
		data[id] = creds
	}
	if i.CA != "" {
		ca, err := os.ReadFile(i.CA)
		if err != nil {
			return nil, err
		}
		data[GardenSecretCAKey] = ca
	}
	return data, nil
}

func quoted(subjects []string) string {
	q := make([]string, len(subjects))
	for i, s := range subjects {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func issueJWT(dir, accountSeed string, perms []events.Permission) error {
	var account nkeys.KeyPair
	if accountSeed != "" {
		seed, err := os.ReadFile(accountSeed)
		if err != nil {
			return fmt.Errorf("account seed: %w", err)
		}
		if account, err = nkeys.ParseDecoratedNKey(seed); err != nil {
			return fmt.Errorf("account seed %s: not an NKey seed", accountSeed)
		}
		if public, _ := account.PublicKey(); !nkeys.IsValidPublicAccountKey(public) {
			return fmt.Errorf("account seed %s: the seed of a %s, not of an account", accountSeed, keyKind(public))
		}
	} else {
		var err error
		if account, err = writeOperatorAndAccount(dir); err != nil {
			return err
		}
	}
	for _, p := range perms {
		user, err := nkeys.CreateUser()
		if err != nil {
			return err
		}
		public, _ := user.PublicKey()
		claims := jwt.NewUserClaims(public)
		claims.Name = p.Identity
		claims.Pub.Allow.Add(p.Publish...)
		claims.Sub.Allow.Add(p.Subscribe...)
		if p.AllowResponses {
			claims.Resp = &jwt.ResponsePermission{MaxMsgs: 1}
		}
		token, err := claims.Encode(account)
		if err != nil {
			return fmt.Errorf("identity %s: %w", p.Identity, err)
		}
		seed, _ := user.Seed()
		creds, err := jwt.FormatUserConfig(token, seed)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, p.Identity+".creds"), creds, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// writeOperatorAndAccount creates an operator, its system account and housekeeper's account
// with JetStream, writes resolver.conf (the operator, and both accounts preloaded into a memory
// resolver) and the seeds, and returns housekeeper's account key to sign users with.
func writeOperatorAndAccount(dir string) (nkeys.KeyPair, error) {
	operator, err := nkeys.CreateOperator()
	if err != nil {
		return nil, err
	}
	system, systemJWT, err := newAccount(operator, "SYS", false)
	if err != nil {
		return nil, err
	}
	account, accountJWT, err := newAccount(operator, AccountName, true)
	if err != nil {
		return nil, err
	}
	operatorPublic, _ := operator.PublicKey()
	operatorClaims := jwt.NewOperatorClaims(operatorPublic)
	operatorClaims.Name = "housekeeper"
	operatorClaims.SystemAccount, _ = system.PublicKey()
	operatorJWT, err := operatorClaims.Encode(operator)
	if err != nil {
		return nil, err
	}
	for name, kp := range map[string]nkeys.KeyPair{"operator.nk": operator, "account.nk": account} {
		seed, _ := kp.Seed()
		if err := os.WriteFile(filepath.Join(dir, name), append(seed, '\n'), 0o600); err != nil {
			return nil, err
		}
	}
	accountPublic, _ := account.PublicKey()
	conf := fmt.Sprintf("# housekeeper's operator and accounts, written by `housekeeper nats-auth --form jwt`.\n"+
		"# Include it in nats-server.conf; each identity connects with --nats-creds <identity>.creds.\n"+
		"operator: %s\nsystem_account: %s\nresolver: MEMORY\nresolver_preload: {\n  %s: %s\n  %s: %s\n}\n",
		operatorJWT, operatorClaims.SystemAccount, operatorClaims.SystemAccount, systemJWT, accountPublic, accountJWT)
	return account, os.WriteFile(filepath.Join(dir, "resolver.conf"), []byte(conf), 0o600)
}

// newAccount creates an account signed by operator, with JetStream if jetStream.
func newAccount(operator nkeys.KeyPair, name string, jetStream bool) (nkeys.KeyPair, string, error) {
	account, err := nkeys.CreateAccount()
	if err != nil {
		return nil, "", err
	}
	public, _ := account.PublicKey()
	claims := jwt.NewAccountClaims(public)
	claims.Name = name
	if jetStream {
		claims.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	}
	token, err := claims.Encode(operator)
	return account, token, err
}

func keyKind(public string) string {
	switch {
	case nkeys.IsValidPublicOperatorKey(public):
		return "operator"
	case nkeys.IsValidPublicUserKey(public):
		return "user"
	}
	return "key of another kind"
}

// Issued is what Issue wrote into Dir, with the TLS material a secured server and its clients
// use: how each identity connects, and the server's configuration.
type Issued struct {
	Dir  string
	Form Form
	// CA verifies the server (and, with ClientCert and ClientKey, the clients).
	CA, ClientCert, ClientKey string
}

// IssueServer issues perms in form into dir (Issue) with TLS for hosts (WriteTLS), and writes
// the server's configuration requiring them (WriteServerConfig); with mutualTLS, clients must
// present the client certificate it wrote. It returns what was issued and the configuration's
// path.
func IssueServer(dir string, form Form, perms []events.Permission, hosts []string, mutualTLS bool) (Issued, string, error) {
	if err := Issue(dir, form, "", perms); err != nil {
		return Issued{}, "", err
	}
	tls, err := WriteTLS(dir, hosts)
	if err != nil {
		return Issued{}, "", err
	}
	issued := Issued{Dir: dir, Form: form, CA: tls.CA}
	if mutualTLS {
		issued.ClientCert, issued.ClientKey = tls.ClientCert, tls.ClientKey
	}
	conf, err := issued.WriteServerConfig(tls.ServerCert, tls.ServerKey)
	return issued, conf, err
}

// CredentialsFile is the file identity connects with: its .creds (JWT form) or .nk seed.
func (i Issued) CredentialsFile(identity string) string {
	if i.Form == FormJWT {
		return filepath.Join(i.Dir, identity+".creds")
	}
	return filepath.Join(i.Dir, identity+".nk")
}

// Account is the NATS account the identities live in, which KEDA names to read the consumers'
// lag (the chart's nats.account): AccountName in the config form; in the JWT form the public
// key of the account that signed them (a new one, or the one of --account-seed).
func (i Issued) Account() (string, error) {
	if i.Form != FormJWT {
		return AccountName, nil
	}
	creds, err := os.ReadFile(i.CredentialsFile(events.IdentityBridge))
	if err != nil {
		return "", err
	}
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return "", fmt.Errorf("%s: %w", i.CredentialsFile(events.IdentityBridge), err)
	}
	claims, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return "", fmt.Errorf("%s: %w", i.CredentialsFile(events.IdentityBridge), err)
	}
	if claims.IssuerAccount != "" {
		return claims.IssuerAccount, nil
	}
	return claims.Issuer, nil
}

// Options are the connection options of identity.
func (i Issued) Options(url, identity string) Options {
	o := Options{URL: url, TLSCA: i.CA, TLSCert: i.ClientCert, TLSKey: i.ClientKey}
	if i.Form == FormJWT {
		o.CredsFile = i.CredentialsFile(identity)
	} else {
		o.NKeyFile = i.CredentialsFile(identity)
	}
	return o
}

// Args are Options as housekeeper's command-line flags.
func (i Issued) Args(url, identity string) []string {
	o := i.Options(url, identity)
	args := []string{"--nats-url", o.URL, "--nats-tls-ca", o.TLSCA}
	if o.TLSCert != "" {
		args = append(args, "--nats-tls-cert", o.TLSCert, "--nats-tls-key", o.TLSKey)
	}
	if o.CredsFile != "" {
		return append(args, "--nats-creds", o.CredsFile)
	}
	return append(args, "--nats-nkey", o.NKeyFile)
}

// WriteServerConfig writes Dir/nats-server.conf: TLS with the server's certificate (client
// certificates signed by CA required when the identities have one, ClientCert), and the
// issued identities. It returns its path.
func (i Issued) WriteServerConfig(serverCert, serverKey string) (string, error) {
	include := map[Form]string{FormConfig: "accounts.conf", FormJWT: "resolver.conf"}[i.Form]
	path := filepath.Join(i.Dir, "nats-server.conf")
	conf := fmt.Sprintf("tls {\n  cert_file: %q\n  key_file: %q\n  ca_file: %q\n  verify: %t\n}\ninclude %q\n",
		serverCert, serverKey, i.CA, i.ClientCert != "", include)
	return path, os.WriteFile(path, []byte(conf), 0o600)
}
