// Package window holds what the two lock-free sliding windows share: the
// counts they report. The windows themselves live in window/atomicring
// (count-based: the last W calls) and window/buckets (time-based: per-second
// buckets over the last B seconds).
//
// Both windows tag what they hold with the breaker generation, which every
// committed transition of the breaker advances: an outcome recorded under an
// older generation than the window holds is stale and dropped, and a newer
// generation starts an empty window, as every state a breaker enters starts
// fresh, without a separate clear step that could race with writers. The
// rules both windows keep are written out in
// https://github.com/casbreaker/casbreaker/blob/main/docs/semantics.md.
package window

// Counts is the aggregate of the outcomes in a window.
//
// Invariants, in every value a window returns, under any concurrency:
// 0 <= Failures <= Calls, 0 <= SlowCalls <= Calls, and
// SlowFailures <= min(SlowCalls, Failures). A count window also keeps
// Calls <= its size W. The zero value is an empty window.
type Counts struct {
	// Calls is the number of counted outcomes (successes and failures; ignored
	// outcomes are never counted).
	Calls uint64
	// Failures is the number of counted outcomes that were failures.
	Failures uint64
	// SlowCalls is the number of counted outcomes slower than the slow-call
	// duration threshold.
	SlowCalls uint64
	// SlowFailures is the number of outcomes that were both slow and failures.
	SlowFailures uint64
}
