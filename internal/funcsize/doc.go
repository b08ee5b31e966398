// Package funcsize holds no code: its test keeps every function of the
// breaker's packages (core and the windows) short enough to read top to
// bottom, at most 60 lines and a cyclomatic complexity of 15, unless the
// function's doc comment says why it is longer in a sentence that begins
// "Why it is long:". A function over either limit is split by subject.
package funcsize
