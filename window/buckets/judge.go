package buckets

import (
	"time"

	"github.com/casbreaker/casbreaker/window"
)

// Judging the trip rule without summing the window for every success.
//
// The rule (R1) must be judged after every outcome, and summing the window
// is O(B). A success that is neither failed nor slow only adds a call,
// which lowers every rate; it could trip the rule only by bringing the
// window up to MinimumNumberOfCalls while the rates are high. So after a
// Snapshot that does not trip the rule, margin says whether that can
// happen (safe), and a fast success that finds its second judged safe
// skips its Snapshot. Failures and slow calls are each judged by a Snapshot
// that holds them (margin's doc says why they get no slack).
//
// A judgement holds only while the window's membership stays as the
// Snapshot saw it apart from the outcomes added since, that is, within the
// second and the generation it was made for: a new second evicts calls and
// can raise a rate without any outcome. So it lives in the bucket of that
// second, in its word judge, tagged with the bucket's incarnation like its
// counters and reset with them when the bucket is recycled. A fast success
// then costs one load of judge; the first outcome of a second that finds
// failures in the window sums it.
//
//	judge = | tag (8 bits) | ver (24 bits) | safe (1 bit) | unused (31 bits) |
//	         63         56   55         32   31             30             0
//
// ver counts the judgements installed in the incarnation, so a judgement
// that summed the window, stalled, and then finds judge as it loaded it
// before summing knows that no other judgement has been installed since:
// its compare-and-swap cannot install an older view over a newer one (an
// equal word would need 2^24 installs in between). A judgement that finds
// the rule holding withdraws safe, so no judgement made before it lets a
// success skip.
//
// What this guarantees is what the Snapshot after each record guaranteed
// before: every outcome is judged on a window that holds it, and one whose
// judgement is skipped provably could not trip the rule. Concurrent
// outcomes may still be judged on windows that hold some of the others'
// records and not the rest (docs/design.md, Known limits).
const (
	judgeSlackBits = 31
	judgeSafe      = 1 << judgeSlackBits
	judgeSlack     = judgeSafe - 1
	judgeVerShift  = judgeSlackBits + 1
	judgeVerMask   = (1<<24 - 1) << judgeVerShift
)

// judge reports whether rule trips on the window of generation gen (low
// 24 bits already) at now, just after record put an outcome (failed and
// slow as given) there. It is rule.Trips(Snapshot(gen, now)); a fast
// success that finds the judgement of its second safe returns at once. The
// caller has already found the window unclean.
//
// The accounting that makes a skip safe: when judge returns, its outcome is
// either in the Snapshot of the judgement installed in the current second's
// bucket, or judged by a Snapshot of its own that holds it. So an install
// that loses its CAS starts over rather than returning: the judgement that
// won may have summed the window before this outcome was recorded. (With
// a slack that failures took, this is what an adversarial review found
// missing: TestJudge_LostInstallChargesTheWinner.) For the same reason the
// judgement consulted is always the current second's, not the one the
// outcome was recorded in: a late outcome of an earlier second is in the
// window the current judgement is about.
func (w *Window) judge(gen uint32, now time.Duration, failure, slow bool, rule *window.Rule) bool {
	for {
		sec := max(second(now), w.head.second.Load())
		b := w.bucket(w.slot(sec))
		id := b.id.Load()
		idGen, inc, idSec := unpackID(id)
		// ours: the current second's bucket holds this generation, so its
		// judgement (if any) is about the window of this outcome.
		ours := idGen == gen && idSec == sec
		var j uint64
		for ours {
			j = b.judge.Load()
			if tag, _ := unpackCount(j); tag != inc {
				break // not judged in this incarnation yet
			}
			if !failure && !slow && j&judgeSafe != 0 {
				return false
			}
			break
		}
		c := w.Snapshot(gen, now)
		if testHookJudged != nil {
			testHookJudged()
		}
		if rule.Trips(c) {
			// The rule holds, and goes on holding for every outcome after
			// this one until the window changes: no judgement made before
			// may skip another Snapshot. A judgement installed since our
			// load may be of a window without our record, so ours replaces
			// whatever is there.
			for ours && b.id.Load() == id {
				if tag, _ := unpackCount(j); tag == inc && j&(judgeSafe|judgeSlack) == 0 && b.judge.Load() == j {
					break
				}
				if b.judge.CompareAndSwap(j, nextJudgement(j, inc, 0)) {
					break
				}
				j = b.judge.Load()
			}
			return true
		}
		// Install our judgement unless judge moved while we summed: then an
		// outcome took slack, or another judgement was installed, and we
		// start over to be charged to whatever is there now.
		if !ours || b.id.Load() != id || b.judge.CompareAndSwap(j, nextJudgement(j, inc, margin(rule, c))) {
			return false
		}
	}
}

// testHookJudged, when set by a test, runs between a judgement's Snapshot
// and its install, where a goroutine can be descheduled; nil otherwise (one
// load on the path that has just summed the window).
var testHookJudged func()

// nextJudgement is the judge word that replaces j in incarnation inc with
// safe|slack m: ver one more than j's in the same incarnation, 0 in a new one.
func nextJudgement(j uint64, inc uint8, m uint64) uint64 {
	ver := j&judgeVerMask + 1<<judgeVerShift
	if tag, _ := unpackCount(j); tag != inc {
		ver = 0
	}
	return packCount(inc, 0) | ver&judgeVerMask | m
}

// margin is the judgement for a window holding c that does not trip rule:
// safe when no success could make it hold, now or after the slow failures
// a judgement may have to absorb; nothing otherwise.
//
// No slack: a Snapshot taken while writers run can hold a failure's call but
// not yet the failure (add raises n before f), so its failure rate can sit
// below the truth for good. At a threshold of 100% no number of further
// failures then reaches it, and a slack computed from such a Snapshot came
// out unbounded (TestRegression_ConcurrentCountsAreExact missed its trip).
// Until the slack comes from a view that bounds both counts, every failure
// and slow call is judged by a Snapshot of its own, which holds it; only a
// fast success skips, and its skip is safe even on such a view, because the
// failures it misses are judged themselves once recorded.
func margin(rule *window.Rule, c window.Counts) uint64 {
	if risky(rule, c, 0) {
		return 0
	}
	return judgeSafe
}

// risky reports whether x more slow failures could trip rule on a window
// holding c: right away, or once successes after them bring the window to
// the minimum number of calls. Of all the successes that may follow, the
// fewest that reach the minimum are the worst case: every rate falls as
// calls grow.
func risky(rule *window.Rule, c window.Counts, x uint64) bool {
	d := window.Counts{Calls: c.Calls + x, Failures: c.Failures + x, Slow: c.Slow + x, SlowFailures: c.SlowFailures + x}
	if rule.Trips(d) {
		return true
	}
	d.Calls = max(d.Calls+1, rule.MinimumNumberOfCalls)
	return rule.Trips(d)
}
