package http

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	consoleapi "github.com/parleyhq/parley/pkg/api/console"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/console/internal/app"
)

// AdminDeps are what NewAdmin builds the admin API from.
type AdminDeps struct {
	App *app.App
	Log *zap.Logger
}

// admin is the console's part of the operators' API (parleyctl).
type admin struct {
	app *app.App
}

// NewAdmin returns the admin API, served on the rpc "admin" endpoint; its
// routes and bodies are consoleapi.AdminRoutes.
func NewAdmin(d AdminDeps) *echo.Echo {
	a := &admin{app: d.App}
	e := httpx.NewEcho(d.Log)
	e.POST("/admin/operators", a.createOperator)
	return e
}

func (a *admin) createOperator(c echo.Context) error {
	var in consoleapi.NewOperator
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	o, err := a.app.CreateOperator(c.Request().Context(), app.NewOperator{Email: in.Email, Password: in.Password, WorkspaceID: in.WorkspaceID})
	if err != nil {
		return toHTTP(err)
	}
	// The password hash never leaves the console.
	out := consoleapi.Operator{ID: o.ID, Email: o.Email}
	if o.WorkspaceID != "" {
		out.WorkspaceID = &o.WorkspaceID
	}
	return c.JSON(http.StatusCreated, out)
}
