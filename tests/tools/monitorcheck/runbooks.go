package main

// Runbooks: every alert must carry a `runbook_url` annotation that points at a section of
// the repository's docs/runbooks.md, i.e. an https URL of that file whose fragment is the
// GitHub anchor of one of its headings.

import (
	"bufio"
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// runbookFile is where the runbooks are, relative to the repository root.
const runbookFile = "docs/runbooks.md"

// findRunbooks returns path if set, else docs/runbooks.md in the working directory or the
// nearest of its parents that has one (the e2e test runs this from the repository root).
func findRunbooks(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		candidate := filepath.Join(dir, runbookFile)
		if _, err := os.Stat(candidate); err == nil {
			return candidate, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no %s in the working directory or above it (use -runbooks)", runbookFile)
		}
		dir = parent
	}
}

// anchors returns the GitHub anchors of the headings of a Markdown document: the heading's
// text in lower case, spaces to '-', every character other than a letter, a digit, '-' and
// '_' dropped; a repeated anchor gets '-1', '-2', ... as on GitHub. Headings inside fenced
// code blocks do not count.
func anchors(markdown []byte) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	scanner := bufio.NewScanner(bytes.NewReader(markdown))
	for scanner.Scan() {
		line := scanner.Text()
		trimmed := strings.TrimLeft(line, " ")
		if len(line)-len(trimmed) < 4 {
			if marker := fenceMarker(trimmed); marker != "" {
				switch {
				case fence == "":
					fence = marker
				case strings.HasPrefix(marker, fence) && strings.TrimSpace(trimmed[len(marker):]) == "":
					fence = ""
				}
				continue
			}
		}
		if fence != "" {
			continue
		}
		text, ok := heading(line)
		if !ok {
			continue
		}
		anchor := anchorOf(text)
		if n, dup := seen[anchor]; dup {
			seen[anchor] = n + 1
			anchor += "-" + strconv.Itoa(n+1)
		} else {
			seen[anchor] = 0
		}
		out[anchor] = true
	}
	return out
}

// fenceMarker is the run of ``` or ~~~ (3 or more) a line starts with, or "".
func fenceMarker(line string) string {
	for _, c := range []string{"`", "~"} {
		n := len(line) - len(strings.TrimLeft(line, c))
		if n >= 3 {
			return line[:n]
		}
	}
	return ""
}

// heading returns the text of an ATX heading line (`# Title`, up to `###### Title`, at
// most 3 spaces of indent, an optional closing run of '#').
func heading(line string) (string, bool) {
	trimmed := strings.TrimLeft(line, " ")
	if len(line)-len(trimmed) > 3 {
		return "", false
	}
	level := len(trimmed) - len(strings.TrimLeft(trimmed, "#"))
	if level < 1 || level > 6 {
		return "", false
	}
	rest := trimmed[level:]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	if closing := strings.TrimRight(rest, "#"); closing != rest && (closing == "" || strings.HasSuffix(closing, " ")) {
		rest = strings.TrimSpace(closing)
	}
	return rest, true
}

// anchorOf is GitHub's anchor for a heading's text.
func anchorOf(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkRunbooks reports the alerts whose runbook_url is missing, is not an http(s) URL of
// docs/runbooks.md with a fragment, or names an anchor no heading of file (the local copy of
// docs/runbooks.md, whose headings are known) has.
func checkRunbooks(urls map[string]string, known map[string]bool, file string) []string {
	var problems []string
	for _, alert := range sortedKeys(urls) {
		raw := urls[alert]
		if raw == "" {
			problems = append(problems, fmt.Sprintf("alert %s: no runbook_url annotation", alert))
			continue
		}
		u, err := url.Parse(raw)
		if err != nil {
			problems = append(problems, fmt.Sprintf("alert %s: runbook_url %q: %v", alert, raw, err))
			continue
		}
		if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || !strings.HasSuffix(u.Path, "/"+runbookFile) {
			problems = append(problems, fmt.Sprintf("alert %s: runbook_url %q is not an http(s) URL of %s", alert, raw, runbookFile))
			continue
		}
		if u.Fragment == "" {
			problems = append(problems, fmt.Sprintf("alert %s: runbook_url %q names no section (#anchor)", alert, raw))
			continue
		}
		if !known[u.Fragment] {
			problems = append(problems, fmt.Sprintf("alert %s: runbook_url %q: %s has no heading with anchor %q",
				alert, raw, file, u.Fragment))
		}
	}
	return problems
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
