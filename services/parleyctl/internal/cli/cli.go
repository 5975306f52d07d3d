// Package cli implements parleyctl's commands (docs/operations.md "The
// operator CLI: parleyctl"). Each
// command is a thin client of a service's "admin" endpoint over NATS,
// called through pkg/adminclient: the service that owns the data validates
// and stores it. Results are JSON on stdout; failures are one line on
// stderr and a non-zero exit.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/parleyhq/parley/pkg/adminclient"
	"github.com/parleyhq/parley/services/parleyctl/internal/config"
)

// Caller calls a service endpoint; *rpc.Client implements it. Every call
// goes through pkg/adminclient, the one client of the operators' calls.
type Caller = adminclient.Caller

// UsageError is a mistake in the command line; main exits 2 for it.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// errHelp asks Run to print the command's usage.
var errHelp = errors.New("help requested")

func usagef(format string, args ...any) error {
	return &UsageError{msg: fmt.Sprintf(format, args...)}
}

// CLI runs commands against the services.
type CLI struct {
	// settings returns parleyctl's settings; only a command that calls a
	// service asks for them, so help and a mistake in the command line
	// need none.
	settings func() (config.Config, error)
	call     Caller
	// api is the commands' client of the services, over call.
	api    *adminclient.Client
	stdout io.Writer
}

// New returns a CLI with the settings cfg, writing results to stdout.
func New(cfg config.Config, call Caller, stdout io.Writer) *CLI {
	return NewLazy(func() (config.Config, error) { return cfg, nil }, call, stdout)
}

// NewLazy is New with the settings read by settings when a command first
// needs them: main reads the environment then, so that a bad setting
// stands in the way of the commands that use it and of no usage.
func NewLazy(settings func() (config.Config, error), call Caller, stdout io.Writer) *CLI {
	return &CLI{settings: settings, call: call, api: adminclient.New(call), stdout: stdout}
}

type command struct {
	usage string
	run   func(ctx context.Context, c *CLI, args []string) error
}

// commands maps "group verb" (or a lone verb) to its implementation.
var commands = map[string]command{
	"workspace create":  {"--name NAME [--slug SLUG] [--modules developer_api,flows,flow_ai,flow_script] [--ai-limit N] [--rate-per-minute N]", workspaceCreate},
	"workspace update":  {"--workspace ID [--modules ...] [--ai-limit N] [--rate-per-minute N]", workspaceUpdate},
	"workspace feature": {"--workspace ID --feature NAME --on|--off", workspaceFeature},
	"apikey create":     {"--workspace ID [--name NAME]", apikeyCreate},
	"apikey revoke":     {"--id KEY_ID", apikeyRevoke},
	"channel create":    {"--workspace ID --kind telegram|messenger|instagram|webchat [--external-id X] [--token T] [--secret S]", channelCreate},
	"channel set-mode":  {"--channel ID --mode auto|suggest|external", channelSetMode},
	"channel set-flow":  {"--channel ID (--flow FLOW_ID | --clear)", channelSetFlow},
	"webhook resave":    {"--workspace ID", webhookResave},
	"flow publish":      {"--workspace ID --file FLOW.json [--flow ID]", flowPublish},
	"flow deactivate":   {"--flow ID", flowDeactivate},
	"kb add":            {"--workspace ID --title TITLE --file DOC.md", kbAdd},
	"kb list":           {"--workspace ID", kbList},
	"kb delete":         {"--id DOC_ID [--workspace ID]", kbDelete},
	"deliveries replay": {"--workspace ID (--since RFC3339 [--until RFC3339] [--event KIND] | --delivery ID)", deliveriesReplay},
	"operator create":   {"--email E [--workspace ID] --password-stdin", operatorCreate},
	"demo":              {"", demo},
}

// Run executes the command named by args (without the program name). A
// request for help (see Help) prints the usage on stdout and succeeds.
func (c *CLI) Run(ctx context.Context, args []string) error {
	if text, ok := Help(args); ok {
		_, err := fmt.Fprintln(c.stdout, text)
		return err
	}
	name, rest := args[0], args[1:]
	if _, ok := commands[name]; !ok && len(args) >= 2 {
		name, rest = args[0]+" "+args[1], args[2:]
	}
	if cmd, ok := commands[name]; ok {
		err := cmd.run(ctx, c, rest)
		if errors.Is(err, errHelp) {
			return usagef("usage: parleyctl %s %s", name, cmd.usage)
		}
		return err
	}
	if verbs := groupVerbs(args[0]); len(verbs) > 0 {
		return usagef("unknown command %q; parleyctl %s takes %s (run parleyctl %s for their flags)",
			strings.Join(args[:2], " "), args[0], strings.Join(verbs, ", "), args[0])
	}
	return usagef("unknown command %q; run parleyctl help", args[0])
}

// Help returns the usage args ask for, and whether they ask for one: no
// command, or help, -h or --help, lists every command; a group alone
// ("parleyctl channel"), or followed by one of those, lists the group's.
// main answers these before connecting to NATS, so usage never waits on it.
func Help(args []string) (string, bool) {
	if len(args) == 0 || isHelp(args[0]) {
		return "usage:\n" + Usage(), true
	}
	if len(groupVerbs(args[0])) == 0 || (len(args) > 1 && (len(args) > 2 || !isHelp(args[1]))) {
		return "", false
	}
	return "usage:\n" + usageOf(func(name string) bool { return strings.HasPrefix(name, args[0]+" ") }), true
}

func isHelp(arg string) bool { return arg == "help" || arg == "-h" || arg == "--help" }

// groupVerbs lists the verbs of a command group (channel: create, set-mode),
// none for a name that is not a group.
func groupVerbs(group string) []string {
	var verbs []string
	for name := range commands {
		if g, verb, ok := strings.Cut(name, " "); ok && g == group {
			verbs = append(verbs, verb)
		}
	}
	sort.Strings(verbs)
	return verbs
}

// Usage lists every command.
func Usage() string {
	return usageOf(func(string) bool { return true })
}

// usageOf lists the commands whose name keep accepts, one a line, sorted.
func usageOf(keep func(name string) bool) string {
	names := make([]string, 0, len(commands))
	for name := range commands {
		if keep(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "  parleyctl %s %s\n", name, commands[name].usage)
	}
	return strings.TrimRight(b.String(), "\n")
}

func (c *CLI) print(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printAnswer prints a service's answer as parleyctl always has: the JSON
// object the service sent, its keys sorted, rather than in the order of
// the struct adminclient decoded it into.
func (c *CLI) printAnswer(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var answer any
	if err := json.Unmarshal(raw, &answer); err != nil {
		return err
	}
	return c.print(answer)
}

// flags is a flag set that reports mistakes as usage errors and checks
// required flags.
type flags struct {
	*flag.FlagSet
	name string
}

func newFlags(name string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &flags{FlagSet: fs, name: name}
}

func (f *flags) parse(args []string, required ...string) error {
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return usagef("%s: %v", f.name, err)
	}
	if f.NArg() > 0 {
		return usagef("%s: unexpected argument %q", f.name, f.Arg(0))
	}
	for _, name := range required {
		if f.Lookup(name).Value.String() == "" {
			return usagef("%s: --%s is required", f.name, name)
		}
	}
	return nil
}

// set reports whether the flag was given on the command line.
func (f *flags) set(name string) bool {
	found := false
	f.Visit(func(fl *flag.Flag) {
		if fl.Name == name {
			found = true
		}
	})
	return found
}

func splitList(s string) []string {
	out := []string{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
