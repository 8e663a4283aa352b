package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v3"
)

// strict makes every command of the tree strict, as kubectl's and gh's are:
// a command that takes no arguments (no ArgsUsage) refuses any, naming the
// stray one (`--owners a, b` must not run a job with owner a alone); a
// command group refuses an unknown subcommand; and a flag whose usage
// states its own default does not get urfave's "(default: ...)" too.
func strict(cmd *cli.Command, path string) {
	for _, f := range cmd.Flags {
		if df, ok := f.(cli.DocGenerationFlag); ok {
			u := df.GetUsage()
			if strings.Contains(u, "(default") || strings.Contains(u, "default:") || strings.Contains(u, "(0:") {
				setField(f, "HideDefault", true)
			}
		}
	}
	switch {
	case cmd.Action != nil && cmd.ArgsUsage == "":
		action := cmd.Action
		cmd.Action = func(ctx context.Context, c *cli.Command) error {
			if c.Args().Len() > 0 {
				return strayArgument(path, c.Args().Slice())
			}
			return action(ctx, c)
		}
	case cmd.Action == nil && len(cmd.Commands) > 0:
		cmd.Action = func(ctx context.Context, c *cli.Command) error {
			if c.Args().Len() > 0 {
				return fmt.Errorf("unknown command %q for %q; `%s --help` lists its commands", c.Args().First(), path, path)
			}
			return cli.ShowSubcommandHelp(c)
		}
	}
	for _, sub := range cmd.Commands {
		strict(sub, path+" "+sub.Name)
	}
}

// strayArgument is the error of a command given arguments it does not take.
func strayArgument(path string, args []string) error {
	hint := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		hint = "; a list flag takes one value, without spaces (--owners a,b), or is repeated (--owners a --owners b)"
	}
	return fmt.Errorf("%s takes no arguments, got %q%s", path, args[0], hint)
}

// setField sets a flag's field by name when it has one (urfave's flags are
// generic structs).
func setField(f cli.Flag, name string, v any) {
	rv := reflect.ValueOf(f)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return
	}
	if fv := rv.Elem().FieldByName(name); fv.IsValid() && fv.CanSet() && fv.Type() == reflect.TypeOf(v) {
		fv.Set(reflect.ValueOf(v))
	}
}

// buildVersions says what this binary is: the module's version, the VCS
// commit it was built from and lattigo's version, all read from the build
// information the Go toolchain embeds.
func buildVersions() (mod, commit, lattigo string) {
	mod, commit, lattigo = "(devel)", "unknown", "unknown"
	modified := false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			mod = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		for _, d := range bi.Deps {
			if d.Path == "github.com/tuneinsight/lattigo/v5" {
				lattigo = d.Version
			}
		}
	}
	if modified {
		commit += " (modified)"
	}
	if commit == "unknown" {
		commit = "unknown (built without VCS information)"
	}
	return mod, commit, lattigo
}

// versionInfo is what `fedpca version` prints.
func versionInfo() string {
	mod, commit, lattigo := buildVersions()
	return fmt.Sprintf("fedpca  %s\ncommit  %s\ngo      %s %s/%s\nlattigo %s", mod, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH, lattigo)
}

// versionLine is the version on one line (--help).
func versionLine() string {
	mod, commit, lattigo := buildVersions()
	return fmt.Sprintf("%s (commit %s, %s, lattigo %s)", mod, commit, runtime.Version(), lattigo)
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version, commit, Go version and lattigo version",
		Description: `The same as fedpca --version:

  fedpca version`,
		Action: func(context.Context, *cli.Command) error {
			fmt.Println(versionInfo())
			return nil
		},
	}
}

// grpcFraming is how gRPC status errors print; people get the message.
var grpcFraming = regexp.MustCompile(`rpc error: code = [A-Za-z]+ desc = `)

// errorText is an error as the user reads it: without gRPC's framing.
func errorText(err error) string {
	return grpcFraming.ReplaceAllString(err.Error(), "")
}

