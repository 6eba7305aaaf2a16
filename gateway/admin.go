package gateway

import "github.com/gin-gonic/gin"

// Admin serves the admin write API (SPEC 11) over a catalog store.
type Admin struct{}

func (a *Admin) register(g *gin.RouterGroup) {}
