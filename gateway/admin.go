package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"switchyard/catalog"
	"switchyard/config"
)

// Admin serves the admin write API (SPEC 11): deployments and fallback
// chains, validated and applied through catalog's pure lifecycle functions,
// persisted in a Store with compare-and-set, then published as a new
// snapshot. Writes on this node are serialized by mu; writers on other
// replicas are caught by the store's version check.
type Admin struct {
	// Immutable after NewAdmin.
	cfg     func() *config.Config // the live configuration (it changes on reload)
	holder  *catalog.Holder
	store   catalog.Store
	publish func(*catalog.State) // builds and publishes a snapshot on this node
	now     func() time.Time
	rnd     io.Reader // key material: crypto/rand.Reader
	maxBody int64

	mu sync.Mutex // serializes this node's writes
}

// NewAdmin returns the admin API over store. cfg returns the live
// configuration. publish makes a saved state live on this node; other
// replicas hear of it through the store (the Redis store publishes a change
// notice in the same script as the save).
func NewAdmin(cfg func() *config.Config, holder *catalog.Holder, store catalog.Store, publish func(*catalog.State)) *Admin {
	return &Admin{cfg: cfg, holder: holder, store: store, publish: publish, now: time.Now, rnd: rand.Reader, maxBody: 1 << 20}
}

func (a *Admin) register(g *gin.RouterGroup) {
	g.GET("/deployments", a.listDeployments)
	g.PUT("/deployments/:id", a.putDeployment)
	g.DELETE("/deployments/:id", a.deleteDeployment)
	g.POST("/deployments/:id/disable", func(c *gin.Context) { a.setEnabled(c, false) })
	g.POST("/deployments/:id/enable", func(c *gin.Context) { a.setEnabled(c, true) })
	g.GET("/fallbacks", a.listFallbacks)
	g.PUT("/fallbacks", a.putFallback)
	g.DELETE("/fallbacks", a.deleteFallback)
	a.registerCatalog(g)
}

func (a *Admin) providers() map[string]string {
	m := map[string]string{}
	for _, p := range a.cfg().Providers {
		m[p.Name] = p.Kind
	}
	return m
}

// apply runs one lifecycle change: compute the next state from the current
// one, save it with compare-and-set, publish it. On a concurrent change by
// another replica it reloads and recomputes (the change is re-validated
// against the newer state).
func (a *Admin) apply(ctx context.Context, change func(*catalog.State) (*catalog.State, error)) (*catalog.State, error) {
	st, _, err := a.applyReport(ctx, change)
	return st, err
}

// applyReport is apply that also reports what the change left dangling: the
// allowlist entries and tier route targets that now name a model with no
// deployment (allowed, SPEC 11, and said in the answer).
func (a *Admin) applyReport(ctx context.Context, change func(*catalog.State) (*catalog.State, error)) (*catalog.State, []string, error) {
	var before *catalog.State
	st, err := a.applyLocked(ctx, func(cur *catalog.State) (*catalog.State, error) {
		before = cur
		next, err := change(cur)
		if err == nil {
			if p := next.KeyProblems(); len(p) > 0 {
				return nil, &catalog.Error{Status: http.StatusConflict, Field: "keys", Message: p[0]}
			}
		}
		return next, err
	})
	if err != nil {
		return nil, nil, err
	}
	return st, catalog.NewlyDangling(before, st, a.cfg().SmartRouting.Routes), nil
}

func (a *Admin) applyLocked(ctx context.Context, change func(*catalog.State) (*catalog.State, error)) (*catalog.State, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for try := 0; try < 5; try++ {
		// The change is computed against the stored state, not this node's
		// snapshot: a notice from another replica may still be on its way,
		// and a write based on the older state would fail (or validate)
		// against what is no longer true. Admin writes are off the request
		// path, so the extra read costs nothing that matters.
		cur := a.holder.Load().State
		stored, ok, err := a.store.Load(ctx)
		if err != nil {
			return nil, catalog.ErrUnavailable
		}
		if ok && stored.Version > cur.Version {
			catalog.MigrateFrom(stored, cur)
			a.publish(stored)
			cur = stored
		}
		// the store is the base of the compare-and-set; when it holds
		// nothing, or a version older than the one served (a Redis that
		// restarted empty or from an older snapshot; replicas never go
		// back, SPEC 9), the served catalog is stored again with the
		// change, its version moving forward, instead of every write
		// failing as a conflict until each node restarts
		base := cur.Version
		if !ok {
			base = 0
		} else if stored.Version < cur.Version {
			base = stored.Version
		}
		next, err := change(cur)
		if err != nil {
			return nil, err
		}
		next.Version = cur.Version + 1
		// a save whose reply was lost is read back by the store (one
		// bounded read): landed is nil (the change is answered as made, a
		// key issue with its key: a client retrying after a false 503
		// would make a second key whose secret nobody saw), never sent is
		// ErrUnavailable, not found out is ErrSaveUnknown (SPEC 11)
		err = a.store.Save(ctx, base, next)
		if errors.Is(err, catalog.ErrConflict) {
			st, ok, lerr := a.store.Load(ctx)
			if lerr != nil {
				return nil, catalog.ErrUnavailable
			}
			if ok {
				a.publish(st)
			}
			continue
		}
		if errors.Is(err, catalog.ErrSaveUnknown) {
			return nil, catalog.ErrSaveUnknown
		}
		if err != nil {
			return nil, catalog.ErrUnavailable
		}
		a.publish(next)
		return next, nil
	}
	return nil, &catalog.Error{Status: http.StatusConflict, Message: "the catalog kept changing concurrently; retry"}
}

