package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/internal/certs"
	"github.com/seed-a6839e30/dlm/transport"
)

const certsUsage = `usage: dlmnode certs ca     [flags]
       dlmnode certs node   [flags] NAME[=HOST,...] ...
       dlmnode certs client [flags] NAME ...

Makes the certificates of a cluster with mutual TLS into a directory
(--dir): every file owner-only (0600), the directory 0700, nothing that
exists replaced unless --force. Three commands for a cluster of three:

  dlmnode certs ca --cluster-id prod
  dlmnode certs node node1=10.0.0.1 node2=10.0.0.2 node3=10.0.0.3
  dlmnode certs client ops

ca      a CA for the cluster (ca.pem, ca-key.pem) and a gossip key
        (gossip.key). The CA signs identities of its cluster only. Keep
        ca-key.pem off the nodes: it is needed only to make certificates.
node    a certificate per node (node-NAME.pem, node-NAME-key.pem) that
        carries its identity, dlm://CLUSTER/node/NAME, which the links
        check against the name a peer gives, and the HOSTs (IP addresses
        or DNS names) it is reached at.
client  a certificate per client (client-NAME.pem, client-NAME-key.pem),
        dlm://CLUSTER/client/NAME: accepted on an agent's client port,
        refused on the links.

Renewing: make new certificates with --force and send the agents SIGHUP;
docs/security.md has the steps, for a new CA too.

flags:
`

func certsMain(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		w := stderr
		if len(args) > 0 {
			w = stdout
		}
		fmt.Fprint(w, certsUsage)
		certsFlags("", new(certsConfig), w).PrintDefaults()
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	kind := args[0]
	switch kind {
	case "ca", "node", "client":
	default:
		fmt.Fprintf(stderr, "dlmnode certs: unknown kind %q: want ca, node or client\n", kind)
		return errUsage
	}
	var c certsConfig
	fs := certsFlags(kind, &c, stderr)
	names, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) { c.clusterSet = c.clusterSet || f.Name == "cluster-id" })
	now := time.Now()
	switch kind {
	case "ca":
		if len(names) > 0 {
			fmt.Fprintf(stderr, "dlmnode certs ca: unexpected argument %q\n", names[0])
			return errUsage
		}
		return c.makeCA(stdout, stderr, now)
	case "node", "client":
		if len(names) == 0 {
			fmt.Fprintf(stderr, "dlmnode certs %s: name at least one %s\n", kind, kind)
			return errUsage
		}
		return c.issue(kind, names, stdout, stderr, now)
	}
	return nil
}

type certsConfig struct {
	dir        string
	cluster    string
	days       int
	force      bool
	clusterSet bool // --cluster-id was given
}

func certsFlags(kind string, c *certsConfig, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("certs "+kind, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.dir, "dir", "dlm-certs", "directory of the CA and the certificates")
	fs.StringVar(&c.cluster, "cluster-id", dlm.DefaultConfig().ClusterID, "the cluster's ID (--cluster-id of its agents); node and client take it from the CA")
	days := 365
	if kind == "ca" {
		days = 3650
	}
	fs.IntVar(&c.days, "days", days, "days the certificates are valid (node and client: 365, ca: 3650); a certificate ends when its CA does at the latest")
	fs.BoolVar(&c.force, "force", false, "replace files that exist")
	fs.Usage = func() {
		fmt.Fprint(out, certsUsage)
		fs.PrintDefaults()
	}
	return fs
}

// parseInterleaved parses flags that may come before, between or after
// the names, and returns the names.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var names []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		if fs.NArg() == 0 {
			return names, nil
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func (c *certsConfig) validity() (time.Duration, error) {
	if c.days < 1 || c.days > 100*366 {
		return 0, fmt.Errorf("--days %d: want 1..%d", c.days, 100*366)
	}
	return time.Duration(c.days) * 24 * time.Hour, nil
}

