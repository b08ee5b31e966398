package buckets

import (
	"time"

	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/internal/trip"
	"github.com/casbreaker/casbreaker/window"
)

// Judging the trip rule without summing the window for every outcome.
//
// The rule (R1) must be judged after every outcome, and summing the window
// is O(B). A judgement is what a Snapshot that does not trip the rule
// proves about the outcomes after it in the same second and generation:
// the rule stays false while at most slack more failures (or slow calls)
// arrive, whatever the calls. A failure then takes a unit of slack with one
// CAS instead of summing; a fast success skips judging once the second's
// minimum number of calls is known met (head.full). It lives in the
// bucket of its second, tagged with the incarnation like the counters:
//
//	judge = | tag (8 bits) | ver (24 bits) | safe (1) | full (1) | slack (30 bits) |
//	         63         56   55         32   31         30         29            0
//
// safe says a judgement is installed; slack is what is left of it; full
// that its Snapshot held at least the rule's minimum number of calls. Why
// no failure escapes the accounting, why a success may skip only with the
// minimum met, and why a Snapshot shown to someone retracts the current
// judgement are argued in docs/design.md (The time window, "Judging the
// rule in O(1)" and the paragraphs after it), each with the test that
// replays its bad interleaving; what the scheme does not guarantee is in
// its Known limits.
const (
	judgeSlackBits = 30
	judgeSlack     = 1<<judgeSlackBits - 1
	judgeFull      = 1 << judgeSlackBits
	judgeSafe      = judgeFull << 1
	judgeVerShift  = judgeSlackBits + 2
	judgeVerMask   = (1<<24 - 1) << judgeVerShift
)

// judge reports whether rule trips on the window of generation gen (low
// 24 bits already) at now, just after record put an outcome (failed and
// slow as given) there. It is rule.Trips(Snapshot(gen, now)) but where a
// judgement covers the outcome (see above). The caller has already found
// the window unclean.
//
// The judgement consulted is always the current second's, loaded after
// the record, not the one the outcome was recorded in: a late outcome of
// an earlier second is in the window the current judgement is about, and
// a second that began after the record was read began after the outcome
// was added, so its judgements' Snapshots hold it.
func (w *Window) judge(gen uint32, now time.Duration, failure, slow bool, rule *trip.Rule) bool {
	failureOrSlow := failure || slow
	sec := w.current(now)
	b := w.bucket(w.slot(sec))
	id := b.id.Load()
	idGen, inc, idSec := unpackID(id)
	// ours: the current second's bucket holds this generation, so its
	// judgement (if any) is about the window of this outcome.
	ours := idGen == gen && idSec == sec
	var j uint64
	for ours {
		j = b.judge.Load()
		tag, _ := unpackCount(j)
		if tag == inc && j&judgeSafe != 0 {
			if !failureOrSlow {
				if j&judgeFull != 0 {
					return false
				}
				break // below the minimum: sum (see above)
			}
			if j&judgeSlack != 0 {
				if b.judge.CompareAndSwap(j, j-1) {
					return false // one unit of the slack: covered
				}
				continue
			}
		}
		if !failureOrSlow {
			break
		}
		if tag != inc && (!olderInc(tag, inc) || b.id.Load() != id) {
			ours = false // the bucket moved on: nothing of ours to judge in
			break
		}
		// Not covered: move judge, so that no judgement summed before our
		// record installs, and sum the window ourselves.
		if n := nextJudgement(j, inc, 0); b.judge.CompareAndSwap(j, n) {
			j = n
			break
		}
	}
	return w.sumAndJudge(&judging{b: b, id: id, j: j, inc: inc, sec: sec, failureOrSlow: failureOrSlow, ours: ours}, gen, now, rule)
}

// sumAndJudge is judge for an outcome that no judgement covered: it sums
// the window, reports whether rule trips on it, and leaves in g's bucket
// the judgement the sum supports, or none.
func (w *Window) sumAndJudge(g *judging, gen uint32, now time.Duration, rule *trip.Rule) bool {
	c, ok := w.cached(g)
	summed := g.sec
	if !ok {
		s, stopped := w.sum(gen, now, g)
		if stopped {
			return false
		}
		w.publish(g, &s)
		c, summed = s.all, s.sec
	}
	judged()
	if w.head.sealed.Load() != 0 {
		// Seal may have taken part of what we summed (seal.go), so the
		// sum decides nothing: report the outcome as tripping, undecided,
		// for the caller to judge again on the window Seal's outcomes went
		// to (a reconfigured breaker judges it on its successor). Set
		// before Seal moves any word: unset here, every count we read was
		// read before Seal began, and the sum stands.
		return true
	}
	if rule.Trips(c) {
		// The rule holds: no success may skip its judgement on a minimum
		// met (minimumMet) until a judgement that finds it false again.
		w.head.full.Store(0)
		g.revoke()
		return true
	}
	// Install our judgement unless judge moved while we summed. Our
	// Snapshot has shown its state (no trip) to our caller either way, so
	// unless our judgement is the current second's, retract whatever was
	// summed before it (see retract).
	m := margin(rule, c)
	installed := g.ours && summed == g.sec && g.b.id.Load() == g.id && g.b.judge.CompareAndSwap(g.j, nextJudgement(g.j, g.inc, m))
	if installed && m&judgeFull != 0 && w.head.full.Load() != ^g.id {
		// The minimum is met in this incarnation from now on, and the rule
		// false: its fast successes need no judgement (minimumMet). A
		// failure that moved the judgement meanwhile sums the window
		// itself and may find the rule holding and clear head.full before
		// this store, as a retraction clears it after its own move: then
		// take it back, so that their clear stands.
		w.head.full.Store(^g.id)
		if j := g.b.judge.Load(); j&judgeSafe == 0 || uint8(j>>countBits) != g.inc {
			w.head.full.CompareAndSwap(^g.id, 0)
		}
	}
	if !installed || w.current(now) != g.sec {
		w.retract(gen, now)
	}
	return false
}

