package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/config"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
)

// Permissions are the NATS permissions of every identity: the bridge, setup, the operator, the
// forwarder and each function.
func Permissions() []events.Permission {
	perms := []events.Permission{events.BridgePermission(), events.SetupPermission(), events.OperatorPermission(),
		events.ForwardPermission(all.NamesOf(all.Functions)...)}
	for _, def := range all.Functions {
		perms = append(perms, events.FunctionPermission(def.Name, def.Publishes...))
	}
	return perms
}

// runNATSAuth issues the credentials of every identity with its permissions.
func runNATSAuth(args []string, out io.Writer) error {
	fs := newFlags("nats-auth", "--out DIR [--form config|jwt] [--account-seed FILE]", "Issue a NATS identity per component (bridge, setup, operator, forward, each function) with its\nleast-privilege permissions, and the server's side, into DIR.")
	dir := fs.String("out", "", "directory to write the server configuration and the credentials to (required)")
	form := fs.String("form", string(natsconn.FormConfig), "config (NKey users in the server's configuration) or jwt (user JWTs, as nsc issues them)")
	accountSeed := fs.String("account-seed", "", "jwt: issue the users under this existing account (its seed file, e.g. from nsc) instead of a new operator and account")
	force := fs.Bool("force", false, "issue new credentials over those in --out")
	var tlsHosts config.List
	fs.Var(&tlsHosts, "tls-hosts", "also write a CA, a server certificate for these hosts, a client certificate and nats-server.conf requiring them (a local stack's TLS; in production, your PKI's)")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("%w: nats-auth needs --out", errUsage)
	}
	if len(tlsHosts) > 0 && *accountSeed != "" {
		return fmt.Errorf("%w: nats-auth: --tls-hosts writes a server configuration, which an existing account (--account-seed) has already", errUsage)
	}
	issued := natsconn.Issued{Dir: *dir, Form: natsconn.Form(*form)}
	if _, err := os.Stat(issued.CredentialsFile(events.IdentityBridge)); err == nil && !*force {
		fmt.Fprintf(out, "%s holds credentials already: kept (--force issues new ones)\n", *dir)
		return printChartValues(out, issued)
	}
	perms := Permissions()
	var err error
	if len(tlsHosts) > 0 {
		_, _, err = natsconn.IssueServer(*dir, issued.Form, perms, tlsHosts, true)
	} else {
		err = natsconn.Issue(*dir, issued.Form, *accountSeed, perms)
	}
	if err != nil {
		return fmt.Errorf("nats-auth: %w", err)
	}
	for _, p := range perms {
		fmt.Fprintf(out, "%-10s publish %d subjects, subscribe %d\n", p.Identity, len(p.Publish), len(p.Subscribe))
	}
	fmt.Fprintf(out, "written to %s (%s form)\n", *dir, *form)
	return printChartValues(out, issued)
}

// printChartValues says what the chart needs to use the identities: their form, and their
// account, in which KEDA looks for the consumers.
func printChartValues(out io.Writer, issued natsconn.Issued) error {
	account, err := issued.Account()
	if err != nil {
		return fmt.Errorf("nats-auth: reading back the account: %w", err)
	}
	fmt.Fprintf(out, "chart values: --set nats.credentials=%s,nats.account=%s\n", issued.Form, account)
	return nil
}
