package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// The docs a newcomer follows: README.md and docs/*.md. These tests start
// no service; they read the files.

const docsRoot = "../.."

// docFiles are README.md and docs/*.md, relative to the module root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(docsRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range more {
		rel, err := filepath.Rel(docsRoot, f)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	sort.Strings(files[1:])
	if len(files) < 3 {
		t.Fatalf("docs: found only %v", files)
	}
	return files
}

// docLine is one line of a markdown file, split into its prose (code
// spans blanked) and its code: the inline code spans, or the whole line
// inside a fenced block.
type docLine struct {
	file   string
	num    int
	raw    string
	fenced bool
	prose  string
	code   []string
}

var fenceRE = regexp.MustCompile("^\\s*(```+|~~~+)")

// docLines reads a markdown file line by line. A fenced block's lines
// ending in a backslash are joined to the next, as the shell does.
func docLines(t *testing.T, file string) []docLine {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(docsRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	var out []docLine
	var fence string
	var cont *docLine
	for i, l := range strings.Split(string(b), "\n") {
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			switch {
			case fence == "":
				fence = m[1]
				continue
			case strings.HasPrefix(m[1], fence[:1]) && len(m[1]) >= len(fence) && strings.TrimSpace(l) == m[1]:
				fence, cont = "", nil
				continue
			}
		}
		if fence != "" {
			if cont != nil {
				cont.code[0] += " " + strings.TrimSuffix(l, "\\")
			} else {
				out = append(out, docLine{file: file, num: i + 1, raw: l, fenced: true, code: []string{strings.TrimSuffix(l, "\\")}})
			}
			cont = nil
			if strings.HasSuffix(l, "\\") {
				cont = &out[len(out)-1]
			}
			continue
		}
		dl := docLine{file: file, num: i + 1, raw: l}
		var prose strings.Builder
		for rest := l; ; {
			open := strings.IndexByte(rest, '`')
			if open < 0 {
				prose.WriteString(rest)
				break
			}
			n := open
			for n < len(rest) && rest[n] == '`' {
				n++
			}
			ticks := rest[open:n]
			end := strings.Index(rest[n:], ticks)
			if end < 0 {
				prose.WriteString(rest)
				break
			}
			prose.WriteString(rest[:open])
			prose.WriteString(" ")
			dl.code = append(dl.code, strings.TrimSpace(rest[n:n+end]))
			rest = rest[n+end+len(ticks):]
		}
		dl.prose = prose.String()
		out = append(out, dl)
	}
	return out
}

// composeServices are the services of a compose file and the profiles
// they are in.
func composeServices(t *testing.T, file string) (services, profiles map[string]bool) {
	t.Helper()
	docs := yamlDocs(t, filepath.Join(docsRoot, file))
	svcs, _ := dig(docs[0], "services").(map[string]any)
	if len(svcs) == 0 {
		t.Fatalf("%s has no services", file)
	}
	services, profiles = map[string]bool{}, map[string]bool{}
	for name := range svcs {
		services[name] = true
		for _, p := range toStrings(dig(svcs[name], "profiles")) {
			profiles[p] = true
		}
	}
	return services, profiles
}

var composeCmdRE = regexp.MustCompile(`\bdocker(?: |-)compose(?:\s|$)`)

// composeGlobalFlags and composeValueFlags are the flags of docker
// compose, and of its subcommands, that take a value as the next word.
var composeGlobalFlags = map[string]bool{
	"-f": true, "--file": true, "-p": true, "--project-name": true, "--profile": true,
	"--env-file": true, "--project-directory": true, "--ansi": true, "--progress": true, "--parallel": true,
}

var composeValueFlags = map[string]bool{
	"-e": true, "--env": true, "-u": true, "--user": true, "-w": true, "--workdir": true,
	"--index": true, "--entrypoint": true, "--name": true, "-p": true, "--publish": true, "-v": true,
	"--volume": true, "-l": true, "--label": true, "-n": true, "--tail": true,
	"--since": true, "--until": true, "-t": true, "--timeout": true, "--scale": true,
	"--exit-code-from": true, "--pull": true, "--wait-timeout": true, "--signal": true, "-s": true,
}