// The sum of the other buckets, cached for the current second.
//
// Until the window holds the minimum number of calls, a success is judged
// on a sum of the window (see judge), and at 100 ms a window has up to
// 3,600 buckets; so does every outcome that no judgement covers. Within a
// second only that second's bucket (head's) receives outcomes, so the
// first judge to sum the window in it publishes the sum of the other
// buckets, and the judges after it add the head bucket, read as Snapshot
// reads it, to that: O(S) instead of O(B*S) (S success stripes). The
// cache is one per window, on seq's line:
//
//   - id: the head bucket's incarnation it is for; a judge uses it only
//     while its own current second's bucket holds that id and head still
//     names that second, so that the other buckets are the same seconds.
//   - stamp: head.others after its publisher's sum; it is good only while
//     head.others holds it. An outcome that lands in another bucket after
//     the sum moves head.others before it returns or is judged (landed),
//     and so does every Snapshot shown to a caller, so a judge that begins
//     after either has returned sums the window again. One still in
//     flight, seen by no caller yet, is ordered after the judge.
//   - calls, failures, slowCalls: the other buckets' counts, all that
//     trip.Rule.Trips reads (not the slow failures).
//   - ver: a sequence lock, odd while a publisher writes the others.
//
// Every sum a judge takes moves head.others (publishing is a CAS on it,
// and a judge whose sum may not be published, or that loses the CAS,
// moves it all the same), so that no cached sum outlives a sum that saw
// more; one that wins the CAS and then finds the lock held leaves the
// cache to that publisher, whose stamp is older than the word now, so
// unused. A publisher descheduled while it holds the lock leaves the others to
// sum the window, as they did without the cache, until it runs again; no
// one waits for it. docs/design.md (The time window) argues why a cached
// judgement is one state of the window.
type othersCache struct {
	ver, id, stamp             atomic.Uint64
	calls, failures, slowCalls atomic.Uint64
}

// cached is the window judge g would sum, from the cached sum of the other
// buckets and g's bucket read now; false where the cache is not for g's
// bucket, or anything it relies on moved, and g must sum the window.
func (w *Window) cached(g *judging) (window.Counts, bool) {
	k := &w.seq.cache
	v := k.ver.Load()
	if !g.ours || v&1 != 0 || k.id.Load() != g.id {
		return window.Counts{}, false
	}
	stamp := k.stamp.Load()
	c := window.Counts{Calls: k.calls.Load(), Failures: k.failures.Load(), SlowCalls: k.slowCalls.Load()}
	if k.ver.Load() != v {
		return window.Counts{}, false
	}
	// The head bucket as Snapshot reads a bucket: a failure added after we
	// read the class counters and before a success we hold moves seq.
	w.seq.readers.Inc()
	seq := w.seq.n.Load()
	h := g.b.read(g.inc)
	// After the bucket: head.others is checked last, so that an outcome
	// that landed elsewhere and is missing from the others was still in
	// flight when every count we hold had been read.
	ok := w.seq.n.Load() == seq && g.b.id.Load() == g.id && w.head.second.Load() == g.sec && w.head.others.Load() == stamp
	w.seq.readers.Dec()
	return plus(c, h), ok
}

// publish caches the sum s of judge g less its head bucket's part, for
// the judges after it in g's second (cached), or moves head.others where
// it cannot. Only a sum of g's current second, taken while g's bucket held
// it, and on a window unclean at that second before the sum began: an
// outcome that lands in another bucket after the sum then finds the
// window unclean too, so it is judged and says so (landed) on every path,
// including RecordSuccess's, which skips landed on a clean window.
func (w *Window) publish(g *judging, s *sums) {
	if !g.ours || s.sec != g.sec || !s.unclean || !w.head.others.CompareAndSwap(s.others, s.others+1) {
		// Whatever the cache holds may lack an outcome our sum saw.
		w.head.others.Inc()
		return
	}
	// head.others has not moved since before our sum: nothing landed
	// outside the head bucket and said so in between, and the stamp now
	// names our sum alone.
	k := &w.seq.cache
	v := k.ver.Load()
	if v&1 != 0 || !k.ver.CompareAndSwap(v, v+1) {
		return // another publisher's, stamped before ours: no longer used
	}
	k.id.Store(g.id)
	k.stamp.Store(s.others + 1)
	k.calls.Store(s.all.Calls - s.head.Calls)
	k.failures.Store(s.all.Failures - s.head.Failures)
	k.slowCalls.Store(s.all.SlowCalls - s.head.SlowCalls)
	k.ver.Store(v + 2)
}

