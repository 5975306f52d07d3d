package http

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/services/console/internal/app"
)

// mountKeysAndChannels adds the API keys and channels pages to a
// workspace's group.
func (c *Console) mountKeysAndChannels(ws *echo.Group) {
	ws.GET("/keys", c.keysPage)
	ws.POST("/keys", c.createKey)
	ws.POST("/keys/:key/revoke", c.revokeKey)
	ws.GET("/channels", c.channelsPage)
	ws.POST("/channels", c.createChannel)
	ws.POST("/channels/:channel/ai-mode", c.setChannelAIMode)
}

// keysView is the API keys page: the list, the create form, and the one
// key awaiting the revoke's confirmation.
type keysView struct {
	Keys []keyRow
	// Name and NameError are the create form's value and its refusal.
	Name      string
	NameError string
	// Notice reports what the last action did.
	Notice string
	// Confirm is the key whose revoke waits for "Revoke key".
	Confirm *keyRow
}

// keyRow is one key as the list draws it.
type keyRow struct {
	gatewayapi.APIKey
}

// Created is when the key was made, for people.
func (k keyRow) Created() string { return displayTime(k.CreatedAt) }

// LastUsed is when the key last authenticated a request, to within a
// minute; "Never" when it has not.
func (k keyRow) LastUsed() string {
	if k.LastUsedAt == nil {
		return "Never"
	}
	return displayTime(*k.LastUsedAt)
}

// Revoked is when the key was revoked; empty while it is active.
func (k keyRow) Revoked() string {
	if k.RevokedAt == nil {
		return ""
	}
	return displayTime(*k.RevokedAt)
}

// Label names the key in sentences: its name and its prefix.
func (k keyRow) Label() string { return "“" + k.Name + "” (" + k.Prefix + "…)" }

// displayTime draws a service's RFC 3339 time as "2006-01-02 15:04 UTC";
// a time that does not parse is shown as it came.
func displayTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// keysPage lists the workspace's keys. ?revoke=KEY asks to confirm that
// key's revoke; ?revoked=KEY reports one just revoked, ?created=KEY one a
// create form posted again had made.
func (c *Console) keysPage(ctx echo.Context) error {
	q := ctx.QueryParams()
	return c.drawKeys(ctx, keysView{}, http.StatusOK, "", func(kv *keysView) (int, string) {
		if id := q.Get("revoke"); id != "" {
			for i, k := range kv.Keys {
				if k.ID == id && k.RevokedAt == nil {
					kv.Confirm = &kv.Keys[i]
					return http.StatusOK, ""
				}
			}
			return http.StatusNotFound, "There is no active API key with this id in the workspace: it may have been revoked already. Choose a key from the list."
		}
		if id := q.Get("created"); id != "" {
			for _, k := range kv.Keys {
				if k.ID == id {
					kv.Notice = "Key " + k.Label() + " was created by this form's first post. The key itself was shown once, on the page that post led to, and cannot be shown again: if it was not stored, revoke this key and create another."
				}
			}
		}
		if id := q.Get("revoked"); id != "" {
			for _, k := range kv.Keys {
				if k.ID == id && k.RevokedAt != nil {
					kv.Notice = "Key " + k.Label() + " is revoked: requests made with it are refused from now on."
				}
			}
		}
		return http.StatusOK, ""
	})
}

// drawKeys reads the keys and draws the page with status and message;
// then, when given, adjusts the page once the keys are read and may
// change both.
func (c *Console) drawKeys(ctx echo.Context, kv keysView, status int, message string, then func(*keysView) (int, string)) error {
	id := ctx.Param("id")
	v := c.view(ctx, "API keys")
	v.Workspace, v.Current = id, "keys"
	keys, err := c.app.APIKeys(ctx.Request().Context(), operatorOf(ctx), id)
	if err != nil {
		v.Page = kv
		return c.serviceError(ctx, "keys", v, err)
	}
	kv.Keys = make([]keyRow, len(keys))
	for i, k := range keys {
		kv.Keys[i] = keyRow{k}
	}
	if then != nil {
		status, message = then(&kv)
	}
	v.Status, v.Message, v.Page = status, message, kv
	return c.render(ctx, status, "keys", v)
}

// keyCreatedView is the page that shows a new key, this once.
type keyCreatedView struct {
	Name string
	Key  string
}

