package gateway

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/edge"
)

// End users' own limits (SPEC 3.1): PUT and DELETE
// /admin/teams/{team}/users/{user} change the catalog like every admin
// write; GET reads the user's effective limits and live usage from this
// node's snapshot and the edge state.

// userParam is the end user of the path: the *user wildcard without its
// leading '/', already path-unescaped (an id may hold '/' as %2F).
func userParam(c *gin.Context) string { return strings.TrimPrefix(c.Param("user"), "/") }

// limitsView renders one level's effective limits (0: no limit).
func limitsView(l config.Limits) gin.H {
	var budget any
	if l.Budget.USD > 0 {
		budget = gin.H{"usd": l.Budget.USD, "period": l.Budget.Period.String(), "alert_at": l.Budget.AlertAt}
	}
	return gin.H{"rpm": l.RPM, "tpm": l.TPM, "max_parallel": l.MaxParallel, "budget": budget}
}

// effectiveUser is the user's limits in team t (nil: a team the snapshot
// does not have): their own over the team's user_limits (zero when neither
// sets any), and whether they are their own.
func effectiveUser(t *catalog.Team, user string) (config.Limits, bool) {
	if t == nil {
		return config.Limits{}, false
	}
	var l config.Limits
	if p := t.UserLevel(user); p != nil {
		l = *p
	}
	return l, t.UserOverride(user)
}

func (a *Admin) putUser(c *gin.Context) {
	var u catalog.UserSpec
	if !a.decode(c, &u) {
		return
	}
	team, user := c.Param("name"), userParam(c)
	var created bool
	st, err := a.apply(c.Request.Context(), func(cur *catalog.State) (*catalog.State, error) {
		next, isNew, err := catalog.PutUser(cur, team, user, u)
		created = isNew
		return next, err
	})
	var v any
	if err == nil {
		t, _ := findTeam(st, team)
		l, _ := effectiveUser(a.holder.Load().Team(team), user)
		v = gin.H{"version": st.Version, "team": team, "user": user, "created": created, "override": true,
			"own": t.Users[user], "limits": limitsView(l)}
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	a.answer(c, status, v, err)
}

func (a *Admin) deleteUser(c *gin.Context) {
	team, user := c.Param("name"), userParam(c)
	st, err := a.apply(c.Request.Context(), func(cur *catalog.State) (*catalog.State, error) {
		return catalog.DeleteUser(cur, team, user)
	})
	var v any
	if err == nil {
		l, _ := effectiveUser(a.holder.Load().Team(team), user)
		v = gin.H{"version": st.Version, "team": team, "user": user, "override": false, "limits": limitsView(l)}
	}
	a.answer(c, http.StatusOK, v, err)
}

// handleUser is GET /admin/teams/{name}/users/{user}: the end user's
// effective limits, whether they are their own, and their live usage
// against them, cluster-wide when Redis answers ("shared": true). Any user
// id is answered: end users are not registered, a user never seen has
// the team's user_limits and no usage.
func (s *Server) handleUser(c *gin.Context) {
	name, user := c.Param("name"), userParam(c)
	if err := catalog.CheckUser(user); err != nil {
		writeError(c, errBadRequest("user", err.Error()))
		return
	}
	snap := s.Catalog.Load()
	t := snap.Team(name)
	if t == nil {
		writeError(c, errNoTeam(name))
		return
	}
	l, override := effectiveUser(t, user)
	var own any
	if override { // the user's own spec, as stored (only then: a walk of the state's teams)
		if ts, ok := findTeam(snap.State, name); ok {
			own = ts.Users[user]
		}
	}
	h, ok := s.levelUsage(c, t, edge.Level{Kind: edge.LevelUser, ID: user, Name: user, Limits: t.UserLevel(user)}, l)
	if !ok {
		return
	}
	h["user"], h["override"], h["own"] = user, override, own
	c.JSON(http.StatusOK, h)
}