func (a *Admin) answer(c *gin.Context, status int, v any, err error) {
	if err != nil {
		var ce *catalog.Error
		switch {
		case errors.As(err, &ce):
			writeError(c, &apiError{Status: ce.Status, Type: "invalid_request_error", Param: ce.Field, Message: ce.Message})
		case errors.Is(err, catalog.ErrSaveUnknown):
			writeError(c, &apiError{Status: http.StatusServiceUnavailable, Type: "store_unavailable", Code: "catalog_save_unconfirmed",
				Message: "the catalog store did not confirm the change and could not be read back: it may have been applied; read the catalog (GET) before retrying"})
		case errors.Is(err, catalog.ErrUnavailable):
			writeError(c, &apiError{Status: http.StatusServiceUnavailable, Type: "store_unavailable", Code: "catalog_store_unavailable",
				Message: "the catalog store is unreachable: nothing was changed; retry when it is back"})
		default:
			writeError(c, &apiError{Status: http.StatusInternalServerError, Type: "internal_error", Message: err.Error()})
		}
		return
	}
	c.JSON(status, v)
}

// decode reads a JSON body strictly: unknown fields and trailing data are
// 400 errors naming what is wrong.
func (a *Admin) decode(c *gin.Context, v any) bool {
	body := http.MaxBytesReader(c.Writer, c.Request.Body, a.maxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := "request body is not valid JSON for this endpoint: " + err.Error()
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(c, &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Message: "admin body over 1 MiB"})
			return false
		}
		if errors.Is(err, io.EOF) {
			msg = "request body is empty: send a JSON object"
		}
		param := ""
		var te *json.UnmarshalTypeError
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			param = strings.Trim(f, `"`)
		} else if errors.As(err, &te) {
			param = jsonField(te.Field)
			msg = param + ": " + typeFix(te)
			if param == "" {
				msg = "request body " + typeFix(te)
			}
		} else if errors.Is(err, config.ErrPeriod) {
			param = "budget.period" // the only period an admin body carries
		}
		writeError(c, errBadRequest(param, msg))
		return false
	}
	// the rest of the body is whitespace only (dec.More takes a closing
	// ']' or '}' for the end of a list it is not in)
	rest, err := io.ReadAll(io.MultiReader(dec.Buffered(), body))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(c, &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Message: "admin body over 1 MiB"})
		return false
	}
	if len(bytes.Trim(rest, " \t\r\n")) > 0 {
		writeError(c, errBadRequest("", "request body has data after the JSON object"))
		return false
	}
	return true
}

func (a *Admin) listDeployments(c *gin.Context) {
	st := a.holder.Load().State
	c.JSON(http.StatusOK, gin.H{"version": st.Version, "deployments": st.Deployments})
}

func (a *Admin) putDeployment(c *gin.Context) {
	var d config.Deployment
	if !a.decode(c, &d) {
		return
	}
	id := c.Param("id")
	if d.ID == "" {
		d.ID = id
	}
	if d.ID != id {
		writeError(c, errBadRequest("id", "body id \""+d.ID+"\" differs from the path id \""+id+"\""))
		return
	}
	st, warn, err := a.applyReport(c.Request.Context(), func(cur *catalog.State) (*catalog.State, error) {
		return catalog.PutDeployment(cur, d, a.providers())
	})
	a.answer(c, http.StatusOK, gin.H{"version": versionOf(st), "deployment": findDeployment(st, id), "warnings": warn}, err)
}

