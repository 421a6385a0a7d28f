package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/config"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// Permissions are the NATS permissions of every identity: the bridge, setup, the operator, the
// forwarder and each function.
func Permissions() []events.Permission { return PermissionsOf(all.Functions) }

// PermissionsOf is Permissions with the functions of the registry defs.
func PermissionsOf(defs []runner.Definition) []events.Permission {
	perms := []events.Permission{events.BridgePermission(), events.SetupPermission(), events.OperatorPermission(),
		events.ForwardPermission(all.NamesOf(defs)...)}
	for _, def := range defs {
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
	previous := fs.String("previous", "", "config: the directory of the credentials these replace (a rotation): also write accounts-rotation.conf, which accepts both")
	var tlsHosts config.List
	fs.Var(&tlsHosts, "tls-hosts", "also write a CA, a server certificate for these hosts, a client certificate and nats-server.conf requiring them (a local stack's TLS; in production, your PKI's)")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("%w: nats-auth needs --out", errUsage)
	}
	if *previous != "" && natsconn.Form(*form) != natsconn.FormConfig {
		return fmt.Errorf("%w: nats-auth: --previous is for --form config; in the jwt form rotate with --account-seed (the servers accept every user the account signed)", errUsage)
	}
	if len(tlsHosts) > 0 && *accountSeed != "" {
		return fmt.Errorf("%w: nats-auth: --tls-hosts writes a server configuration, which an existing account (--account-seed) has already", errUsage)
	}
	issued := natsconn.Issued{Dir: *dir, Form: natsconn.Form(*form)}
	if _, err := os.Stat(issued.CredentialsFile(events.IdentityBridge)); err == nil && !*force {
		fmt.Fprintf(out, "%s holds credentials already: kept (--force issues new ones)\n", *dir)
		return printChartValues(out, issued)
	}
	if len(tlsHosts) > 0 {
		issued.CA = filepath.Join(*dir, "ca.pem")
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
	if *previous != "" {
		path, err := issued.WriteRotationConfig(*previous, perms)
		if err != nil {
			return fmt.Errorf("nats-auth: --previous: %w", err)
		}
		fmt.Fprintf(out, "rotation: the servers take %s (these and %s's users) until no workload uses the previous credentials, then accounts.conf\n", path, *previous)
	}
	if err := writeGardenSecret(out, issued); err != nil {
		return err
	}
	return printChartValues(out, issued)
}

// WorkloadIdentities are the identities the chart's workloads connect as: every one but the
// operator's, which re-drives and stays with people.
func WorkloadIdentities() []string { return WorkloadIdentitiesOf(all.Functions) }

// WorkloadIdentitiesOf is WorkloadIdentities with the functions of the registry defs.
func WorkloadIdentitiesOf(defs []runner.Definition) []string {
	var ids []string
	for _, p := range PermissionsOf(defs) {
		if p.Identity != events.IdentityOperator {
			ids = append(ids, p.Identity)
		}
	}
	return ids
}

// writeGardenSecret writes the data of the garden Secret the ControllerDeployment references
// into <out>/garden, a file per key, and says how to create the Secret from it.
func writeGardenSecret(out io.Writer, issued natsconn.Issued) error {
	data, err := issued.GardenSecretData(WorkloadIdentities())
	if err != nil {
		return fmt.Errorf("nats-auth: %w", err)
	}
	dir := filepath.Join(issued.Dir, natsconn.GardenSecretDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for key, value := range data {
		if err := os.WriteFile(filepath.Join(dir, key), value, 0o600); err != nil {
			return err
		}
	}
	ca := " --from-file=ca=<the CA of your NATS servers>"
	if _, ok := data[natsconn.GardenSecretCAKey]; ok {
		ca = ""
	}
	fmt.Fprintf(out, "garden Secret (every seed's identities, through the ControllerDeployment): kubectl -n garden create secret generic housekeeper-nats --from-file=%s%s && kubectl -n garden label secret housekeeper-nats gardener.cloud/role=resource-reference\n", dir, ca)
	return nil
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
