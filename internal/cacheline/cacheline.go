// Package cacheline holds the one cache-line size that every padded type
// of casbreaker assumes, so that the paddings and the tests that pin them
// cannot disagree.
package cacheline

// Size is the cache-line size in bytes that the padded types assume: 64,
// the line of amd64 and of most arm64 cores. A padding keeps a word that
// one core writes off the line another core reads, so that the writer does
// not evict it; on a CPU with longer lines (Apple's arm64 cores have 128
// bytes) two padded words may share a line, which costs a cache miss now
// and then, never correctness. A constant rather than
// golang.org/x/sys/cpu.CacheLinePad, whose size differs by architecture:
// the layouts and their tests stay the same everywhere.
const Size = 64