// composeSubcommands says which words after a subcommand are services:
// "first" the first (the rest is the command to run), "all" every one,
// "none" none.
var composeSubcommands = map[string]string{
	"exec": "first", "run": "first", "port": "first", "attach": "first",
	"up": "all", "down": "all", "start": "all", "stop": "all", "restart": "all",
	"logs": "all", "ps": "all", "build": "all", "pull": "all", "push": "all",
	"rm": "all", "kill": "all", "pause": "all", "unpause": "all", "top": "all",
	"create": "all", "events": "all", "images": "all", "watch": "all", "wait": "all",
	"config": "none", "version": "none", "ls": "none", "cp": "none",
}

// composeCommand is one docker compose command line of the docs, parsed.
type composeCommand struct {
	where    string
	file     string // -f, or docker-compose.yml
	profiles []string
	sub      string
	services []string
}

// parseCompose parses the words after "docker compose". A word that ends
// the command (a pipe, a redirect, a ;, a &&) stops it; placeholders such
// as <service> and … are skipped.
func parseCompose(where, rest string) (composeCommand, error) {
	c := composeCommand{where: where, file: "docker-compose.yml"}
	var words []string
	for _, w := range strings.Fields(rest) {
		if strings.ContainsAny(w, "|;&>") && !(strings.HasPrefix(w, "<") && strings.HasSuffix(w, ">")) || w == "<" || strings.HasPrefix(w, "#") {
			break
		}
		words = append(words, strings.TrimRight(w, ",.)"))
	}
	mode := ""
	for i := 0; i < len(words); i++ {
		w := words[i]
		value := func() string {
			if k, v, ok := strings.Cut(w, "="); ok && strings.HasPrefix(k, "-") {
				w = k
				return v
			}
			takes := composeGlobalFlags[w]
			if c.sub != "" {
				// logs -t is --timestamps; stop -t is --timeout.
				takes = composeValueFlags[w] && !(c.sub == "logs" && w == "-t")
			}
			if takes && i+1 < len(words) {
				i++
				return words[i]
			}
			return ""
		}
		switch {
		case strings.HasPrefix(w, "-"):
			v := value()
			if c.sub == "" {
				switch w {
				case "-f", "--file":
					c.file = v
				case "--profile":
					c.profiles = append(c.profiles, v)
				}
			}
		case c.sub == "":
			c.sub = w
			m, ok := composeSubcommands[w]
			if !ok {
				return c, fmt.Errorf("%s: docker compose %s: a subcommand this test does not know; add it to composeSubcommands", where, w)
			}
			mode = m
		case strings.HasPrefix(w, "<") || strings.Contains(w, "…") || strings.Contains(w, "...") || strings.HasPrefix(w, "$"):
			// A placeholder.
			if mode == "first" {
				return c, nil
			}
		case mode == "none":
			return c, nil
		default:
			c.services = append(c.services, w)
			if mode == "first" {
				return c, nil
			}
		}
	}
	return c, nil
}

