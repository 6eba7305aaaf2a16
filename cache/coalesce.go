package cache

import (
	"context"
	"errors"
	"io"
	"sync"
)

// Coalescing on one node (SPEC 18): while a cacheable request is in
// flight, an identical one (same key, directives that allow reading)
// follows it instead of calling the upstream. The leader publishes the
// answer as canonical deltas; each streaming follower gets them through its
// own bounded buffer and renders them in its own format and mode, so
// followers never share bytes. Publishing never blocks: a follower whose
// buffer is full is cut off alone (ErrTooSlow), and the leader and the
// other followers go on. A leader that fails releases every follower at
// once (ErrLeaderFailed). Waits are bounded by the follower's context
// (the gateway gives it cache.coalesce_wait).

// ErrLeaderFailed ends a follower whose leader failed or was cut off; the
// follower goes on as an independent request (if it has written nothing
// to its client yet).
var ErrLeaderFailed = errors.New("cache: the coalesced leader failed")

// ErrTooSlow ends a streaming follower that fell a whole buffer behind.
var ErrTooSlow = errors.New("cache: follower too slow, cut off")

// Group is the set of flights in progress on one node. It is safe for
// concurrent use.
type Group struct {
	// immutable after NewGroup
	buffer     int // deltas a streaming follower may lag behind
	maxHistory int // bytes of deltas a flight keeps for followers that join late

	mu      sync.Mutex
	flights map[Key]*Flight // guarded by mu
}

// NewGroup returns a group whose streaming followers each buffer up to
// buffer deltas, and whose flights keep up to maxHistory bytes of deltas
// for late joiners (max_entry_bytes: a longer answer is not stored, and
// nobody new joins it).
func NewGroup(buffer int, maxHistory int64) *Group {
	return &Group{buffer: max(buffer, 1), maxHistory: int(min(maxHistory, 1<<40)), flights: map[Key]*Flight{}}
}

// Flight is one leader's upstream call that followers attach to.
type Flight struct {
	// immutable after creation
	g   *Group
	key Key

	mu        sync.Mutex
	history   []Delta                // guarded by mu; every delta so far, for late joiners
	histBytes int                    // guarded by mu
	open      bool                   // guarded by mu; new followers may join
	published bool                   // guarded by mu; a delta was published
	followers map[*Follower]struct{} // guarded by mu; nil until the first follower
	ended     bool                   // guarded by mu
}

// Follower is one request attached to a flight.
type Follower struct {
	f      *Flight
	stream bool

	ch      chan Delta    // live deltas (streaming followers only)
	end     chan struct{} // closed when the flight ends for this follower
	backlog []Delta       // the deltas published before it joined; owned by the reader

	// written before end is closed, read after
	err   error
	entry *Entry
	whole bool // entry is the whole answer (Complete), not only its finish (CompleteUnkept)

	finished bool    // owned by the reader: the finish delta was returned
	got      bool    // owned by the reader: a delta of the leader's was returned
	replay   []Delta // owned by the reader: the entry's deltas, for a leader that published none
}

// Lead makes the caller the leader of k's flight, or a follower of the
// flight in progress. Exactly one of the results is set, except when a
// flight is in progress that takes no new followers (its answer outgrew
// the history): then both are nil and the caller goes on alone. A leader
// must end its flight with Complete or Fail (Fail is safe to defer).
// stream says whether a follower wants the deltas as they arrive or only
// the entry at the end.
func (g *Group) Lead(k Key, stream bool) (*Flight, *Follower) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f, ok := g.flights[k]
	if !ok {
		f = &Flight{g: g, key: k, open: true} // followers made by the first one: most flights have none
		g.flights[k] = f
		return f, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.open || f.ended {
		return nil, nil
	}
	fl := &Follower{f: f, stream: stream, end: make(chan struct{})}
	if stream {
		fl.ch = make(chan Delta, g.buffer)
		fl.backlog = f.history[:len(f.history):len(f.history)]
	}
	if f.followers == nil {
		f.followers = map[*Follower]struct{}{}
	}
	f.followers[fl] = struct{}{}
	return nil, fl
}

// InFlight reports whether a flight of k is in progress on this node (one
// a request could follow now).
func (g *Group) InFlight(k Key) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.flights[k]
	return ok
}

// Len is the number of flights in progress.
func (g *Group) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.flights)
}

// Followers is the number of followers attached now.
func (f *Flight) Followers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.followers)
}

// Publish hands one delta to every streaming follower without blocking:
// one whose buffer is full is cut off with ErrTooSlow.
func (f *Flight) Publish(d Delta) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return
	}
	f.published = true
	if f.open {
		f.history = append(f.history, d)
		f.histBytes += d.size()
		if f.histBytes > f.g.maxHistory {
			f.open, f.history = false, nil
		}
	}
	for fl := range f.followers {
		if !fl.stream {
			continue
		}
		select {
		case fl.ch <- d:
		default:
			f.releaseLocked(fl, ErrTooSlow, nil)
		}
	}
}

