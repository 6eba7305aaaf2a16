package edge

// A team's slot releases on their way into Redis: the ones this node has
// pending ride in the next admission script of the team, at the team's
// level and at each key and user level (SPEC 3, 3.1: a release is visible
// to the very next admission), and go back to the writer when that script
// fails.

// takeReleases hands this node's pending releases of the team to Begin, so
// they travel inside the next admission script, together with the releases
// of the writer's batch in flight (it may reach Redis after this admission;
// ZREM twice is harmless). It returns how many of them were taken from the
// pending list (the rest stay with the batch).
func (ts *teamState) takeReleases() (rel []string, taken int) {
	ts.mu.Lock()
	rel = ts.releases
	if len(rel) > maxBatchItems {
		rel = rel[:maxBatchItems:maxBatchItems]
		ts.releases = ts.releases[maxBatchItems:]
	} else {
		ts.releases = nil
	}
	taken = len(rel)
	if ts.flight != nil && len(ts.flight.releases) > 0 && taken < maxBatchItems {
		rel = append(rel[:taken:taken], ts.flight.releases[:min(len(ts.flight.releases), maxBatchItems-taken)]...)
	}
	ts.mu.Unlock()
	return rel, taken
}

// putBackReleases returns releases whose admission script failed.
func (ts *teamState) putBackReleases(rel []string) {
	if len(rel) == 0 {
		return
	}
	ts.mu.Lock()
	ts.releases = append(rel, ts.releases...)
	ts.mu.Unlock()
}

// levelRelease is a key or user level's pending slot releases that an
// admission script carries (takeLevelReleases), so a release at that level
// is visible to the very next admission as the team's are (SPEC 3, 3.1).
type levelRelease struct {
	lv    Level
	keys  levelKeys
	rel   []string
	taken int  // how many of rel came from the level's pending list
	sent  bool // its ids are in the call's arguments already
}

// parallelLevels reports whether an admission of calls meets a key or user
// level with max_parallel: only such a level has releases, and the team's
// lock is not taken for the others.
func parallelLevels(calls []*admitCall) bool {
	for _, a := range calls {
		for j := range a.nsub {
			if a.subs[j].lv.Limits.MaxParallel > 0 {
				return true
			}
		}
	}
	return false
}

// takeLevelReleases appends to out, for each level with max_parallel of
// the admissions calls that out does not name yet, this node's pending
// releases of that level, together with those of the writer's batch in
// flight (as takeReleases does for the team). Nothing is allocated when
// no level has any.
func (ts *teamState) takeLevelReleases(calls []*admitCall, out []levelRelease) []levelRelease {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.subs) == 0 && (ts.flight == nil || len(ts.flight.subs) == 0) {
		return out
	}
	for _, a := range calls {
	next:
		for j := range a.nsub {
			sc := &a.subs[j]
			if sc.lv.Limits.MaxParallel <= 0 {
				continue
			}
			for i := range out {
				if out[i].keys.base == sc.keys.base {
					continue next
				}
			}
			var rel []string
			if ls := ts.subs[sc.keys.base]; ls != nil && len(ls.releases) > 0 {
				rel = ls.releases
				if len(rel) > maxBatchItems {
					rel = rel[:maxBatchItems:maxBatchItems]
					ls.releases = ls.releases[maxBatchItems:]
				} else {
					ls.releases = nil
				}
			}
			taken := len(rel)
			if f := ts.flight; f != nil && taken < maxBatchItems {
				for k := range f.subs {
					if lb := &f.subs[k]; lb.keys.base == sc.keys.base && len(lb.releases) > 0 {
						rel = append(rel[:taken:taken], lb.releases[:min(len(lb.releases), maxBatchItems-taken)]...)
						break
					}
				}
			}
			if len(rel) > 0 {
				out = append(out, levelRelease{lv: *sc.lv, keys: sc.keys, rel: rel, taken: taken})
			}
		}
	}
	return out
}

// putBackLevelReleases returns the level releases whose admission script
// failed: the writer sends them (or the next admission script carries them).
func (ts *teamState) putBackLevelReleases(lr []levelRelease) {
	if len(lr) == 0 {
		return
	}
	ts.mu.Lock()
	for i := range lr {
		l := &lr[i]
		if l.taken == 0 {
			continue
		}
		ls := ts.subs[l.keys.base]
		if ls == nil { // the writer found it at rest meanwhile and dropped it
			ls = ts.newLevelLocked(l.keys)
			ls.lv = l.lv
		}
		ls.releases = append(l.rel[:l.taken:l.taken], ls.releases...)
		ts.subDirty = true
	}
	ts.mu.Unlock()
}
