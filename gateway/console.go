package gateway

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"switchyard/gateway/console"
)

// registerConsole mounts the operator console (SPEC 12.4) at /ui/ when the
// admin API is on. With the admin API off nothing is mounted, so /ui/
// answers the same 404 as any unknown path. The console's files carry no
// data: everything it shows comes from the admin API with the admin key.
func (s *Server) registerConsole() {
	if !s.adminOn {
		return
	}
	h := http.StripPrefix("/ui", console.Handler())
	s.engine.GET("/ui", func(c *gin.Context) { c.Redirect(http.StatusMovedPermanently, "/ui/") })
	s.engine.GET("/ui/*file", gin.WrapH(h))
	s.engine.HEAD("/ui/*file", gin.WrapH(h))
}
