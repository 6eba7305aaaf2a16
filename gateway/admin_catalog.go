package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"switchyard/catalog"
)

// The admin API for public models, teams and keys (SPEC 11). Reads answer
// from this node's snapshot; writes go through Admin.apply like deployments
// and chains, so they are validated by catalog's pure rules, saved with
// compare-and-set and live on every replica within a second.

func (a *Admin) registerCatalog(g *gin.RouterGroup) {
	g.GET("/models", a.listModels)
	g.PUT("/models/:name", a.putModel)
	g.DELETE("/models/:name", a.deleteModel)
	g.GET("/teams", a.listTeams)
	g.GET("/teams/:name", a.getTeam)
	g.PUT("/teams/:name", a.putTeam)
	g.DELETE("/teams/:name", a.deleteTeam)
	g.GET("/teams/:name/keys", a.listKeys)
	g.POST("/teams/:name/keys", a.issueKey)
	g.PATCH("/teams/:name/keys/:id", a.patchKey)
	g.DELETE("/teams/:name/keys/:id", a.revokeKey)
	// *user, not :user: an end-user id may hold a path-escaped '/'
	// (GET is the Server's: it reads the edge's live usage)
	g.PUT("/teams/:name/users/*user", a.putUser)
	g.DELETE("/teams/:name/users/*user", a.deleteUser)
}

// aliases are the tier aliases an allowlist may name besides public models.
func (a *Admin) aliases() map[string]bool {
	out := map[string]bool{}
	for _, r := range a.cfg().SmartRouting.Routes {
		out[r.Alias] = true
	}
	return out
}

// modelView is a public model as GET /admin/models lists it.
type modelView struct {
	Name        string   `json:"name"`
	Strategy    string   `json:"strategy"`
	Objective   string   `json:"objective"`
	Source      string   `json:"source"` // "catalog" (set through the API or seeded from the file) or "default"
	Deployments []string `json:"deployments"`
	Enabled     int      `json:"enabled"` // enabled deployments
	Operations  []string `json:"operations"`
}

func viewModel(snap *catalog.Snapshot, name string) *modelView {
	m := snap.Model(name)
	if m == nil {
		return nil
	}
	v := &modelView{Name: name, Strategy: m.Strategy, Objective: m.Objective, Source: "default", Deployments: []string{}, Operations: []string{}}
	for _, ms := range snap.State.Models {
		if ms.Name == name {
			v.Source = "catalog"
		}
	}
	for _, d := range m.Pool {
		v.Deployments = append(v.Deployments, d.ID)
		if d.On {
			v.Enabled++
		}
	}
	for _, op := range []catalog.Operation{catalog.OpChat, catalog.OpEmbeddings, catalog.OpImages} {
		if m.Ops&op != 0 {
			v.Operations = append(v.Operations, op.String())
		}
	}
	return v
}

func (a *Admin) listModels(c *gin.Context) {
	snap := a.holder.Load()
	names := make([]string, 0, len(snap.Models))
	for name := range snap.Models {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]*modelView, 0, len(names))
	for _, name := range names {
		out = append(out, viewModel(snap, name))
	}
	c.JSON(http.StatusOK, gin.H{"version": snap.Version, "default_strategy": a.cfg().Routing.DefaultStrategy, "models": out})
}

func (a *Admin) putModel(c *gin.Context) {
	var m catalog.ModelSpec
	if !a.decode(c, &m) {
		return
	}
	name := c.Param("name")
	st, err := a.apply(c.Request.Context(), func(cur *catalog.State) (*catalog.State, error) {
		return catalog.PutModel(cur, name, m)
	})
	a.answerModel(c, st, name, err)
}

func (a *Admin) deleteModel(c *gin.Context) {
	name := c.Param("name")
	st, err := a.apply(c.Request.Context(), func(cur *catalog.State) (*catalog.State, error) {
		return catalog.DeleteModel(cur, name)
	})
	a.answerModel(c, st, name, err)
}

func (a *Admin) answerModel(c *gin.Context, st *catalog.State, name string, err error) {
	var v any
	if err == nil {
		v = gin.H{"version": st.Version, "model": viewModel(a.holder.Load(), name)}
	}
	a.answer(c, http.StatusOK, v, err)
}

// teamView is a team as the admin API shows it: its settings and its keys
// without any secret. The end users with limits of their own are counted,
// not listed (there may be thousands); GET .../users/{user} reads one.
type teamView struct {
	Name          string              `json:"name"`
	Models        []string            `json:"models"`
	RPM           int64               `json:"rpm"`
	TPM           int64               `json:"tpm"`
	MaxParallel   int64               `json:"max_parallel"`
	Budget        catalog.Budget      `json:"budget"`
	RequireUser   bool                `json:"require_user"`
	UserLimits    *catalog.LimitsSpec `json:"user_limits"`
	UserOverrides int                 `json:"user_overrides"`
	Cache         catalog.TeamCache   `json:"cache"` // {} inherits cache.enabled
	Keys          []catalog.KeyView   `json:"keys"`
}

