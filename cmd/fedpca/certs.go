package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/fedpca/fedpca/transport"
)

func certsCommand() *cli.Command {
	validity := &cli.DurationFlag{Name: "validity", Value: 365 * 24 * time.Hour, Usage: "certificate validity", Sources: env("validity")}
	orgFlag := reqStr("org", "the organisation's directory (fedpca certs init)")
	return &cli.Command{
		Name:      "certs",
		Usage:     "identities: one CA for a whole deployment on one machine, or one per organisation (init, issue, export, import)",
		ArgsUsage: "ROLE/ID ...",
		Description: `A node's identity is its key: every check that decides whom to trust compares key
fingerprints (the SHA-256 of a certificate's public key), which fedpca certs prints and
every daemon logs at start. Names (spiffe://DOMAIN/ROLE/ID in the certificate) are for
people, and a certificate with a known name and another key is refused, naming both keys.

One CA for a deployment that one operator runs (the quick start): it creates (or reuses)
the CA in OUT/ca and, for each ROLE/ID (roles: proxy, csp, owner, user, operator), a
directory OUT/ROLE-ID with cert.pem, key.pem, ca.pem and trust.json, whose roster lists
every node issued in OUT by its key (so --committee csp-1,csp-2,csp-3 pins those keys).

  fedpca certs --out certs proxy/proxy csp/csp-1 csp/csp-2 csp/csp-3 owner/hospital-a user/alice operator/ops

Whoever holds that CA could issue csp/csp-1 with a fresh key: nodes issued before refuse
it (their rosters pin the old keys), but a deployment of several organisations gives each
its own CA, so that none can issue another's identities (subcommands init, issue, export,
import; the README's "A federation of organisations").

Running it again with the same --out renews the named nodes' certificates, keeping their
keys (--new-key rolls them: every pin of the node must then be updated). To rotate the CA,
create the new one in another directory and give nodes a bundle holding both CAs
(--trust-also) until every node has a certificate from the new CA.

With --copy-from DIR and no ROLE/ID, it copies one node's credentials (cert.pem, key.pem,
ca.pem or trust.json) from DIR into OUT, each 0600 and owned by whoever runs it, after
checking that they load: for credentials mounted from a Kubernetes Secret, whose files a
non-root node cannot own (deploy/helm runs it in each pod's init container); --trust FILE
takes the trust store from FILE instead (a ConfigMap of the organisation's trust.json).`,
		Flags: []cli.Flag{
			strFlag("out", "", "output directory (required unless a subcommand is given)"),
			strFlag("copy-from", "", "copy a node's credentials from this directory into OUT (0600) instead of issuing any"),
			strFlag("trust", "", "with --copy-from: the trust store (trust.json) to give the node, instead of the one in the directory"),
			strFlag("ca-dir", "", "where the CA's certificate and key live (default OUT/ca); keep the key away from the nodes"),
			strsFlag("dns", "DNS names to add to every certificate (for operators' tools)"),
			strFlag("trust-also", "", "a PEM file of further CA certificates to trust (CA rotation)"),
			boolFlag("new-key", "issue the certificates for fresh keys (the nodes' identities change: update every pin of them)"),
			validity,
		},
		Commands: []*cli.Command{certsInit(validity), certsIssue(orgFlag, validity), certsExport(orgFlag), certsImport(orgFlag), certsShow()},
		Action: func(_ context.Context, cmd *cli.Command) error {
			out := cmd.String("out")
			if out == "" {
				return errors.New("--out is required: the directory to write the CA and the nodes' credentials into (or name a subcommand: init, issue, export, import, show)")
			}
			if from := cmd.String("copy-from"); from != "" {
				if cmd.Args().Len() > 0 {
					return errors.New("--copy-from copies one node's credentials: name no ROLE/ID with it")
				}
				return copyCredentials(from, cmd.String("trust"), out)
			}
			if cmd.Args().Len() == 0 {
				return errors.New("name at least one node, e.g. proxy/proxy csp/csp-1 owner/hospital-a user/alice")
			}
			ids, err := parseIdentities(cmd.Args().Slice())
			if err != nil {
				return err
			}
			caDir := cmd.String("ca-dir")
			if caDir == "" {
				caDir = filepath.Join(out, "ca")
			}
			ca, err := transport.LoadCA(caDir)
			if err != nil {
				if _, statErr := os.Stat(filepath.Join(caDir, transport.CAKeyFile)); statErr == nil {
					return err
				}
				if ca, err = transport.NewCA("fedpca deployment CA", cmd.Duration("validity")+24*time.Hour); err != nil {
					return err
				}
				if err := ca.Save(caDir); err != nil {
					return err
				}
				fmt.Printf("created CA in %s\n", caDir)
			}
			var bundle []byte
			if extra := cmd.String("trust-also"); extra != "" {
				b, err := os.ReadFile(extra)
				if err != nil {
					return err
				}
				bundle = append(ca.CertPEM(), b...)
			}
			roster, err := ca.WriteDeployment(out, ids, transport.NodeOptions{DNS: cmd.StringSlice("dns"), Validity: cmd.Duration("validity"), CABundle: bundle, NewKey: cmd.Bool("new-key")})
			if err != nil {
				return err
			}
			printRoster(roster, ids, out)
			return nil
		},
	}
}

