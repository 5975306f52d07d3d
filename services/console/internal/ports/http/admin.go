package http

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/console/internal/app"
)

// Admin is the console's part of the operators' API (parleyctl), served on
// the rpc "admin" endpoint.
type Admin struct {
	app *app.App
}

// NewAdmin returns the admin API.
func NewAdmin(a *app.App) *Admin { return &Admin{app: a} }

// Mount adds the admin routes to e.
func (a *Admin) Mount(e *echo.Echo) {
	e.POST("/admin/operators", a.createOperator)
}

// operatorDTO is an operator as the admin contract answers it; the
// password hash never leaves the console.
type operatorDTO struct {
	ID          string  `json:"id"`
	Email       string  `json:"email"`
	WorkspaceID *string `json:"workspace_id"`
}

func (a *Admin) createOperator(c echo.Context) error {
	var in struct {
		Email       string `json:"email"`
		Password    string `json:"password"`
		WorkspaceID string `json:"workspace_id"`
	}
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	o, err := a.app.CreateOperator(c.Request().Context(), app.NewOperator{Email: in.Email, Password: in.Password, WorkspaceID: in.WorkspaceID})
	if err != nil {
		return toHTTP(err)
	}
	out := operatorDTO{ID: o.ID, Email: o.Email}
	if o.WorkspaceID != "" {
		out.WorkspaceID = &o.WorkspaceID
	}
	return c.JSON(http.StatusCreated, out)
}
