package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shellLines returns the commands of the sh code blocks of a Markdown
// file, a line continued with a backslash joined to the next.
func shellLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in, cont := false, ""
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			in = !in && strings.TrimPrefix(line, "```") == "sh"
			cont = ""
			continue
		case !in:
			continue
		}
		line = cont + strings.TrimSpace(line)
		if strings.HasSuffix(line, "\\") {
			cont = strings.TrimSuffix(line, "\\")
			continue
		}
		cont = ""
		out = append(out, line)
	}
	// And the commands quoted in the prose, over line ends.
	prose := strings.Join(strings.Fields(string(b)), " ")
	for _, span := range strings.Split(prose, "`")[1:] {
		if strings.HasPrefix(span, "claude mcp add ") {
			out = append(out, span)
		}
	}
	return out
}

// TestDocsClaudeAddTakesTheNameFirst: `claude mcp add` reads every word
// after --env (or --header) up to the next option as one more value, so a
// command with either names the server right after add, or ends with it.
func TestDocsClaudeAddTakesTheNameFirst(t *testing.T) {
	files, _ := filepath.Glob("../../docs/editors/*.md")
	files = append(files, "../../README.md")
	checked := 0
	for _, f := range files {
		for _, line := range shellLines(t, f) {
			if !strings.HasPrefix(line, "claude mcp add ") {
				continue
			}
			w := strings.Fields(line)
			for i, word := range w {
				if word != "--env" && word != "-e" && word != "--header" && word != "-H" {
					continue
				}
				checked++
				// After the option's value, only options, -- or the end.
				if i+2 < len(w) && !strings.HasPrefix(w[i+2], "-") && !strings.HasPrefix(w[i+1], "\"") {
					t.Errorf("%s: %q: %s takes the word after its value", f, line, word)
				}
				if i+1 < len(w) && strings.HasPrefix(w[i+1], "\"") {
					// a quoted header: find its end
					j := i + 1
					for ; j < len(w) && !strings.HasSuffix(w[j], "\""); j++ {
					}
					if j+1 < len(w) && !strings.HasPrefix(w[j+1], "-") {
						t.Errorf("%s: %q: %s takes the word after its value", f, line, word)
					}
				}
			}
		}
	}
	if checked < 2 {
		t.Fatalf("%d claude mcp add commands with --env or --header found, want the editor page's and the README's", checked)
	}
}

// TestDocsEditorPagesSayWhatStopsAServer: Claude Code's project servers
// wait for an approval, and Gemini CLI starts none in an untrusted folder.
func TestDocsEditorPagesSayWhatStopsAServer(t *testing.T) {
	for page, words := range map[string][]string{
		"claude-code.md": {"approve", "pending approval", "claude mcp list"},
		"gemini-cli.md":  {"trust", "folderTrust", "trustedFolders.json", "npx"},
	} {
		b, err := os.ReadFile(filepath.Join("../../docs/editors", page))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(string(b)), " ")
		for _, w := range words {
			if !strings.Contains(text, w) {
				t.Errorf("%s does not say %q", page, w)
			}
		}
	}
}

// TestDocsReadmeHTTPLeavesAToken: the README's HTTP start exports the
// token before serve, so the shell still holds it, and a client command
// sends it.
func TestDocsReadmeHTTPLeavesAToken(t *testing.T) {
	lines := shellLines(t, "../../README.md")
	exported, served, sent := -1, -1, false
	for i, line := range lines {
		switch {
		case strings.HasPrefix(line, "export MEMGATE_TOKEN="):
			exported = i
		case strings.HasPrefix(line, "memgate serve --transport http") && served < 0:
			served = i
		case strings.Contains(line, "MEMGATE_TOKEN=") && !strings.HasPrefix(line, "export "):
			t.Errorf("README: %q sets a token the shell does not keep", line)
		}
		if strings.Contains(line, "Bearer $MEMGATE_TOKEN") {
			sent = true
		}
	}
	if exported < 0 || served < exported || !sent {
		t.Fatalf("README: export at line %d, serve at %d, a client sends the token: %v", exported, served, sent)
	}
}
