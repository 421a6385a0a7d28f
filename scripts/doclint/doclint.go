// Package doclint checks what the repository's Markdown documents name against what exists: a
// relative link leads to a file, `make X` is a target of the Makefile, `housekeeper COMMAND
// --flag` is a command and a flag the CLI parses, a chart value named on the operator's pages is
// in the chart's schema, and nothing speaks of how the project was made. `make lint` runs it, and
// its test runs it on every `make test`.
package doclint

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/cli"
)

// Finding is one thing a document names that does not exist, or words it should not use.
type Finding struct {
	File    string // relative to the repository's root
	Line    int
	Problem string
}

func (f Finding) String() string { return fmt.Sprintf("%s:%d: %s", f.File, f.Line, f.Problem) }

// Check reads every Markdown file git knows under root and returns what it names that does not
// exist.
func Check(ctx context.Context, root string) ([]Finding, error) {
	out, err := exec.CommandContext(ctx, "git", "-C", root, "ls-files", "*.md").Output()
	if err != nil {
		return nil, fmt.Errorf("listing the Markdown files: %w", err)
	}
	docs := strings.Fields(string(out))
	if len(docs) == 0 {
		return nil, fmt.Errorf("git knows no Markdown file under %s", root)
	}
	targets, err := makeTargets(filepath.Join(root, "Makefile"))
	if err != nil {
		return nil, err
	}
	values, err := chartValues(filepath.Join(root, "infra", "chart", "values.schema.json"))
	if err != nil {
		return nil, err
	}
	c := checker{root: root, targets: targets, values: values, flags: map[string][]string{}}
	var findings []Finding
	for _, doc := range docs {
		data, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			return nil, err
		}
		findings = append(findings, c.document(doc, string(data))...)
	}
	return findings, nil
}

type checker struct {
	root    string
	targets []string
	values  map[string]bool     // every value path of the chart's schema, dotted: false for an object whose structure it leaves open
	flags   map[string][]string // a command's flags by its words, e.g. "deadletters list"
}

var (
	link        = regexp.MustCompile(`\]\(([^)\s#]*)(#[^)]*)?\)`)
	makeCall    = regexp.MustCompile("(?:^|[`(;&|] *|\\$ )make ([a-z][a-z-]*)")
	codeSpan    = regexp.MustCompile("`([^`]+)`")
	valueName   = regexp.MustCompile(`^[a-z][a-zA-Z]*(\.[a-zA-Z][a-zA-Z0-9]*)+$`)
	commandWord = regexp.MustCompile(`^[a-z][a-z-]*$`)
	flagName    = regexp.MustCompile(`(?:^|\s|\[)--([a-z][a-z0-9-]*)`)
	commandRun  = regexp.MustCompile(`^(?:\$ )?housekeeper((?:\s.*)?)$`)
	// Words about how the project was made, not about the product: the reader has no use for them.
	making = regexp.MustCompile(`(?i)\b(this stop|previous stop|(?:my|the|other|three|two) agents?|subagents?|this session|issue #?[0-9]+|the brief)\b`)
)

// operatorPages are the documents whose code spans name chart values.
var operatorPages = []string{"infra/README.md", "infra/docs/"}

func (c *checker) document(doc, text string) []Finding {
	var findings []Finding
	add := func(line int, format string, args ...any) {
		findings = append(findings, Finding{File: doc, Line: line, Problem: fmt.Sprintf(format, args...)})
	}
	history := doc == "CHANGELOG.md"
	inCode := false
	var command strings.Builder // a code block's command continued over lines ending in \
	commandLine := 0
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode = !inCode
			continue
		}
		if !history {
			if m := making.FindString(line); m != "" {
				add(n, "%q is about how the project was made, not about the product (history belongs in CHANGELOG.md)", m)
			}
		}
		for _, m := range link.FindAllStringSubmatch(line, -1) {
			if m[1] == "" || strings.Contains(m[1], "://") || strings.HasPrefix(m[1], "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(c.root, filepath.Dir(doc), m[1])); err != nil {
				add(n, "links to %s, which does not exist", m[1])
			}
		}
		var commands []string
		if inCode {
			body, _, _ := strings.Cut(line, " #")
			if command.Len() > 0 || commandRun.MatchString(strings.TrimSpace(body)) {
				if command.Len() == 0 {
					commandLine = n
				}
				command.WriteString(strings.TrimSuffix(strings.TrimSpace(body), "\\") + " ")
				if !strings.HasSuffix(strings.TrimSpace(body), "\\") {
					commands = append(commands, command.String())
					command.Reset()
				}
			}
			for _, m := range makeCall.FindAllStringSubmatch(strings.TrimSpace(body), -1) {
				c.target(m[1], func(p string) { add(n, "%s", p) })
			}
		} else {
			commandLine = n
			for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
				span := strings.TrimSpace(m[1])
				if commandRun.MatchString(span) {
					commands = append(commands, span)
				}
				for _, t := range makeCall.FindAllStringSubmatch("`"+span, -1) {
					c.target(t[1], func(p string) { add(n, "%s", p) })
				}
				if c.namesValues(doc) && valueName.MatchString(span) {
					if first, _, _ := strings.Cut(span, "."); c.values[first] && !c.knowsValue(span) {
						add(n, "names the chart value %s, which values.schema.json does not have", span)
					}
				}
			}
		}
		for _, cmd := range commands {
			for _, p := range c.command(cmd) {
				add(commandLine, "%s", p)
			}
		}
	}
	return findings
}