func viewTeam(t catalog.TeamSpec) teamView {
	v := teamHead(t)
	v.Keys = make([]catalog.KeyView, 0, len(t.Keys))
	for _, k := range t.Keys {
		v.Keys = append(v.Keys, k.View())
	}
	return v
}

// teamHead is t's view without its keys.
func teamHead(t catalog.TeamSpec) teamView {
	v := teamView{Name: t.Name, Models: t.Models, RPM: t.RPM, TPM: t.TPM, MaxParallel: t.MaxParallel, Budget: t.Budget, RequireUser: t.RequireUser,
		UserLimits: t.UserLimits, UserOverrides: len(t.Users)}
	if t.Cache != nil {
		v.Cache = *t.Cache
	}
	return v
}

// writeTeam writes t's view as JSON (viewTeam's, byte for byte), its keys
// one at a time: a team may hold 100,000 keys (SPEC 16), and their views
// and JSON built at once were tens of MB for each console poll.
func writeTeam(w *bufio.Writer, t catalog.TeamSpec) error {
	head, err := json.Marshal(teamHead(t))
	if err != nil {
		return err
	}
	// keys is the view's last field, nil in the head
	head, ok := bytes.CutSuffix(head, []byte(`null}`))
	if !ok {
		return errors.New("admin: a team's view does not end with its keys")
	}
	_, _ = w.Write(head)
	if err := writeKeys(w, t.Keys); err != nil {
		return err
	}
	return w.WriteByte('}')
}

// writeKeys writes keys' views as a JSON array, one key at a time.
func writeKeys(w *bufio.Writer, keys catalog.KeyList) error {
	_ = w.WriteByte('[')
	for i, k := range keys {
		b, err := json.Marshal(k.View())
		if err != nil {
			return err
		}
		if i > 0 {
			_ = w.WriteByte(',')
		}
		if _, err := w.Write(b); err != nil {
			return err // the client is gone
		}
	}
	return w.WriteByte(']')
}

// streamJSON answers 200 with the JSON that write writes through a buffer.
func streamJSON(c *gin.Context, write func(*bufio.Writer) error) {
	w := c.Writer
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	if write(bw) == nil {
		_ = bw.Flush()
	}
}

func findTeam(st *catalog.State, name string) (catalog.TeamSpec, bool) {
	if st != nil {
		for _, t := range st.Teams {
			if t.Name == name {
				return t, true
			}
		}
	}
	return catalog.TeamSpec{}, false
}

func errNoTeam(name string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "team_not_found", Param: "name",
		Message: "no team named \"" + name + "\""}
}

// listTeams answers GET /admin/teams: {"teams": [...], "version": n}, the
// object c.JSON made of the whole list, written a team at a time and each
// team a key at a time. The console asks every 2 s: with 10,000 teams the
// list and its 4 MB of JSON built at once took a node from 130 to 158 MB
// RSS in three asks.
func (a *Admin) listTeams(c *gin.Context) {
	st := a.holder.Load().State
	streamJSON(c, func(bw *bufio.Writer) error {
		_, _ = bw.WriteString(`{"teams":[`)
		for i, t := range st.Teams {
			if i > 0 {
				_ = bw.WriteByte(',')
			}
			if err := writeTeam(bw, t); err != nil {
				return err // the client is gone
			}
		}
		_, err := bw.WriteString(`],"version":` + strconv.FormatInt(st.Version, 10) + "}")
		return err
	})
}

func (a *Admin) getTeam(c *gin.Context) {
	st := a.holder.Load().State
	t, ok := findTeam(st, c.Param("name"))
	if !ok {
		writeError(c, errNoTeam(c.Param("name")))
		return
	}
	streamJSON(c, func(bw *bufio.Writer) error {
		_, _ = bw.WriteString(`{"team":`)
		if err := writeTeam(bw, t); err != nil {
			return err
		}
		_, err := bw.WriteString(`,"version":` + strconv.FormatInt(st.Version, 10) + "}")
		return err
	})
}

// teamBody is PUT /admin/teams/{name}: catalog.TeamInput, plus the fields
// a client may echo back from a GET (name, keys, user_overrides) so they
// can be refused with a message instead of "unknown field".
type teamBody struct {
	catalog.TeamInput
	Name          string          `json:"name"`
	Keys          json.RawMessage `json:"keys"`
	UserOverrides json.RawMessage `json:"user_overrides"`
}

