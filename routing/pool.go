package routing

import (
	"time"

	"switchyard/catalog"
)

// enter makes m the pool being walked: its enabled deployments that serve
// the operation and fit the profile (SPEC 7.5). It reports false, leaving
// the walk untouched, when none does.
func (p *Plan) enter(m *catalog.Model, fallback bool) bool {
	p.slots = p.slots[:0]
	for _, d := range m.Pool {
		if !d.On || !d.Serves(p.profile.Op) {
			continue
		}
		if !p.profile.fits(d) {
			p.r.obs.OnReject(RejectProfile)
			continue
		}
		p.slots = append(p.slots, slot{d: d, st: p.r.State(d.ID)})
	}
	if len(p.slots) == 0 {
		return false
	}
	p.model, p.fallback = m, fallback
	p.stage = stagePool
	return true
}

// nextModel moves to the next fallback model with a compatible deployment:
// the decided chain in order, then the global list, skipping the primary,
// repeats and models absent from the snapshot. Fallbacks do not open their
// own chains (SPEC 7.3).
func (p *Plan) nextModel() {
	for n := len(p.chain) + len(p.snap.Global); p.walk < n; {
		i := p.walk
		p.walk++
		name := p.nameAt(i)
		if name == p.primary || p.walkedBefore(i, name) {
			continue
		}
		if m := p.snap.Model(name); m != nil && p.enter(m, true) {
			return
		}
	}
	p.stage = stageLastResort
}

func (p *Plan) nameAt(i int) string {
	if i < len(p.chain) {
		return p.chain[i]
	}
	return p.snap.Global[i-len(p.chain)]
}

func (p *Plan) walkedBefore(i int, name string) bool {
	for j := range i {
		if p.nameAt(j) == name {
			return true
		}
	}
	return false
}

// nextInPool picks the next attempt in the current pool (SPEC 7.1), or nil
// when the pool is exhausted. Each attempt excludes deployments tried in the
// current pass; when every eligible deployment has been tried a new pass
// starts. A cooling deployment whose probe is due takes the request as its
// recovery probe when the request can carry one (carriesProbe), or when
// nothing else of the pool is available; otherwise it is skipped (SPEC 6).
func (p *Plan) nextInPool(now time.Time, t int64) *Attempt {
	for range 2 {
		p.cands = p.cands[:0]
		probe, probeUntil := -1, int64(0)
		again := false // a candidate tried in this pass could be tried in the next
		for i := range p.slots {
			s := &p.slots[i]
			if s.exhausted {
				continue
			}
			if until := s.st.coolUntil.Load(); t < until {
				p.noteCooling(s, until, t)
				if s.st.probeReady(t, &p.r.rules) && !p.overQuota(s.d) {
					if s.inPass {
						again = true
					} else if probe < 0 || until < probeUntil {
						probe, probeUntil = i, until
					}
				}
				continue
			}
			if p.overQuota(s.d) {
				p.reject(s, rejectedQuota, RejectQuota)
				p.noteWait(p.quotaWait(s.d, now))
				continue
			}
			if s.inPass {
				again = true
				continue
			}
			p.cands = append(p.cands, Candidate{Deployment: s.d, State: s.st, slot: i})
		}
		if a := p.honorPin(now, t); a != nil {
			return a
		}
		if probe >= 0 && (len(p.cands) == 0 || p.carriesProbe()) && p.slots[probe].st.claimProbe(t, &p.r.rules) {
			s := &p.slots[probe]
			return p.begin(s.d, s.st, probe, p.model.Name, p.fallback, SelectProbe, now, t)
		}
		if len(p.cands) > 0 {
			return p.choose(now, t)
		}
		if !again {
			return nil
		}
		for i := range p.slots {
			p.slots[i].inPass = false
		}
	}
	return nil
}

// carriesProbe reports whether this request may carry a due recovery probe
// while its pool has healthy candidates (SPEC 6: probes come from regular
// traffic, seed 002's "small stream"): only on its first attempt, and only
// when its budget leaves room to fail over at once if the probe fails. The
// probe's whole cost is then one extra attempt for one request per
// probe_interval, visible in that request's timeline. A session honoring
// its pin never carries one.
func (p *Plan) carriesProbe() bool {
	return len(p.attempts) == 0 && p.budget >= 2
}

// honorPin applies session keeping (SPEC 8) on the request's first attempt:
// the pinned deployment is taken whatever the strategy would say while it is
// available; when it is in the pool but cooling down the pin is released and
// the selector decides. A pinned deployment that is only over its own quota
// cannot take this request either, but the pin is not released (SPEC 8:
// "released only when its deployment enters cooldown"): the session keeps
// it (pinKept) and its next request goes back to the prompt cache.
func (p *Plan) honorPin(now time.Time, t int64) *Attempt {
	if p.pinChecked || p.pin == "" || p.fallback {
		return nil
	}
	p.pinChecked = true
	for _, c := range p.cands {
		if c.Deployment.ID == p.pin {
			p.affinity = AffinityHonored
			p.r.obs.OnSessionAffinity(AffinityHonored)
			return p.begin(c.Deployment, c.State, c.slot, p.model.Name, false, SelectSession, now, t)
		}
	}
	for _, s := range p.slots {
		if s.d.ID == p.pin {
			if !s.st.coolingAt(t) && p.overQuota(s.d) {
				p.pinKept = true
				break
			}
			p.affinity = AffinityReleased
			p.r.obs.OnSessionAffinity(AffinityReleased)
			break
		}
	}
	return nil
}

