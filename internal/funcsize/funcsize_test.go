package funcsize

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fzipp/gocyclo"
	"github.com/stretchr/testify/require"
)

// checked are the directories of the breaker itself, relative to this
// package; the integrations and companions have no such aim.
var checked = []string{"../../core", "../../window", "../window"}

// The limits: lines from func to the closing brace, and cyclomatic
// complexity as gocyclo counts it (one, plus one for each if, for, case and
// select case other than default, && and ||).
const (
	maxLines      = 60
	maxComplexity = 15
	exemption     = "Why it is long:"
)

func TestFunctionsAreShort(t *testing.T) {
	fset := token.NewFileSet()
	seen := 0
	for _, dir := range checked {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				seen++
				if fn.Doc != nil && strings.Contains(fn.Doc.Text(), exemption) {
					continue
				}
				at := fset.Position(fn.Pos())
				lines := fset.Position(fn.End()).Line - at.Line + 1
				if lines > maxLines {
					t.Errorf("%s: %s spans %d lines (aim: %d); split it by subject, or say why in its doc with %q", at, fn.Name.Name, lines, maxLines, exemption)
				}
				if c := gocyclo.Complexity(fn); c > maxComplexity {
					t.Errorf("%s: %s has cyclomatic complexity %d (aim: %d); split it by subject, or say why in its doc with %q", at, fn.Name.Name, c, maxComplexity, exemption)
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.Greater(t, seen, 100, "the walk found too few functions: are the paths right?")
}

// TestComplexityCountsLikeGocyclo pins gocyclo's counting rule on a
// function of known complexity, so that a new version that counted
// differently, or nothing, cannot pass the size test unnoticed.
func TestComplexityCountsLikeGocyclo(t *testing.T) {
	src := `package p
func f(a, b bool, n int, ch chan int) {
	if a && b || n > 1 { // if, &&, ||
	}
	for i := 0; i < n; i++ { // for
	}
	for range ch { // range
	}
	switch n { // two cases; default free
	case 1:
	case 2:
	default:
	}
	select { // one comm case; default free
	case <-ch:
	default:
	}
}`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	require.NoError(t, err)
	require.Equal(t, 9, gocyclo.Complexity(f.Decls[0].(*ast.FuncDecl)))
}