func (a *Admin) putTeam(c *gin.Context) {
	var b teamBody
	if !a.decode(c, &b) {
		return
	}
	name := c.Param("name")
	if b.Name != "" && b.Name != name {
		writeError(c, errBadRequest("name", "body name \""+b.Name+"\" differs from the path name \""+name+"\""))
		return
	}
	if len(b.Keys) > 0 {
		writeError(c, errBadRequest("keys", "keys are not part of a team's settings: issue them with POST /admin/teams/"+name+"/keys and revoke them with DELETE /admin/teams/"+name+"/keys/{id}"))
		return
	}
	if len(b.UserOverrides) > 0 {
		writeError(c, errBadRequest("user_overrides", "user_overrides is a count, not a setting: give an end user limits of their own with PUT /admin/teams/"+name+"/users/{user}"))
		return
	}
	aliases := a.aliases()
	var created bool
	st, err := a.apply(c.Request.Context(), func(cur *catalog.State) (*catalog.State, error) {
		next, isNew, err := catalog.PutTeam(cur, name, b.TeamInput, aliases)
		created = isNew
		return next, err
	})
	var v any
	if err == nil {
		t, _ := findTeam(st, name)
		v = gin.H{"version": st.Version, "created": created, "team": viewTeam(t)}
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	a.answer(c, status, v, err)
}

func (a *Admin) deleteTeam(c *gin.Context) {
	name := c.Param("name")
	var revoked int
	st, err := a.apply(c.Request.Context(), func(cur *catalog.State) (*catalog.State, error) {
		t, _ := findTeam(cur, name)
		revoked = len(t.Keys)
		return catalog.DeleteTeam(cur, name)
	})
	a.answer(c, http.StatusOK, gin.H{"version": versionOf(st), "deleted": name, "keys_revoked": revoked}, err)
}

func (a *Admin) listKeys(c *gin.Context) {
	st := a.holder.Load().State
	t, ok := findTeam(st, c.Param("name"))
	if !ok {
		writeError(c, errNoTeam(c.Param("name")))
		return
	}
	name, _ := json.Marshal(t.Name)
	streamJSON(c, func(bw *bufio.Writer) error {
		_, _ = bw.WriteString(`{"keys":`)
		if err := writeKeys(bw, t.Keys); err != nil {
			return err
		}
		_, err := bw.WriteString(`,"team":` + string(name) + `,"version":` + strconv.FormatInt(st.Version, 10) + "}")
		return err
	})
}

// keyBody is POST /admin/teams/{name}/keys; expires_at is RFC 3339. The
// key level of SPEC 3.1 (rpm, tpm, max_parallel, budget) is flat in it.
type keyBody struct {
	Name      string   `json:"name"`
	ExpiresAt *string  `json:"expires_at"`
	Models    []string `json:"models"`
	catalog.LimitsSpec
}

// issuedKey is the 201 answer: the only time the clear key is shown.
type issuedKey struct {
	Team string `json:"team"`
	Key  string `json:"key"`
	catalog.KeyView
}

func (a *Admin) issueKey(c *gin.Context) {
	var b keyBody
	if !a.decode(c, &b) {
		return
	}
	in := catalog.KeyInput{Name: b.Name, Models: b.Models, LimitsSpec: b.LimitsSpec}
	if b.ExpiresAt != nil && *b.ExpiresAt != "" {
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(*b.ExpiresAt))
		if err != nil {
			writeError(c, errBadRequest("expires_at", "expires_at: \""+*b.ExpiresAt+"\" is not an RFC 3339 time such as 2027-01-31T00:00:00Z"))
			return
		}
		in.ExpiresAt = &t
	}
	team, aliases := c.Param("name"), a.aliases()
	var iss catalog.Issued
	_, err := a.apply(c.Request.Context(), func(cur *catalog.State) (*catalog.State, error) {
		next, is, err := catalog.IssueKey(cur, team, in, aliases, a.now(), a.rnd)
		iss = is
		return next, err
	})
	var v any
	if err == nil {
		v = issuedKey{Team: team, Key: iss.Key, KeyView: iss.Entry.View()}
		c.Header("Cache-Control", "no-store")
	}
	a.answer(c, http.StatusCreated, v, err)
}

// patchKey is PATCH /admin/teams/{name}/keys/{id} (SPEC 3.1): a JSON merge
// patch of the key's name, expiry, models and limits, saved like any
// catalog change and so live on every replica within a second.
func (a *Admin) patchKey(c *gin.Context) {
	var p catalog.KeyPatch
	if !a.decode(c, &p) {
		return
	}
	team, id, aliases := c.Param("name"), c.Param("id"), a.aliases()
	st, err := a.apply(c.Request.Context(), func(cur *catalog.State) (*catalog.State, error) {
		return catalog.PatchKey(cur, team, id, p, aliases, a.now())
	})
	var v any
	if err == nil {
		t, _ := findTeam(st, team)
		for _, k := range t.Keys {
			if k.ID == id {
				v = gin.H{"version": st.Version, "team": team, "key": k.View()}
			}
		}
	}
	a.answer(c, http.StatusOK, v, err)
}

func (a *Admin) revokeKey(c *gin.Context) {
	team, id := c.Param("name"), c.Param("id")
	st, err := a.apply(c.Request.Context(), func(cur *catalog.State) (*catalog.State, error) {
		return catalog.RevokeKey(cur, team, id)
	})
	a.answer(c, http.StatusOK, gin.H{"version": versionOf(st), "team": team, "revoked": id}, err)
}
