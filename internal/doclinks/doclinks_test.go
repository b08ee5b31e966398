package doclinks

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository's root, relative to this package.
const root = "../.."

var (
	// mdLink is a Markdown link's target: [text](target).
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// codeSpan is a Markdown code span: `text`.
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	// pathLike is a word with at least one slash inside it: core/breaker.go,
	// docs/, window/atomicring.
	pathLike = regexp.MustCompile(`(?:^|[^\w./-])([A-Za-z0-9_][\w.-]*(?:/[\w.-]+)+/?)`)
	// fileLike is a path that ends in a file's extension or names a
	// directory with its trailing slash.
	fileLike = regexp.MustCompile(`(\.(go|md|sh|txt|png|mod|sum)|/)$`)
	// heading is a Markdown ATX heading's text.
	heading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	// notInSlug is what GitHub drops from a heading to make its anchor.
	notInSlug = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
)

// tree lists the repository's Markdown and Go files and its top-level
// entries, skipping hidden directories and testdata.
func tree(t *testing.T) (md, goFiles []string, top map[string]bool) {
	t.Helper()
	top = map[string]bool{}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			top[e.Name()] = true
		}
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".md":
			md = append(md, path)
		case ".go":
			goFiles = append(goFiles, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(md) < 10 || len(goFiles) < 100 || !top["docs"] {
		t.Fatalf("found %d Markdown and %d Go files from %s: not the repository", len(md), len(goFiles), root)
	}
	return md, goFiles, top
}

// rel is path relative to the repository's root, for messages.
func rel(path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(r)
}

// exists reports whether p names a file or directory, from the
// repository's root or from dir.
func exists(p, dir string) bool {
	for _, base := range []string{root, dir} {
		if _, err := os.Stat(filepath.Join(base, filepath.FromSlash(p))); err == nil {
			return true
		}
	}
	return false
}

// mentioned reports whether word, found in prose or a code span, is meant
// as a path of the repository: it starts with one of its top-level entries,
// or (in a code span) ends like a file or a directory. Module paths, URL
// paths, units (ns/op), standard packages (log/slog), test names with
// subtests and patterns (./..., testdata/fuzz/<target>/) are not.
func mentioned(word string, inCode bool, top map[string]bool) bool {
	if strings.ContainsAny(word, " *<>{}$=:,()[]~") || strings.Contains(word, "...") || strings.HasPrefix(word, "/") {
		return false
	}
	w := strings.TrimPrefix(word, "./")
	first, _, _ := strings.Cut(w, "/")
	if top[first] {
		return true
	}
	return inCode && !strings.Contains(first, ".") && fileLike.MatchString(w)
}

// anchors are the anchors GitHub gives the headings of the Markdown file at
// path: lower case, punctuation dropped, spaces as hyphens, a repeated one
// numbered.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, seen, fenced := map[string]bool{}, map[string]int{}, false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		m := heading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		a := strings.ReplaceAll(notInSlug.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// Every relative link of the Markdown files leads to a file or directory,
// and a #fragment to a heading of the Markdown file it names.
func TestLinksLeadSomewhere(t *testing.T) {
	md, _, _ := tree(t)
	for _, path := range md {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, fragment, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link to %s: no such file or directory", rel(path), target)
					continue
				}
			}
			if fragment != "" && strings.HasSuffix(dest, ".md") && !anchors(t, dest)[fragment] {
				t.Errorf("%s: link to %s: %s has no heading with that anchor", rel(path), target, rel(dest))
			}
		}
	}
}

// Every path of the repository that a Markdown file mentions, in prose or
// in a code span, exists (from the root, or from the file's directory).
func TestMentionedPathsExist(t *testing.T) {
	md, _, top := tree(t)
	for _, path := range md {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		prose := mdLink.ReplaceAllString(string(text), "]")
		for _, m := range codeSpan.FindAllStringSubmatch(prose, -1) {
			if word := m[1]; strings.Contains(word, "/") && mentioned(word, true, top) && !exists(word, filepath.Dir(path)) {
				t.Errorf("%s: `%s`: no such file or directory", rel(path), word)
			}
		}
		for _, m := range pathLike.FindAllStringSubmatch(codeSpan.ReplaceAllString(prose, " "), -1) {
			if word := strings.TrimRight(m[1], "."); mentioned(word, false, top) && !exists(word, filepath.Dir(path)) {
				t.Errorf("%s: %s: no such file or directory", rel(path), word)
			}
		}
	}
}

// Every file or directory of the repository that a Go comment mentions by
// its path from the root (docs/design.md, core/state.go, race/) exists.
func TestCommentedPathsExist(t *testing.T) {
	_, goFiles, top := tree(t)
	for _, path := range goFiles {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			_, comment, ok := strings.Cut(sc.Text(), "//")
			if !ok {
				continue
			}
			for _, m := range pathLike.FindAllStringSubmatch(comment, -1) {
				word := strings.TrimRight(m[1], ".")
				if fileLike.MatchString(word) && mentioned(word, false, top) && !exists(word, root) {
					t.Errorf("%s:%d: %s: no such file or directory", rel(path), n, word)
				}
			}
		}
		f.Close()
	}
}