func (a *Admin) deleteDeployment(c *gin.Context) {
	id := c.Param("id")
	st, warn, err := a.applyReport(c.Request.Context(), func(cur *catalog.State) (*catalog.State, error) {
		return catalog.DeleteDeployment(cur, id)
	})
	a.answer(c, http.StatusOK, gin.H{"version": versionOf(st), "deleted": id, "warnings": warn}, err)
}

func (a *Admin) setEnabled(c *gin.Context, on bool) {
	id := c.Param("id")
	st, err := a.apply(c.Request.Context(), func(cur *catalog.State) (*catalog.State, error) {
		return catalog.SetEnabled(cur, id, on)
	})
	a.answer(c, http.StatusOK, gin.H{"version": versionOf(st), "deployment": findDeployment(st, id)}, err)
}

func (a *Admin) listFallbacks(c *gin.Context) {
	st := a.holder.Load().State
	out := st.Fallbacks
	if out == nil {
		out = []catalog.Chain{}
	}
	c.JSON(http.StatusOK, gin.H{"version": st.Version, "fallbacks": out})
}

func (a *Admin) putFallback(c *gin.Context) {
	var ch catalog.Chain
	if !a.decode(c, &ch) {
		return
	}
	if ch.Reason == "" {
		ch.Reason = string(catalog.ReasonGeneral)
	}
	st, err := a.apply(c.Request.Context(), func(cur *catalog.State) (*catalog.State, error) {
		return catalog.PutFallback(cur, ch)
	})
	a.answer(c, http.StatusOK, gin.H{"version": versionOf(st), "fallback": ch}, err)
}

func (a *Admin) deleteFallback(c *gin.Context) {
	primary, reason := c.Query("primaryModel"), c.Query("reason")
	if primary == "" {
		writeError(c, errBadRequest("primaryModel", "query parameter primaryModel is required"))
		return
	}
	st, err := a.apply(c.Request.Context(), func(cur *catalog.State) (*catalog.State, error) {
		return catalog.DeleteFallback(cur, primary, reason)
	})
	a.answer(c, http.StatusOK, gin.H{"version": versionOf(st), "deleted": gin.H{"primaryModel": primary, "reason": reasonOr(reason)}}, err)
}

func reasonOr(r string) string {
	if r == "" {
		return string(catalog.ReasonGeneral)
	}
	return r
}

func versionOf(st *catalog.State) int64 {
	if st == nil {
		return 0
	}
	return st.Version
}

func findDeployment(st *catalog.State, id string) any {
	if st == nil {
		return nil
	}
	for _, d := range st.Deployments {
		if d.ID == id {
			return d
		}
	}
	return nil
}

// jsonField drops the Go names of embedded structs from a decoding error's
// field path ("TeamInput.rpm" -> "rpm"), leaving the JSON names.
func jsonField(path string) string {
	parts := strings.Split(path, ".")
	kept := parts[:0]
	for _, p := range parts {
		if p != "" && !(p[0] >= 'A' && p[0] <= 'Z') {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, ".")
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// typeFix says what a member of the wrong JSON type must be instead: a
// budget period is a string (its Go type is a struct), a count a whole
// number within int64 (1e3 and 2^63 are JSON numbers too), an amount a
// number within float64's range.
func typeFix(te *json.UnmarshalTypeError) string {
	got, number := "a JSON "+te.Value, strings.HasPrefix(te.Value, "number")
	if lit := strings.TrimSpace(strings.TrimPrefix(te.Value, "number")); number && lit != "" {
		got = lit
	}
	t := te.Type
	for t.Kind() == reflect.Pointer {
		t = t.Elem() // a merge patch's member (catalog.Patch) decodes into a pointer
	}
	k := t.Kind()
	switch {
	case t == reflect.TypeFor[config.Period]():
		return "must be a string: daily, weekly, monthly or a duration such as \"720h\", got " + got
	case reflect.PointerTo(t).Implements(textUnmarshaler):
		return "must be a JSON string, got " + got
	case k >= reflect.Int && k <= reflect.Uint64:
		if number {
			return "must be a whole number (no fraction or exponent) within 0.." + strconv.FormatInt(math.MaxInt64, 10) + ", got " + got
		}
		return "must be a whole number, got " + got
	case k == reflect.Float32 || k == reflect.Float64:
		if number {
			return "must be a number within range (at most about 1.8e308), got " + got
		}
	}
	return "must be a JSON " + jsonKind(k.String()) + ", got " + got
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"), strings.HasPrefix(goKind, "float"):
		return "number"
	case goKind == "slice", goKind == "array":
		return "array"
	case goKind == "struct", goKind == "map":
		return "object"
	case goKind == "bool":
		return "boolean"
	}
	return goKind
}
