package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/housekeeper-dev/housekeeper/functions/config"
)

// commandFlags is a command's flag set and what its help says about it.
type commandFlags struct {
	*flag.FlagSet
	synopsis string // what follows the command's name on its usage line
	summary  string
}

func newFlags(name, synopsis, summary string) *commandFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &commandFlags{FlagSet: fs, synopsis: synopsis, summary: summary}
}

// helpError carries a command's help: printed on --help or -h instead of running the command.
type helpError string

func (h helpError) Error() string { return "help requested" }

// parse parses args and the HOUSEKEEPER_* variables of the flags. --help or -h answers with the
// command's help and runs nothing; an argument that is not a flag is refused.
func (c *commandFlags) parse(args []string) error {
	err := config.Parse(c.FlagSet, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return helpError(c.help())
	case err != nil:
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: "); ok {
			name = "--" + strings.TrimLeft(name, "-")
			return fmt.Errorf("%w: %s: unknown flag %s (housekeeper %s --help lists its flags; the NATS flags %s go before or after the command)",
				errUsage, c.Name(), name, c.Name(), globalFlagNames())
		}
		return fmt.Errorf("%w: %s: %v", errUsage, c.Name(), err)
	case c.NArg() > 0:
		return fmt.Errorf("%w: %s takes no arguments, got %q", errUsage, c.Name(), c.Args())
	}
	return nil
}

func (c *commandFlags) help() string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: housekeeper [--nats-url URL ...] %s %s\n\n%s\n", c.Name(), c.synopsis, c.summary)
	has := false
	c.VisitAll(func(*flag.Flag) { has = true })
	if has {
		b.WriteString("\nflags:\n")
		c.SetOutput(&b)
		c.PrintDefaults()
		c.SetOutput(io.Discard)
	}
	b.WriteString("\nThe NATS flags (" + globalFlagNames() + "; housekeeper --help) go before or after the command.\n")
	b.WriteString("Every flag can also be set as HOUSEKEEPER_<FLAG> in the environment (--max-deliver: HOUSEKEEPER_MAX_DELIVER).\n")
	return b.String()
}

// isHelp says whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}
