package race_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
)

// docs/learn.md quotes what the teaching pairs print: each pair's outputs
// and the lanes of its runs sit in the page in blocks like
//
//	<!-- learn:4/naive -->
//	```text
//	...
//	```
//
// and each pair compares what it printed with its blocks, so the page
// cannot drift from the tests. Run the pairs with CASBREAKER_LEARN_UPDATE=1
// to write what they print into the page instead (a new block needs its
// marker line and an empty text fence first).
const (
	learnPath      = "../docs/learn.md"
	learnUpdateEnv = "CASBREAKER_LEARN_UPDATE"
	// porcupineHTMLEnv names a directory: every history a teaching pair
	// checks with porcupine is also drawn there as porcupine's interactive
	// HTML page, <test name>.html.
	porcupineHTMLEnv = "CASBREAKER_PORCUPINE_HTML"
)

var learnMu sync.Mutex // the page is read and rewritten by one pair at a time

// learnBlock checks that the block called name in docs/learn.md, a text
// fence, holds text, or writes text there under CASBREAKER_LEARN_UPDATE=1.
func learnBlock(t testing.TB, name, text string) { learnFence(t, name, "text", text) }

// learnFence is learnBlock for a fence of language lang.
func learnFence(t testing.TB, name, lang, text string) {
	t.Helper()
	learnMu.Lock()
	defer learnMu.Unlock()
	page, err := os.ReadFile(learnPath)
	if err != nil {
		t.Fatalf("reading the page the pairs are quoted in: %v", err)
	}
	marker := []byte("<!-- learn:" + name + " -->\n```" + lang + "\n")
	start := bytes.Index(page, marker)
	if start < 0 {
		t.Fatalf("docs/learn.md has no block %q: add the line <!-- learn:%s --> and an empty ```%s fence under it, then run with %s=1", name, name, lang, learnUpdateEnv)
	}
	start += len(marker)
	end := bytes.Index(page[start:], []byte("```\n"))
	if end < 0 {
		t.Fatalf("docs/learn.md: block %q has no closing fence", name)
	}
	end += start
	if os.Getenv(learnUpdateEnv) != "" {
		out := append(append(append([]byte(nil), page[:start]...), text...), page[end:]...)
		if err := os.WriteFile(learnPath, out, 0o644); err != nil {
			t.Fatalf("writing docs/learn.md: %v", err)
		}
		return
	}
	assert.Equal(t, text, string(page[start:end]),
		"docs/learn.md's block %q is not what the test printed; if the change is meant, run the test with %s=1 to rewrite it", name, learnUpdateEnv)
}

// outputs gathers a pair's summary lines, one per implementation, for its
// block of outputs.
type outputs struct {
	mu    sync.Mutex
	lines map[string]string
}

// put logs line as impl's output and keeps it for the block.
func (o *outputs) put(t testing.TB, impl, line string) {
	t.Helper()
	t.Log(line)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lines == nil {
		o.lines = map[string]string{}
	}
	o.lines[impl] = line
}

// check compares the block name with the outputs of every implementation in
// order, once all have run (a -run that selects some of them checks none).
func (o *outputs) check(t testing.TB, name string, order ...string) {
	t.Helper()
	o.mu.Lock()
	var b strings.Builder
	for _, impl := range order {
		line, ok := o.lines[impl]
		if !ok {
			o.mu.Unlock()
			return
		}
		b.WriteString(impl + ":" + strings.Repeat(" ", 10-len(impl)) + line + "\n")
	}
	o.mu.Unlock()
	learnBlock(t, name, b.String())
}

// drawn logs a run's lanes under -v and checks them against block name.
func drawn(t testing.TB, s *schedule, name string) {
	t.Helper()
	text := s.lanesText()
	t.Log("the interleaving, one column per goroutine, time downward:\n" + text)
	s.mu.Lock()
	s.shown = true
	s.mu.Unlock()
	learnBlock(t, name, text)
}

// linearizable checks hist against model with porcupine and, under
// CASBREAKER_PORCUPINE_HTML=dir, draws it into dir/<test name><suffix>.html.
func linearizable(t testing.TB, model porcupine.Model, hist []porcupine.Operation, suffix string) porcupine.CheckResult {
	t.Helper()
	dir := os.Getenv(porcupineHTMLEnv)
	if dir == "" {
		return porcupine.CheckOperationsTimeout(model, hist, time.Minute)
	}
	res, info := porcupine.CheckOperationsVerbose(model, hist, time.Minute)
	path := filepath.Join(dir, strings.NewReplacer("/", "_", "=", "-").Replace(t.Name())+suffix+".html")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("%s: %v", porcupineHTMLEnv, err)
	}
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		t.Fatalf("porcupine's visualisation: %v", err)
	}
	t.Logf("porcupine's visualisation of this history (%s): %s", res, path)
	return res
}

// TestLearnQuotesTheNaiveCode checks that the code docs/learn.md quotes from
// the naive breakers is theirs: each region of race/naive_test.go between
// "// learn:code NAME" and "// learn:code end" is the page's go block
// code/NAME, its common indentation removed.
func TestLearnQuotesTheNaiveCode(t *testing.T) {
	src, err := os.ReadFile("naive_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var (
		name    string
		lines   []string
		regions int
	)
	for _, line := range strings.Split(string(src), "\n") {
		marker, ok := strings.CutPrefix(strings.TrimSpace(line), "// learn:code ")
		switch {
		case ok && marker == "end":
			if name == "" {
				t.Fatal("naive_test.go: a learn:code end without its start")
			}
			learnFence(t, "code/"+name, "go", dedent(lines))
			name, lines = "", nil
			regions++
		case ok:
			name, _, _ = strings.Cut(marker, " ")
		case name != "":
			lines = append(lines, line)
		}
	}
	if name != "" || regions == 0 {
		t.Fatalf("naive_test.go: %d regions quoted, region %q not ended", regions, name)
	}
}

// dedent joins lines with the tabs they all start with removed.
func dedent(lines []string) string {
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, "\t")); common < 0 || n < common {
			common = n
		}
	}
	var b strings.Builder
	for _, l := range lines {
		if len(l) >= common && common > 0 {
			l = l[common:]
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}