func parseIdentities(args []string) ([]transport.Identity, error) {
	var ids []transport.Identity
	for _, a := range args {
		id, err := transport.ParseIdentity(a)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// printRoster prints the nodes issued (ids) with their keys and
// directories under dir.
func printRoster(roster []transport.Node, ids []transport.Identity, dir string) {
	for _, id := range ids {
		for _, n := range roster {
			if got, _ := transport.ParseIdentity(n.ID); got.Short() == id.Short() {
				fmt.Printf("%-40s key %s  %s\n", n.ID, n.Key, filepath.Join(dir, id.Role+"-"+id.ID))
			}
		}
	}
}

func certsInit(validity *cli.DurationFlag) *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "create an organisation: its trust domain's CA and trust store",
		Description: `Creates the organisation's directory: ca/ (the CA of trust domain --domain, default the
directory's name; its certificate may issue identities in that domain only) and
trust.json (the organisation's own domain). Keep ca/ca-key.pem offline once the
organisation's nodes are issued.

  fedpca certs init --org orgs/hospital-a`,
		Flags: []cli.Flag{reqStr("org", "the organisation's directory (created)"), strFlag("domain", "", "the trust domain (default: the directory's base name)"), validity},
		Action: func(_ context.Context, cmd *cli.Command) error {
			dir := cmd.String("org")
			domain := cmd.String("domain")
			if domain == "" {
				domain = strings.ToLower(filepath.Base(filepath.Clean(dir)))
			}
			o, err := transport.InitOrg(dir, domain, cmd.Duration("validity")+24*time.Hour)
			if err != nil {
				return err
			}
			fmt.Printf("organisation %s: trust domain %s, CA in %s (keep ca-key.pem offline once its nodes are issued)\n", dir, o.Domain, filepath.Join(dir, "ca"))
			return nil
		},
	}
}

func certsIssue(org cli.Flag, validity *cli.DurationFlag) *cli.Command {
	return &cli.Command{
		Name:      "issue",
		Usage:     "issue certificates to an organisation's nodes",
		ArgsUsage: "ROLE/ID ...",
		Description: `Issues each node a certificate of the organisation's trust domain in ORG/ROLE-ID
(cert.pem, key.pem, and trust.json, the organisation's trust store), adds it to the
organisation's roster and prints its SPIFFE ID and key fingerprint, which the others pin
(the roster travels in the organisation's bundle, fedpca certs export). Run again, it renews
a node's certificate and keeps its key (--new-key rolls it).

  fedpca certs issue --org orgs/hospital-a owner/hospital-a`,
		Flags: []cli.Flag{org, strsFlag("dns", "DNS names to add to every certificate (for operators' tools)"),
			boolFlag("new-key", "issue the certificates for fresh keys (the nodes' identities change: every organisation must import the new bundle)"), validity},
		Action: func(_ context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() == 0 {
				return errors.New("name at least one node, e.g. owner/hospital-a")
			}
			ids, err := parseIdentities(cmd.Args().Slice())
			if err != nil {
				return err
			}
			o, err := transport.OpenOrg(cmd.String("org"))
			if err != nil {
				return err
			}
			roster, err := o.Issue(ids, transport.NodeOptions{DNS: cmd.StringSlice("dns"), Validity: cmd.Duration("validity"), NewKey: cmd.Bool("new-key")})
			if err != nil {
				return err
			}
			printRoster(roster, ids, o.Dir)
			return nil
		},
	}
}

func certsExport(org cli.Flag) *cli.Command {
	return &cli.Command{
		Name:  "export",
		Usage: "write an organisation's bundle (its CAs and the keys of its nodes, no secret) for the others to import",
		Description: `The bundle holds the organisation's trust domain, its CA certificates and its roster (each
node's SPIFFE ID and key fingerprint). Send it to the other organisations; they compare
its SHA-256 (printed here, and by fedpca certs import) with you over another channel
before they import it.

  fedpca certs export --org orgs/hospital-a --out hospital-a.bundle.json`,
		Flags: []cli.Flag{org, strFlag("out", "-", "where to write the bundle (- for standard output)")},
		Action: func(_ context.Context, cmd *cli.Command) error {
			o, err := transport.OpenOrg(cmd.String("org"))
			if err != nil {
				return err
			}
			b, err := o.Bundle()
			if err != nil {
				return err
			}
			if out := cmd.String("out"); out != "-" {
				if err := os.WriteFile(out, b.Marshal(), 0o644); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "wrote %s: trust domain %s, %d nodes, SHA-256 %s\n", out, b.Name, len(b.Nodes), b.Digest())
				return nil
			}
			_, err = os.Stdout.Write(b.Marshal())
			return err
		},
	}
}