// Complete ends the flight with its stored answer: streaming followers get
// the deltas still in their buffers and then the finish, sync followers the
// entry.
func (f *Flight) Complete(e *Entry) { f.end(nil, e, true) }

// CompleteUnkept ends the flight of a streaming leader whose answer
// completed but was not kept whole (larger than max_entry_bytes: SPEC 18
// does not store it): e holds its finish, usage and who served it, without
// content. A streaming follower was handed every delta (it joined while the
// history was whole, and one that fell behind was cut off): it gets the
// finish, as with Complete. A sync follower, which needs the whole answer,
// goes on alone (ErrLeaderFailed), and so does every follower when the
// leader published nothing.
func (f *Flight) CompleteUnkept(e *Entry) { f.end(nil, e, false) }

// Fail ends the flight without an answer: every follower is released at
// once with ErrLeaderFailed. It does nothing after Complete.
func (f *Flight) Fail() { f.end(ErrLeaderFailed, nil, false) }

// end ends the flight with err or its entry e, the whole answer or only
// its finish (whole false: CompleteUnkept).
func (f *Flight) end(err error, e *Entry, whole bool) {
	g := f.g
	g.mu.Lock()
	if g.flights[f.key] == f {
		delete(g.flights, f.key)
	}
	g.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return
	}
	f.ended = true
	for fl := range f.followers {
		switch {
		case e != nil && whole:
			fl.whole = true // before end is closed: read after it
			f.releaseLocked(fl, nil, e)
		case e != nil && fl.stream && f.published:
			f.releaseLocked(fl, nil, e)
		case e != nil:
			f.releaseLocked(fl, ErrLeaderFailed, nil)
		default:
			f.releaseLocked(fl, err, nil)
		}
	}
	f.history = nil
}

func (f *Flight) releaseLocked(fl *Follower, err error, e *Entry) {
	delete(f.followers, fl)
	fl.err, fl.entry = err, e
	close(fl.end)
}

// Leave detaches the follower (its client went away, or it stopped
// waiting). It is safe to call more than once.
func (fl *Follower) Leave() {
	f := fl.f
	f.mu.Lock()
	if _, ok := f.followers[fl]; ok {
		f.releaseLocked(fl, context.Canceled, nil)
	}
	f.mu.Unlock()
}

// Wait waits for the flight's entry (a sync follower). On ErrLeaderFailed,
// ErrTooSlow or ctx's end the follower goes on alone.
func (fl *Follower) Wait(ctx context.Context) (*Entry, error) {
	select {
	case <-fl.end:
		if fl.err != nil {
			return nil, fl.err
		}
		return fl.entry, nil
	case <-ctx.Done():
		fl.Leave()
		return nil, ctx.Err()
	}
}

// Next returns the next delta of a streaming follower: first those
// published before it joined, then the live ones, then the finish; then
// io.EOF. A failed leader ends it at once with ErrLeaderFailed, a full
// buffer with ErrTooSlow, ctx's end with ctx.Err().
func (fl *Follower) Next(ctx context.Context) (Delta, error) {
	select {
	case <-fl.end:
		if fl.err != nil {
			return Delta{}, fl.err
		}
	default:
	}
	if len(fl.replay) > 0 {
		d := fl.replay[0]
		fl.replay = fl.replay[1:]
		return d, nil
	}
	if len(fl.backlog) > 0 {
		d := fl.backlog[0]
		fl.backlog = fl.backlog[1:]
		fl.got = true
		return d, nil
	}
	select {
	case d := <-fl.ch:
		fl.got = true
		return d, nil
	case <-fl.end:
		if fl.err != nil {
			return Delta{}, fl.err
		}
		// completed: every delta was buffered before end was closed
		select {
		case d := <-fl.ch:
			fl.got = true
			return d, nil
		default:
		}
		if fl.finished {
			return Delta{}, io.EOF
		}
		fl.finished = true
		if !fl.got {
			// a sync leader publishes nothing: the follower streams the
			// entry, as a hit would
			fl.replay = fl.entry.Deltas()
			d := fl.replay[0]
			fl.replay = fl.replay[1:]
			return d, nil
		}
		return Delta{Kind: DeltaFinish, Finish: fl.entry.Finish, Usage: fl.entry.Usage}, nil
	case <-ctx.Done():
		fl.Leave()
		return Delta{}, ctx.Err()
	}
}

// Whole reports whether Entry is the whole answer, which may be stored
// again; false for the finish CompleteUnkept hands streaming followers.
// Like Entry, it is valid once the flight ended for the follower.
func (fl *Follower) Whole() bool { return fl.Entry() != nil && fl.whole }

// Entry is the flight's entry once Next returned the finish (or Wait
// returned); nil before. After CompleteUnkept it holds the finish, usage
// and who served it, no content (Whole false).
func (fl *Follower) Entry() *Entry {
	select {
	case <-fl.end:
		return fl.entry
	default:
		return nil
	}
}