// createKey creates a key and answers the page that shows it: the key is
// never put in a URL or a cookie, so it exists only in this answer, which
// no cache keeps (Cache-Control: no-store).
func (c *Console) createKey(ctx echo.Context) error {
	id := ctx.Param("id")
	name := ctx.FormValue("name")
	k, err := c.app.CreateAPIKey(ctx.Request().Context(), operatorOf(ctx), id, formID(ctx), name)
	if repeated, answer := c.formRepeat(ctx, err, func(keyID string) string {
		// The list, naming the key: its plaintext was in the first
		// post's answer only.
		return workspacePath(id) + "/keys?created=" + url.QueryEscape(keyID)
	}, "the keys below", func(status int, message string) error {
		return c.drawKeys(ctx, keysView{Name: name}, status, message, nil)
	}); repeated {
		return answer
	}
	if errors.Is(err, app.ErrKeyNameRequired) {
		return c.drawKeys(ctx, keysView{Name: name, NameError: "Give the key a name, such as the place it is used (ci, production)."},
			http.StatusBadRequest, "The key was not created: it needs a name.", nil)
	}
	if field, message, status, ok := fieldRefusal(err, "name"); ok && field == "name" {
		return c.drawKeys(ctx, keysView{Name: name, NameError: message}, status, "The key was not created: "+message, nil)
	}
	if err != nil {
		return c.actionError(ctx, "keys", err, func(v *view) error {
			return c.drawKeys(ctx, keysView{Name: name}, v.Status, "The key was not created. "+v.Message, nil)
		})
	}
	v := c.view(ctx, "API key created")
	v.Workspace, v.Current = id, "keys"
	v.Page = keyCreatedView{Name: strings.TrimSpace(name), Key: k.Key}
	return c.render(ctx, http.StatusCreated, "key_created", v)
}

// revokeKey revokes a key of the workspace and goes back to the list,
// which says so.
func (c *Console) revokeKey(ctx echo.Context) error {
	id, keyID := ctx.Param("id"), ctx.Param("key")
	_, err := c.app.RevokeAPIKey(ctx.Request().Context(), operatorOf(ctx), id, keyID)
	if errors.Is(err, app.ErrAPIKeyNotFound) {
		return errs.NotFound("api_key_not_found", "this workspace has no such API key: go back to the list of keys and choose one from it")
	}
	if err != nil {
		return c.actionError(ctx, "keys", err, func(v *view) error {
			return c.drawKeys(ctx, keysView{}, v.Status, "The key was not revoked. "+v.Message, nil)
		})
	}
	return ctx.Redirect(http.StatusSeeOther, workspacePath(id)+"/keys?revoked="+url.QueryEscape(keyID))
}

// actionError answers an action a service refused: a workspace that is
// not there is the 404 page, an error no service worded the 500 page, and
// a service's refusal redraws the action's page with its status and its
// message in words.
func (c *Console) actionError(ctx echo.Context, page string, err error, redraw func(*view) error) error {
	if errors.Is(err, app.ErrWorkspaceNotFound) {
		return toHTTP(err)
	}
	e, message, ok := c.refusal(ctx, page, err)
	if !ok {
		return err
	}
	v := view{Status: e.Status, Message: message}
	if e.Code == errs.CodeInvalidRequest {
		// "ai_mode must be …": the field keeps its spelling.
		v.Message = fullStop(e.Message)
	}
	return redraw(&v)
}

// fieldRefusal reads a service's invalid_request about one of fields:
// the services word them "FIELD reason" (e.g. "token is required for a
// telegram channel"), so the form can show the reason beside the field.
func fieldRefusal(err error, fields ...string) (field, message string, status int, ok bool) {
	e, isErr := errs.As(err)
	if !isErr || e.Code != errs.CodeInvalidRequest {
		return "", "", 0, false
	}
	for _, f := range fields {
		if strings.HasPrefix(e.Message, f+" ") {
			return f, fullStop(e.Message), e.Status, true
		}
	}
	return "", "", 0, false
}

// fullStop ends msg with a full stop; unlike sentence it leaves the first
// word as it is, since a service's field refusal starts with the field's
// name as the API spells it.
func fullStop(msg string) string {
	if msg == "" || strings.HasSuffix(msg, ".") {
		return msg
	}
	return msg + "."
}