func certsImport(org cli.Flag) *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "trust other organisations' bundles, each for the roles it plays",
		ArgsUsage: "BUNDLE ...",
		Description: `Adds each bundle (fedpca certs export of another organisation) to the organisation's
trust store and to each of its nodes': a certificate of that trust domain is accepted only
if that domain's CA issued it, only for the roles given (--roles; default: the roles of the
bundle's roster), and a node the roster lists only with the key it lists. A newer bundle of
the same domain replaces the older. Compare the SHA-256 it prints with the other
organisation's over another channel.

  fedpca certs import --org orgs/hospital-a --roles proxy proxy-operator.bundle.json
  fedpca certs import --org orgs/hospital-a --roles csp csp-a.bundle.json csp-b.bundle.json csp-c.bundle.json`,
		Flags: []cli.Flag{org, strsFlag("roles", "the roles accepted from the bundles' domains (default: the roles of each bundle's roster)")},
		Action: func(_ context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() == 0 {
				return errors.New("name at least one bundle file (fedpca certs export of another organisation)")
			}
			o, err := transport.OpenOrg(cmd.String("org"))
			if err != nil {
				return err
			}
			for _, f := range cmd.Args().Slice() {
				raw, err := os.ReadFile(f)
				if err != nil {
					return err
				}
				b, err := transport.ParseBundle(raw)
				if err != nil {
					return fmt.Errorf("%s: %w", f, err)
				}
				d, err := o.Import(b, cmd.StringSlice("roles"))
				if errors.Is(err, transport.ErrOwnBundle) {
					fmt.Printf("skipping %s: it is this organisation's own bundle (trust domain %s)\n", f, b.Name)
					continue
				}
				if err != nil {
					return fmt.Errorf("%s: %w", f, err)
				}
				fmt.Printf("trusting trust domain %s for %s (bundle %s, SHA-256 %s)\n", d.Name, strings.Join(d.Roles, ", "), f, b.Digest())
				for _, n := range d.Nodes {
					fmt.Printf("  %-40s key %s\n", n.ID, n.Key)
				}
			}
			return nil
		},
	}
}

func certsShow() *cli.Command {
	return &cli.Command{
		Name:        "show",
		Usage:       "print a node's identity, key fingerprint and trust store",
		Description: `  fedpca certs show --certs orgs/hospital-a/owner-hospital-a`,
		Flags:       []cli.Flag{reqStr("certs", "the node's credentials directory")},
		Action: func(_ context.Context, cmd *cli.Command) error {
			creds, err := transport.LoadCredentials(cmd.String("certs"))
			if err != nil {
				return err
			}
			fmt.Printf("%s\n  key %s\n  certificate valid until %s\ntrusts:\n", creds.Identity, creds.Key, creds.Leaf.NotAfter.UTC().Format(time.RFC3339))
			for _, d := range creds.Trust.Domains {
				fmt.Printf("  %-24s for %s\n", d.Name, strings.Join(d.Roles, ", "))
				for _, n := range d.Nodes {
					fmt.Printf("    %-38s key %s\n", n.ID, n.Key)
				}
			}
			return nil
		},
	}
}

// copyCredentials copies a node's credentials directory from into out, each
// file 0600, once they load: a key pair, and the trust store (trustFile, or
// the directory's trust.json, or its ca.pem) that accepts it.
func copyCredentials(from, trustFile, out string) error {
	files := map[string][]byte{}
	for _, name := range []string{transport.CertFile, transport.KeyFile} {
		b, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			return fmt.Errorf("--copy-from: %w", err)
		}
		files[name] = b
	}
	pair, err := tls.X509KeyPair(files[transport.CertFile], files[transport.KeyFile])
	if err != nil {
		return fmt.Errorf("--copy-from %s: %w", from, err)
	}
	var trust *transport.Trust
	// Where the trust store comes from, for errors.
	src := filepath.Join(from, transport.TrustFile)
	b, err := os.ReadFile(src)
	switch {
	case trustFile != "":
		if b, err = os.ReadFile(trustFile); err != nil {
			return fmt.Errorf("--trust: %w", err)
		}
		src = trustFile
		files[transport.TrustFile] = b
		trust, err = transport.ParseTrust(b)
	case err == nil:
		files[transport.TrustFile] = b
		trust, err = transport.ParseTrust(b)
	default:
		if b, err = os.ReadFile(filepath.Join(from, transport.CAFile)); err != nil {
			return fmt.Errorf("--copy-from: %s has neither %s nor %s", from, transport.TrustFile, transport.CAFile)
		}
		src = filepath.Join(from, transport.CAFile)
		files[transport.CAFile] = b
		trust, err = transport.LegacyTrust(b)
	}
	if err != nil {
		return fmt.Errorf("--copy-from %s: %s: %w", from, src, err)
	}
	creds, err := transport.NewCredentialsTrust(trust, pair)
	if err != nil {
		return fmt.Errorf("--copy-from %s, trust store %s: %w", from, src, err)
	}
	if err := os.MkdirAll(out, 0o700); err != nil {
		return err
	}
	for name, b := range files {
		// 0600 even over a file already there with another mode.
		if err := transport.WriteFileAtomic(filepath.Join(out, name), b); err != nil {
			return err
		}
	}
	fmt.Printf("%-40s key %s  %s\n", creds.Identity, creds.Key, out)
	return nil
}