// choose runs the model's strategy over p.cands; with one candidate the
// selector is skipped.
func (p *Plan) choose(now time.Time, t int64) *Attempt {
	sel, name := p.r.selector(p.model.Strategy)
	idx := 0
	if len(p.cands) > 1 {
		if !p.warmDone {
			p.warm, p.warmDone = p.r.warmFor(p.session, p.pinIn, t), true
		}
		p.pick.Model, p.pick.Candidates, p.pick.Now, p.pick.Warm = p.model, p.cands, now, p.warm
		p.pick.tick = t
		if idx = sel.Select(&p.pick); idx < 0 || idx >= len(p.cands) {
			idx = 0
		}
	}
	c := p.cands[idx]
	return p.begin(c.Deployment, c.State, c.slot, p.model.Name, p.fallback, name, now, t)
}

// tryLastResort makes the one last-resort attempt of SPEC 6 when the whole
// chain had no candidate outside cooldown and nothing was tried: on the
// deployment whose cooldown ends first, if it is under its quota.
func (p *Plan) tryLastResort(now time.Time, t int64) *Attempt {
	lr := &p.lastResort
	if !p.r.cfg.LastResort || len(p.attempts) > 0 || lr.st == nil {
		return nil
	}
	if p.overQuota(lr.d) {
		return nil
	}
	return p.begin(lr.d, lr.st, -1, lr.model, lr.fallback, SelectLastResort, now, t)
}

// begin hands out an attempt on d: counts it in flight and against the
// deployment's quota, and records it in the timeline.
func (p *Plan) begin(d *catalog.Deployment, st *DeploymentState, slot int, model string, fallback bool, label string, now time.Time, t int64) *Attempt {
	st.inflight.Add(1)
	if !p.profile.Stream && st.awaiting.Add(1) == 1 {
		st.quietSince.Store(t) // none awaited until now: the wait for an answer starts here
	}
	var stamp int64
	if hasQuota(d) {
		stamp = p.r.usage.Record(d.ID, p.tokens)
	}
	if fallback && model != p.announced {
		p.announced = model
		p.r.obs.OnFallback(p.primary, p.reason, model)
	}
	p.r.obs.OnSelect(model, d.ID, label)
	p.attempts = append(p.attempts, Attempt{
		Deployment: d,
		Model:      model,
		Fallback:   fallback,
		LastResort: label == SelectLastResort,
		Probe:      label == SelectProbe,
		Session:    label == SelectSession,
		N:          len(p.attempts) + 1,
		Start:      now,
		plan:       p,
		state:      st,
		slot:       slot,
		tick:       t,
		stream:     p.profile.Stream,
		stamp:      stamp,
	})
	a := &p.attempts[len(p.attempts)-1]
	rec := AttemptRecord{
		Deployment: d.ID, Model: model, Transport: "http", Start: now,
		Fallback: fallback, Probe: a.Probe, LastResort: a.LastResort,
	}
	if p.profile.Stream {
		rec.Transport = "stream"
	}
	if d.Provider != nil {
		rec.Adapter = d.Provider.Kind
	}
	p.timeline = append(p.timeline, rec)
	p.pending = a
	return a
}

// overQuota asks the UsageSource whether one more request would exceed the
// deployment's own quota; deployments without a quota are never asked.
func (p *Plan) overQuota(d *catalog.Deployment) bool {
	if d.RPM <= 0 && d.TPM <= 0 {
		return false
	}
	req, tok := p.r.usage.Usage(d.ID)
	return overQuota(d.RPM, d.TPM, req, tok, p.tokens)
}

// hasQuota reports whether attempts on d count against a quota of its own
// (SPEC 5): its RPM or TPM is set. A snapshot's deployments never change,
// so Withdraw asks again rather than keep the answer in the attempt.
func hasQuota(d *catalog.Deployment) bool { return d.RPM > 0 || d.TPM > 0 }

// quotaWait is how long until one more request fits d's quota: when its
// usage window has room (the oldest counts leaving it), or, if the source
// cannot tell, the end of the current minute.
func (p *Plan) quotaWait(d *catalog.Deployment, now time.Time) time.Duration {
	if w := p.r.usage.Room(d.ID, d.RPM, d.TPM, p.tokens); w > 0 {
		return w
	}
	return untilNextMinute(now)
}

// noteCooling records a cooling deployment: the rejection, the wait it
// implies, and the last-resort candidate whose cooldown ends first.
func (p *Plan) noteCooling(s *slot, until, t int64) {
	p.reject(s, rejectedCooldown, RejectCooldown)
	p.noteWait(time.Duration(until - t))
	if lr := &p.lastResort; lr.st == nil || until < lr.until {
		*lr = lastResort{d: s.d, st: s.st, model: p.model.Name, fallback: p.fallback, until: until}
	}
}

func (p *Plan) noteWait(d time.Duration) {
	if d > 0 && (p.wait == 0 || d < p.wait) {
		p.wait = d
	}
}

// reject reports a rejection once per deployment, reason and pool visit.
func (p *Plan) reject(s *slot, bit uint8, reason string) {
	if s.rejected&bit == 0 {
		s.rejected |= bit
		p.r.obs.OnReject(reason)
	}
}