// errInterrupted ends a command stopped by Ctrl-C after it said what to do.
var errInterrupted = errors.New("interrupted")

// exitCode is the process's exit status for a command's error: 130 after
// an interrupt (as shells report SIGINT), 1 otherwise.
func exitCode(err error) int {
	if errors.Is(err, errInterrupted) || errors.Is(err, context.Canceled) {
		return 130
	}
	return 1
}

// cliReferenceCommand writes docs/CLI.md from the command tree (hidden;
// `make docs` runs it, `make check` compares).
func cliReferenceCommand() *cli.Command {
	return &cli.Command{
		Name:   "cli-reference",
		Usage:  "write the CLI reference (Markdown) generated from the commands",
		Hidden: true,
		Description: `make docs runs it:

  fedpca cli-reference > docs/CLI.md`,
		Action: func(context.Context, *cli.Command) error {
			return writeReference(os.Stdout, app())
		},
	}
}

// writeReference writes every visible command's usage, description and
// flags as Markdown.
func writeReference(w io.Writer, root *cli.Command) error {
	fmt.Fprintf(w, "# fedpca command reference\n\n<!-- Generated by `fedpca cli-reference` (make docs) from the code; make check fails when it is stale. Do not edit. -->\n\n")
	fmt.Fprintf(w, "%s.\n\n%s\n\n", root.Usage, root.Description)
	var walk func(c *cli.Command, path string)
	walk = func(c *cli.Command, path string) {
		for _, sub := range c.Commands {
			if sub.Hidden {
				continue
			}
			p := path + " " + sub.Name
			fmt.Fprintf(w, "## %s\n\n%s.\n\n", p, sub.Usage)
			usage := p
			if len(sub.Commands) > 0 {
				usage += " COMMAND"
			}
			if len(sub.Flags) > 0 {
				usage += " [options]"
			}
			if sub.ArgsUsage != "" {
				usage += " " + sub.ArgsUsage
			}
			fmt.Fprintf(w, "```\n%s\n```\n\n", usage)
			if sub.Description != "" {
				fmt.Fprintf(w, "```text\n%s\n```\n\n", strings.TrimSpace(sub.Description))
			}
			if len(sub.Commands) > 0 {
				fmt.Fprintf(w, "| command | what |\n|---|---|\n")
				for _, s := range sub.Commands {
					if !s.Hidden {
						fmt.Fprintf(w, "| `%s %s` | %s |\n", p, s.Name, mdCell(s.Usage))
					}
				}
				fmt.Fprintln(w)
			}
			if len(sub.Flags) > 0 {
				fmt.Fprintf(w, "| flag | default | environment | what |\n|---|---|---|---|\n")
				for _, f := range sub.Flags {
					df, ok := f.(cli.DocGenerationFlag)
					if !ok {
						continue
					}
					if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
						continue
					}
					var names []string
					for _, n := range f.Names() {
						dash := "--"
						if len(n) == 1 {
							dash = "-"
						}
						names = append(names, dash+n)
					}
					def := ""
					if df.TakesValue() {
						def = df.GetDefaultText()
						if def == "" {
							def = df.GetValue()
						}
						if hd, ok := reflectBool(f, "HideDefault"); ok && hd {
							def = ""
						}
					}
					if def != "" {
						def = "`" + def + "`"
					}
					fmt.Fprintf(w, "| `%s` | %s | `%s` | %s |\n", strings.Join(names, "`, `"), def, strings.Join(df.GetEnvVars(), " "), mdCell(df.GetUsage()))
				}
				fmt.Fprintln(w)
			}
			walk(sub, p)
		}
	}
	walk(root, root.Name)
	return nil
}

func reflectBool(f cli.Flag, name string) (bool, bool) {
	rv := reflect.ValueOf(f)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return false, false
	}
	fv := rv.Elem().FieldByName(name)
	if !fv.IsValid() || fv.Kind() != reflect.Bool {
		return false, false
	}
	return fv.Bool(), true
}

func mdCell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}