func (c *checker) namesValues(doc string) bool {
	return slices.ContainsFunc(operatorPages, func(p string) bool { return strings.HasPrefix(doc, p) })
}

func (c *checker) target(name string, problem func(string)) {
	if !slices.Contains(c.targets, name) {
		problem(fmt.Sprintf("names make %s; the Makefile has no target %s", name, name))
	}
}

// command checks `housekeeper ...` as a document writes it: its command is one the CLI has, and
// every --flag is one that command (or every command, NATS's) parses. Placeholders are fine:
// "function NAME" is checked against every function's flags.
func (c *checker) command(text string) []string {
	words := strings.Fields(commandRun.FindStringSubmatch(strings.TrimSpace(text))[1])
	var path []string
	for i := 0; i < len(words) && len(path) < 2; i++ {
		w := strings.Trim(words[i], "[]")
		switch {
		case strings.HasPrefix(w, "-"):
			if !strings.Contains(w, "=") && slices.Contains(c.flagsOf(nil), strings.TrimLeft(w, "-")) && i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
				i++ // a NATS flag's value
			}
		case len(path) == 0:
			path = append(path, w)
		case path[0] == "deadletters" || path[0] == "function":
			path = append(path, strings.Split(w, "|")[0])
		default:
			i = len(words)
		}
	}
	if len(path) == 0 || !commandWord.MatchString(path[0]) {
		return nil // housekeeper --version, housekeeper COMMAND --help, its output "housekeeper 0.1.0"
	}
	var candidates [][]string
	if path[0] == "function" && (len(path) < 2 || !slices.Contains(all.Names(), path[1])) {
		for _, name := range all.Names() {
			candidates = append(candidates, []string{"function", name})
		}
	} else {
		candidates = [][]string{path}
	}
	known := c.flagsOf(nil)
	for _, p := range candidates {
		flags := c.flagsOf(p)
		if flags == nil {
			return []string{fmt.Sprintf("names housekeeper %s, which the CLI does not have", strings.Join(p, " "))}
		}
		known = append(known, flags...)
	}
	var problems []string
	for _, m := range flagName.FindAllStringSubmatch(text, -1) {
		if !slices.Contains(known, m[1]) && m[1] != "help" {
			problems = append(problems, fmt.Sprintf("names --%s of housekeeper %s, which does not parse it", m[1], strings.Join(path, " ")))
		}
	}
	return problems
}

// flagsOf are the flags housekeeper's help for the command path lists (nil: the NATS flags
// every command takes), or nil when the CLI has no such command.
func (c *checker) flagsOf(path []string) []string {
	key := strings.Join(path, " ")
	if flags, ok := c.flags[key]; ok {
		return flags
	}
	var out, errOut bytes.Buffer
	var flags []string
	if cli.Main(context.Background(), append(slices.Clone(path), "--help"), &out, &errOut) == 0 {
		flags = []string{}
		for _, m := range regexp.MustCompile(`(?m)^  -{1,2}([a-z][a-z0-9-]*)`).FindAllStringSubmatch(out.String(), -1) {
			flags = append(flags, m[1])
		}
	}
	c.flags[key] = flags
	return flags
}

// knowsValue says whether the schema has the value at path, or an object there whose structure
// it leaves open (gardenlet's gardener.*).
func (c *checker) knowsValue(path string) bool {
	for p := path; ; {
		if known, ok := c.values[p]; ok {
			return p == path || !known
		}
		i := strings.LastIndex(p, ".")
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// makeTargets are the Makefile's targets.
func makeTargets(makefile string) ([]string, error) {
	data, err := os.ReadFile(makefile)
	if err != nil {
		return nil, err
	}
	var targets []string
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z-]*):`).FindAllStringSubmatch(string(data), -1) {
		targets = append(targets, m[1])
	}
	return targets, nil
}

// chartValues are the dotted paths of every value the schema describes (objects' own paths
// included), e.g. "image" and "image.tag"; a "$ref" to the schema's definitions is followed.
func chartValues(schema string) (map[string]bool, error) {
	data, err := os.ReadFile(schema)
	if err != nil {
		return nil, err
	}
	type node struct {
		Ref        string                     `json:"$ref"`
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	var root struct {
		Definitions map[string]json.RawMessage `json:"definitions"`
	}
	if err := json.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", schema, err)
	}
	var decode func(path string, raw json.RawMessage) (node, error)
	decode = func(path string, raw json.RawMessage) (node, error) {
		var n node
		if err := json.Unmarshal(raw, &n); err != nil {
			return n, fmt.Errorf("%s: %s: %w", schema, path, err)
		}
		if name, ok := strings.CutPrefix(n.Ref, "#/definitions/"); ok {
			def, found := root.Definitions[name]
			if !found {
				return n, fmt.Errorf("%s: %s: no definition %s", schema, path, name)
			}
			return decode(path, def)
		}
		return n, nil
	}
	values := map[string]bool{}
	var walk func(prefix string, n node) error
	walk = func(prefix string, n node) error {
		for name, raw := range n.Properties {
			path := strings.TrimPrefix(prefix+"."+name, ".")
			child, err := decode(path, raw)
			if err != nil {
				return err
			}
			values[path] = child.Type != "object" || child.Properties != nil
			if err := walk(path, child); err != nil {
				return err
			}
		}
		return nil
	}
	top, err := decode("", data)
	if err != nil {
		return nil, err
	}
	return values, walk("", top)
}