// docComposeCommands are the docker compose command lines of the docs,
// in code spans and fenced blocks. One in prose is an error: it could
// name any service unseen.
func docComposeCommands(t *testing.T) []composeCommand {
	t.Helper()
	var out []composeCommand
	for _, f := range docFiles(t) {
		for _, l := range docLines(t, f) {
			where := fmt.Sprintf("%s:%d", l.file, l.num)
			if composeCmdRE.MatchString(l.prose) {
				t.Errorf("%s: a docker compose command outside a code span; put it in backticks: %s", where, strings.TrimSpace(l.prose))
			}
			for _, code := range l.code {
				for _, loc := range composeCmdRE.FindAllStringIndex(code, -1) {
					c, err := parseCompose(where, code[loc[1]:])
					if err != nil {
						t.Error(err)
						continue
					}
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// TestDocsComposeServices: every docker compose command of README.md and
// docs/*.md names services (and profiles) that docker-compose.yml has.
func TestDocsComposeServices(t *testing.T) {
	cmds := docComposeCommands(t)
	if len(cmds) < 3 {
		t.Fatalf("found %d docker compose commands in the docs; the parser is broken", len(cmds))
	}
	exec := false
	for _, c := range cmds {
		services, profiles := composeServices(t, c.file)
		if c.sub == "" {
			t.Errorf("%s: docker compose without a subcommand", c.where)
		}
		for _, s := range c.services {
			if !services[s] {
				t.Errorf("%s: docker compose %s %s: %s has no service %q (it has %s)", c.where, c.sub, s, c.file, s, strings.Join(sortedKeys(services), ", "))
			}
		}
		for _, p := range c.profiles {
			if !profiles[p] {
				t.Errorf("%s: docker compose --profile %s: no service of %s is in profile %q", c.where, p, c.file, p)
			}
		}
		exec = exec || c.sub == "exec" && len(c.services) == 1
	}
	if !exec {
		t.Error("no docker compose exec <service> in the docs: the quick start's tail is gone, or the parser is broken")
	}
}

func TestParseCompose(t *testing.T) {
	for _, tc := range []struct {
		in       string
		sub      string
		services []string
		profiles []string
	}{
		{"exec relay cdc-relay tail --from-beginning outbox.event.Order", "exec", []string{"relay"}, nil},
		{"exec -T -e A=1 cdc-relay cdc-relay check", "exec", []string{"cdc-relay"}, nil},
		{"--profile monitoring up", "up", nil, []string{"monitoring"}},
		{"--profile=monitoring up -d prometheus grafana", "up", []string{"prometheus", "grafana"}, []string{"monitoring"}},
		{"logs -f --tail 100 kafka | grep ERROR", "logs", []string{"kafka"}, nil},
		{"-f docker-compose.yml -p demo logs -t -f kafka", "logs", []string{"kafka"}, nil},
		{"stop -t 30 cdc-relay", "stop", []string{"cdc-relay"}, nil},
		{"stop relay", "stop", []string{"relay"}, nil},
		{"run --rm cdc-relay check", "run", []string{"cdc-relay"}, nil},
		{"up -d postgres kafka && go test ./...", "up", []string{"postgres", "kafka"}, nil},
		{"logs <service>", "logs", nil, nil},
		{"up", "up", nil, nil},
	} {
		c, err := parseCompose("test", tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if c.sub != tc.sub || fmt.Sprint(c.services) != fmt.Sprint(tc.services) || fmt.Sprint(c.profiles) != fmt.Sprint(tc.profiles) {
			t.Errorf("%q: got %s %v %v, want %s %v %v", tc.in, c.sub, c.services, c.profiles, tc.sub, tc.services, tc.profiles)
		}
	}
	if _, err := parseCompose("test", "frobnicate relay"); err == nil {
		t.Error("an unknown subcommand passed")
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var (
	// mdLinkRE is an inline link or image: [text](target "title").
	mdLinkRE = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// mdRefRE is a reference definition: [label]: target.
	mdRefRE     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+<?([^\s>]+)>?`)
	atxRE       = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$`)
	setextRE    = regexp.MustCompile(`^\s{0,3}(=+|-+)\s*$`)
	htmlIDRE    = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	headLinkRE  = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTagRE   = regexp.MustCompile(`<[^>]+>`)
	urlSchemeRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// githubSlug is the anchor GitHub gives a heading: its text lowercased,
// punctuation but - and _ removed, each space a -.
func githubSlug(heading string) string {
	text := headLinkRE.ReplaceAllString(heading, "$1")
	text = htmlTagRE.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// docAnchors are the anchors of a markdown file: its headings' slugs, a
// repeated one with -1, -2, … as GitHub numbers them, and explicit
// <a name> or id anchors.
func docAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	anchors := map[string]bool{}
	seen := map[string]int{}
	add := func(heading string) {
		s := githubSlug(heading)
		if n := seen[s]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	}
	lines := docLines(t, file)
	for i, l := range lines {
		if l.fenced {
			continue
		}
		for _, m := range htmlIDRE.FindAllStringSubmatch(l.raw, -1) {
			anchors[m[1]] = true
		}
		if m := atxRE.FindStringSubmatch(l.raw); m != nil {
			add(m[2])
			continue
		}
		if i > 0 && setextRE.MatchString(l.raw) {
			prev := lines[i-1]
			if !prev.fenced && prev.num == l.num-1 && strings.TrimSpace(prev.raw) != "" &&
				!atxRE.MatchString(prev.raw) && !strings.HasPrefix(strings.TrimSpace(prev.raw), "|") {
				add(strings.TrimSpace(prev.raw))
			}
		}
	}
	return anchors
}

// TestDocsRelativeLinks: every relative link of README.md and docs/*.md
// names a file or directory that exists, and its #anchor, if any, a
// heading of that file.
func TestDocsRelativeLinks(t *testing.T) {
	anchors := map[string]map[string]bool{}
	checked := 0
	for _, f := range docFiles(t) {
		for _, l := range docLines(t, f) {
			var targets []string
			for _, m := range mdLinkRE.FindAllStringSubmatch(l.prose, -1) {
				targets = append(targets, m[1])
			}
			if m := mdRefRE.FindStringSubmatch(l.prose); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				if urlSchemeRE.MatchString(target) || strings.HasPrefix(target, "//") {
					continue // absolute: http(s), mailto
				}
				checked++
				where := fmt.Sprintf("%s:%d: link %s", f, l.num, target)
				path, anchor, _ := strings.Cut(target, "#")
				path, err := url.PathUnescape(path)
				if err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
				dest := f
				if path != "" {
					if strings.HasPrefix(path, "/") {
						dest = filepath.ToSlash(filepath.Clean(strings.TrimPrefix(path, "/")))
					} else {
						dest = filepath.ToSlash(filepath.Join(filepath.Dir(f), path))
					}
					if strings.HasPrefix(dest, "../") {
						t.Errorf("%s: leaves the repository", where)
						continue
					}
					if _, err := os.Stat(filepath.Join(docsRoot, dest)); err != nil {
						t.Errorf("%s: %s does not exist", where, dest)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s: an anchor into %s, which is not markdown", where, dest)
					continue
				}
				if anchors[dest] == nil {
					anchors[dest] = docAnchors(t, dest)
				}
				a, err := url.PathUnescape(anchor)
				if err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
				if !anchors[dest][strings.ToLower(a)] {
					t.Errorf("%s: %s has no heading with anchor #%s", where, dest, a)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found in the docs; the parser is broken")
	}
}

func TestGithubSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Quick start":                        "quick-start",
		"What `cdc-relay check` asks Kafka":  "what-cdc-relay-check-asks-kafka",
		"1. Make the records byte-for-byte":  "1-make-the-records-byte-for-byte",
		"A. Reuse Debezium's slot":           "a-reuse-debeziums-slot",
		"The checkpoint: a lost slot":        "the-checkpoint-a-lost-slot",
		"Exactly-once: `exactly.once.x` set": "exactly-once-exactlyoncex-set",
		"snake_case and [a link](x.md)":      "snake_case-and-a-link",
	} {
		if got := githubSlug(in); got != want {
			t.Errorf("githubSlug(%q) = %q, want %q", in, got, want)
		}
	}
}

// codeDocCiteRE is a citation of the docs in Go source: docs/ and a
// file name in capitals, then maybe the section it names in quotes (escaped
// inside a string literal), as the runbook's "The slot is gone".
var codeDocCiteRE = regexp.MustCompile(`docs/([A-Z][A-Z-]*\.md)(?:,? *\(?\\?"([^"\\]+)\\?")?`)

// TestDocsCitedFromCode: every file of docs/ that a Go file names (an error
// message, a help text, a comment) exists, and every section it names by
// title is a heading of that file, or the bold lead of a paragraph.
func TestDocsCitedFromCode(t *testing.T) {
	cited := 0
	err := filepath.WalkDir(docsRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range codeDocCiteRE.FindAllStringSubmatch(line, -1) {
				cited++
				where := fmt.Sprintf("%s:%d: docs/%s", path, i+1, m[1])
				doc, err := os.ReadFile(filepath.Join(docsRoot, "docs", m[1]))
				if err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
				if m[2] != "" && !docHasSection(string(doc), m[2]) {
					t.Errorf("%s: no heading or bold lead %q in docs/%s", where, m[2], m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited == 0 {
		t.Fatal("no docs/*.md cited in any Go file; the pattern is broken")
	}
}

// docHasSection reports whether a markdown text has a heading that starts
// with title (code spans unquoted), or a paragraph led by **title**.
func docHasSection(doc, title string) bool {
	want := strings.ToLower(strings.TrimSuffix(title, "."))
	for _, l := range strings.Split(doc, "\n") {
		if m := atxRE.FindStringSubmatch(l); m != nil && strings.HasPrefix(strings.ToLower(strings.ReplaceAll(m[2], "`", "")), want) {
			return true
		}
		lead := strings.TrimLeft(l, "*- ")
		if strings.HasPrefix(l, "**") || strings.HasPrefix(strings.TrimSpace(l), "* **") {
			if strings.HasPrefix(strings.ToLower(strings.ReplaceAll(lead, "`", "")), want) {
				return true
			}
		}
	}
	return false
}
