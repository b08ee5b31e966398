// Package doclinks holds no code: its test keeps the documentation's
// references true. Every relative link of a Markdown file of the repository
// (README.md, CHANGELOG.md, docs/*.md, the examples' READMEs) must lead to a
// file or directory that exists, and a link with a #fragment to a heading
// of its target; every repository path that a Markdown file or a Go comment
// mentions must exist. A rename or a deletion that leaves a reference behind
// fails make test.
package doclinks