func (c *certsConfig) makeCA(stdout, stderr io.Writer, now time.Time) error {
	valid, err := c.validity()
	if err != nil {
		fmt.Fprintln(stderr, "dlmnode certs ca:", err)
		return errUsage
	}
	ca, certPEM, keyPEM, err := certs.NewCA(c.cluster, valid, now)
	if err != nil {
		fmt.Fprintf(stderr, "dlmnode certs ca: --cluster-id %q: %v\n", c.cluster, err)
		return errUsage
	}
	gossip, err := certs.NewGossipKey()
	if err != nil {
		return err
	}
	err = certs.WriteFiles(c.dir, c.force,
		certs.File{Name: certs.CAFile, Data: certPEM},
		certs.File{Name: certs.CAKeyFile, Data: keyPEM},
		certs.File{Name: certs.GossipKeyFile, Data: gossip})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "CA of cluster %s, until %s: %s (give it to every agent: --tls-ca-file)\n",
		c.cluster, ca.Cert.NotAfter.Format(time.DateOnly), filepath.Join(c.dir, certs.CAFile))
	fmt.Fprintf(stdout, "its key: %s (keep it off the nodes)\n", filepath.Join(c.dir, certs.CAKeyFile))
	fmt.Fprintf(stdout, "gossip key: %s (give it to every agent: --gossip-key-file)\n", filepath.Join(c.dir, certs.GossipKeyFile))
	return nil
}

func (c *certsConfig) issue(kind string, args []string, stdout, stderr io.Writer, now time.Time) error {
	cmd := "dlmnode certs " + kind
	valid, err := c.validity()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return errUsage
	}
	ca, err := certs.LoadCA(c.dir)
	if err != nil {
		fmt.Fprintf(stderr, "%s: the CA: %v (dlmnode certs ca --dir %s makes one)\n", cmd, err, c.dir)
		return errUsage
	}
	cluster := ca.Cluster
	switch {
	case cluster == "":
		cluster = c.cluster // a CA without a name constraint: the flag says
	case c.clusterSet && c.cluster != cluster:
		fmt.Fprintf(stderr, "%s: --cluster-id %q, but the CA in %s is cluster %q's\n", cmd, c.cluster, c.dir, cluster)
		return errUsage
	}
	role := transport.Role(kind)
	var files []certs.File
	type made struct {
		id       transport.Identity
		hosts    []string
		cert     string
		key      string
		notAfter time.Time
	}
	var all []made
	seen := map[string]bool{}
	for _, arg := range args {
		name, hostList, _ := strings.Cut(arg, "=")
		var hosts []string
		for h := range strings.SplitSeq(hostList, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hosts = append(hosts, h)
			}
		}
		if role == transport.RoleClient && len(hosts) > 0 {
			fmt.Fprintf(stderr, "%s: %q: a client certificate lists no hosts (NAME only)\n", cmd, arg)
			return errUsage
		}
		if err := certs.CheckFileName(name); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
			return errUsage
		}
		if seen[name] {
			fmt.Fprintf(stderr, "%s: %q named twice\n", cmd, name)
			return errUsage
		}
		seen[name] = true
		id := transport.Identity{Cluster: cluster, Role: role, Name: name}
		certPEM, keyPEM, notAfter, err := ca.Issue(id, hosts, valid, now)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %s: %v\n", cmd, name, err)
			return errUsage
		}
		certFile, keyFile := certs.NodeFiles(name)
		if role == transport.RoleClient {
			certFile, keyFile = certs.ClientFiles(name)
		}
		files = append(files, certs.File{Name: certFile, Data: certPEM}, certs.File{Name: keyFile, Data: keyPEM})
		all = append(all, made{id, hosts, filepath.Join(c.dir, certFile), filepath.Join(c.dir, keyFile), notAfter})
	}
	if err := certs.WriteFiles(c.dir, c.force, files...); err != nil {
		return err
	}
	caFile := filepath.Join(c.dir, certs.CAFile)
	for _, m := range all {
		hosts := ""
		if len(m.hosts) > 0 {
			hosts = ", hosts " + strings.Join(m.hosts, " ")
		}
		limited := ""
		if m.notAfter.Before(now.Add(valid)) {
			limited = ", limited by the CA's expiry"
		}
		fmt.Fprintf(stdout, "%s: %s, %s (%s%s, until %s%s)\n", m.id.Name, m.cert, m.key, m.id, hosts, m.notAfter.Format(time.DateOnly), limited)
		if role == transport.RoleNode {
			fmt.Fprintf(stdout, "  dlmnode agent --name %s --cluster-id %s --tls-cert-file %s --tls-key-file %s --tls-ca-file %s --gossip-key-file %s ...\n",
				m.id.Name, cluster, m.cert, m.key, caFile, filepath.Join(c.dir, certs.GossipKeyFile))
		}
	}
	return nil
}