// judging is what a judge that is summing the window knows of its bucket:
// b, the bucket of second sec, held id when it loaded j, the judge word it
// will install over (for a failure or slow call, the word its own move
// left).
type judging struct {
	b                   bucket
	id, j, sec          uint64
	inc                 uint8
	failureOrSlow, ours bool
}

// revoke is for a judge whose sum trips the rule. The rule goes on holding
// for every outcome after this one until the window changes, so no
// judgement made before may cover another outcome; one installed since the
// judge loaded j may be of a window with successes that its sum lacks, so
// revoke replaces it too.
func (g *judging) revoke() {
	for g.ours && g.b.id.Load() == g.id {
		if tag, _ := unpackCount(g.j); tag == g.inc && g.j&judgeSafe == 0 && g.b.judge.Load() == g.j {
			return
		}
		if g.b.judge.CompareAndSwap(g.j, nextJudgement(g.j, g.inc, 0)) {
			return
		}
		g.j = g.b.judge.Load()
	}
}

// now reports whether a judgement installed since the judge loaded j
// covers its outcome, so that it may stop summing and report no trip. For
// a success, any full judgement of its bucket's incarnation does, as it
// does before a sum. For a failure or slow call, any judgement at all that
// replaced the one its move left: judge words never come back (ver), so
// that judgement was installed from a word loaded after the move, by a
// judge whose Snapshot began after this outcome was recorded and holds it,
// and found the rule false. The outcome takes effect as the last of that
// Snapshot's state, which nothing in it follows in real time (this
// outcome's call has not returned), so it trips nothing.
func (g *judging) now() bool {
	if !g.ours {
		return false
	}
	cur := g.b.judge.Load()
	if tag, _ := unpackCount(cur); tag != g.inc || cur&judgeSafe == 0 || g.b.id.Load() != g.id {
		return false
	}
	if g.failureOrSlow {
		return cur != g.j
	}
	return cur&judgeFull != 0
}

// testHookJudged, when set by a test, runs between a judgement's Snapshot
// and its install, where a goroutine can be descheduled; nil otherwise (one
// load on the path that has just summed the window).
var testHookJudged func()

// judged runs testHookJudged, if a test set one.
func judged() {
	if testHookJudged != nil {
		testHookJudged()
	}
}

// nextJudgement is the judge word that replaces j in incarnation inc with
// judgement m (safe, full and slack): ver one more than j's in the same incarnation, 1 in a new
// one (0 is the word the recycler's reset leaves).
func nextJudgement(j uint64, inc uint8, m uint64) uint64 {
	ver := j&judgeVerMask + 1<<judgeVerShift
	if tag, _ := unpackCount(j); tag != inc {
		ver = 1 << judgeVerShift
	}
	return packCount(inc, 0) | ver&judgeVerMask | m
}

// margin is the judgement for a window holding c that does not trip rule:
// safe with the largest slack x (at most judgeSlack) such that x more slow
// failures cannot trip it at any number of calls from c's on, and full if
// c meets the minimum number of calls; nothing when even none is safe. x
// is found by doubling and then bisecting, each step one Trips: about
// 2 log2(x) of them, once per judgement.
func margin(rule *trip.Rule, c window.Counts) uint64 {
	if risky(rule, c, 0) {
		return 0
	}
	safe := uint64(judgeSafe)
	if c.Calls >= rule.MinimumNumberOfCalls {
		safe |= judgeFull
	}
	lo, hi := uint64(0), uint64(1) // risky(lo) is false; hi is tried next
	for hi < judgeSlack && !risky(rule, c, hi) {
		lo, hi = hi, min(2*hi, judgeSlack)
	}
	if hi == judgeSlack && !risky(rule, c, hi) {
		return safe | judgeSlack
	}
	for hi-lo > 1 { // risky(hi) is true
		if m := lo + (hi-lo)/2; risky(rule, c, m) {
			hi = m
		} else {
			lo = m
		}
	}
	return safe | lo
}

// risky reports whether x more slow failures could trip rule on a window
// holding c, at any number of calls N' >= c.Calls. Every rate falls as
// calls grow, so the worst N' is the fewest that meet the minimum number
// of calls. The x outcomes' own calls are not added: a Snapshot may
// already hold a failure's call without its failure.
func risky(rule *trip.Rule, c window.Counts, x uint64) bool {
	return rule.Trips(window.Counts{
		Calls:    max(c.Calls, rule.MinimumNumberOfCalls),
		Failures: c.Failures + x, SlowCalls: c.SlowCalls + x, SlowFailures: c.SlowFailures + x,
	})
}
